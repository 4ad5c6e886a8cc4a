package mathverify

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		response, want string
		ok             bool
	}{
		{`so \boxed{5}`, "5", true},
		{`\boxed{\frac{1}{2}}`, `\frac{1}{2}`, true},
		{`\boxed{\{1, 2\}}`, `\{1, 2\}`, true},
		{`first \boxed{1} then \fbox{2}`, "2", true},
		{`first \fbox{1} then \boxed{2}`, "2", true},
		{`$\boxed 7$`, "7", true},
		{`\boxed{3} and \boxed{`, "3", true}, // a box that never closes is skipped
		{`\boxedx{3}`, "", false},
		{"work\nAnswer: $\\frac{1}{2}$", `\frac{1}{2}`, true},
		{"work\n**Answer:** 12.", "12", true},
		{"Answer: 1\nAnswer: 2", "2", true},
		{"\\boxed{9}\nAnswer: 8", "9", true}, // a box outranks an Answer line
		{"Answer: 8\n<answer>9</answer>", "8", true},
		{"<answer> 9 </answer>", "9", true},
		{"<answer>1</answer><answer>2</answer>", "2", true},
		{`\boxed{}`, "", false},
		{"Answer: $$", "", false},
		{"The answer is 42.", "", false},
		{"", "", false},
	} {
		got, ok := Extract(tc.response)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Extract(%q) = %q, %v; want %q, %v", tc.response, got, ok, tc.want, tc.ok)
		}
	}
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`$\frac12$`, "(1/2)"},
		{`\dfrac{\sqrt2}{2}`, "((sqrt(2))/2)"},
		{`\sqrt[3]{8}`, "((8)^(1/3))"},
		{`2^{10}`, "2^(10)"},
		{`\left( 1, 2 \right]`, "(1, 2]"},
		{`\left\{ 1,2 \right\}`, `\{1, 2\}`},
		{`1{,}234`, "1234"},
		{`1\,234`, "1234"},
		{"1,234", "1234"},
		{"3, 700", "3, 700"}, // a list, not a thousands separator
		{`30^{\circ}`, "30"},
		{`50\%`, "50"},
		{`\$5`, "5"},
		{`5\text{ cm}^2`, "5"},
		{"12 dollars.", "12"},
		{`\text{(C)}`, "C"},
		{`\(x \cdot y\)`, "x*y"},
		{`1 \pm \sqrt{2}`, "1±sqrt(2)"},
		{`(-\infty, 0) \cup (1, \infty)`, "(-inf, 0)∪(1, inf)"},
		{"−3", "-3"},
	} {
		if got := Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if got := Normalize(Normalize(tc.in)); got != Normalize(tc.in) {
			t.Errorf("Normalize is not idempotent on %q: %q then %q", tc.in, Normalize(tc.in), got)
		}
	}
}

// TestEqualSymmetric: for every row of the table judged without the fallback, Equal gives the
// same answer with the sides swapped.
func TestEqualSymmetric(t *testing.T) {
	for i, p := range readPairs(t) {
		if p.LastNumberFallback {
			continue
		}
		a, ok := Extract(p.Response)
		if !ok {
			continue
		}
		if ab, ba := Equal(a, p.Truth, Options{}), Equal(p.Truth, a, Options{}); ab != ba {
			t.Errorf("row %d: Equal(%q, %q) = %v but swapped %v", i+1, a, p.Truth, ab, ba)
		}
	}
}

// TestLastNumberFallback: off by default, and with it on only a numeric truth is matched by the
// prediction's last number.
func TestLastNumberFallback(t *testing.T) {
	on := Options{LastNumberFallback: true}
	for _, tc := range []struct {
		pred, truth string
		opts        Options
		want        bool
	}{
		{"The answer is 42.", "42", Options{}, false},
		{"The answer is 42.", "42", on, true},
		{"42 or 43", "42", on, false},
		{"3 and 4", "4", on, true},
		{`\frac{1}{2} of it`, "0.5", on, true},
		{"the set {1}", `\{1\}`, on, false}, // not a numeric truth
		{"nothing", "42", on, false},
	} {
		if got := Equal(tc.pred, tc.truth, tc.opts); got != tc.want {
			t.Errorf("Equal(%q, %q, %+v) = %v; want %v", tc.pred, tc.truth, tc.opts, got, tc.want)
		}
	}
	if got := Check("no box here, 17", "17", Options{}); got.Correct || got.Extracted != "" {
		t.Errorf("Check without fallback = %+v; want nothing extracted", got)
	}
	if got := Check("no box here, 17", "17", on); !got.Correct || got.Extracted != "17" {
		t.Errorf("Check with fallback = %+v; want 17, correct", got)
	}
}

// TestDeepAndLong: nesting and length far beyond the bounds end quickly, compared as text.
func TestDeepAndLong(t *testing.T) {
	deep := strings.Repeat(`\frac{`, 5000) + "1" + strings.Repeat("}{2}", 5000)
	parens := strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000)
	sum := strings.Repeat("1+", 400) + "1"
	pairs := `\{` + strings.Repeat("(1, 2), ", 120) + `(1, 3)\}`
	swapped := `\{(1, 3), ` + strings.Repeat("(1, 2), ", 120)[:len(strings.Repeat("(1, 2), ", 120))-2] + `\}`
	_ = Equal(pairs, swapped, Options{}) // a big set of tuples: bounded by maxCompares, whatever it says
	for _, s := range []string{deep, parens, sum, pairs, strings.Repeat("9", 5000), strings.Repeat(`\sqrt`, 3000) + "2", "2^" + strings.Repeat("9", 300) + "^9^9"} {
		_ = Check(`\boxed{`+s+`}`, "1", Options{LastNumberFallback: true})
		if !Equal(s, s, Options{}) {
			t.Errorf("Equal(s, s) false for a %d-byte s", len(s))
		}
	}
	if !Equal(sum, "401", Options{}) {
		t.Errorf("a sum of 401 ones is not 401")
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range [][2]string{
		{`\boxed{\frac12}`, "0.5"}, {`\boxed{3, 7}`, "7"}, {"Answer: $[1, 3)$", "[1,3]"}, {`\boxed{\sqrt[3]{8}}`, "2"},
		{`\boxed{y = 2x+1}`, "y=1+2x"}, {`\boxed{\{1, 2\}}`, `\{2,1\}`}, {`\boxed{1 \pm \sqrt 2}`, `1+\sqrt2, 1-\sqrt2`},
		{"<answer>(C)</answer>", "C"}, {`\boxed{2^{10}}`, "1024"}, {`\boxed{\frac{\sqrt2}{2}}`, "0.7071067811865476"},
		{`\boxed{(-\infty, 2] \cup (3, \infty)}`, `(-\infty,2]\cup(3,\infty)`}, {`\boxed{1{,}234\text{ cm}}`, "1234"},
		{`\boxed{\binom{5}{2}}`, "10"}, {`\boxed{x_1^2 + \sin\theta}`, `\sin \theta + x_{1}^2`}, {"The answer is 42.", "42"},
		{`\boxed{\left(\frac{1}{2}, -3\right)}`, "(0.5,-3)"}, {`\boxed{5!}`, "120"}, {`\boxed{2^{-1}}`, `\frac{1}{2}`},
	} {
		f.Add(s[0], s[1], false)
	}
	f.Add("I get 41, then 42", "42", true)
	f.Fuzz(func(t *testing.T, response, truth string, fallback bool) {
		opts := Options{LastNumberFallback: fallback}
		r := Check(response, truth, opts)
		if n := Normalize(response); Normalize(n) != n {
			t.Fatalf("Normalize not idempotent on %q: %q then %q", response, n, Normalize(n))
		}
		if n := Normalize(truth); Normalize(n) != n {
			t.Fatalf("Normalize not idempotent on %q: %q then %q", truth, n, Normalize(n))
		}
		a, ok := Extract(response)
		if !ok {
			return
		}
		if r.Extracted != a {
			t.Fatalf("Check extracted %q, Extract %q", r.Extracted, a)
		}
		if !Equal(a, a, Options{}) {
			t.Fatalf("Equal(%q, itself) is false (normalized %q)", a, Normalize(a))
		}
		if ab, ba := Equal(a, truth, Options{}), Equal(truth, a, Options{}); ab != ba {
			t.Fatalf("Equal(%q, %q) = %v but swapped %v", a, truth, ab, ba)
		}
	})
}
