package grade

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"agentrl/envs/mathverify"
)

// dapoRow is one case of verl's math_dapo as the ReTool examples call it (strict box), named by
// the rule of the source it checks.
type dapoRow struct {
	rule      string
	response  string
	truth     string
	toolCalls int
	correct   bool
	extracted string
	verl      float64 // Grade's score under "math_dapo" (num_turns = 2*toolCalls + 2)
	slime     float64 // Grade's score under "math_dapo_slime" (num_turns = toolCalls)
}

var x90 = strings.Repeat("x", 90)

var dapoRows = []dapoRow{
	// last_boxed_only_string + remove_boxed + exact comparison
	{"box: exact string equals the truth", `so $\boxed{42}$.`, "42", 0, true, "42", 1, 1},
	{"strict: no normalisation, 0.5 is not \\frac{1}{2}", `\boxed{0.5}`, `\frac{1}{2}`, 0, false, "0.5", -1, -1.1},
	{"strict: the same LaTeX text is right", `\boxed{\frac{1}{2}}`, `\frac{1}{2}`, 0, true, `\frac{1}{2}`, 1, 1},
	{"strict: \\dfrac is not \\frac", `\boxed{\dfrac{1}{2}}`, `\frac{1}{2}`, 0, false, `\dfrac{1}{2}`, -1, -1.1},
	{"strict: a leading zero differs (033 vs 33)", `\boxed{033}`, "33", 0, false, "033", -1, -1.1},
	{"strict: a space inside the box is kept", `\boxed{ 42}`, "42", 0, false, " 42", -1, -1.1},
	{"strict: the truth is not trimmed either", `\boxed{42}`, " 42", 0, false, "42", -1, -1.1},
	{"strict: case matters", `\boxed{Monday}`, "monday", 0, false, "Monday", -1, -1.1},
	{"strict: units are not removed", `\boxed{42 \text{ cm}}`, "42", 0, false, `42 \text{ cm}`, -1, -1.1},
	{"strict: ^\\circ is not removed", `\boxed{30^\circ}`, "30", 0, false, `30^\circ`, -1, -1.1},
	{"strict: thousands separators are not removed", `\boxed{1,000}`, "1000", 0, false, "1,000", -1, -1.1},
	{"strict: an equation is not split at =", `\boxed{x=5}`, "5", 0, false, "x=5", -1, -1.1},
	{"strict: \\text{(A)} is not (A)", `\boxed{\text{(A)}}`, "(A)", 0, false, `\text{(A)}`, -1, -1.1},
	{"strict: $ inside the box is kept", `\boxed{$42$}`, "42", 0, false, "$42$", -1, -1.1},
	{"box: the last box wins", `first \boxed{41}, then \boxed{42}`, "42", 0, true, "42", 1, 1},
	{"box: the last box wins when it is wrong", `\boxed{42} no wait \boxed{41}`, "42", 0, false, "41", -1, -1.1},
	{"box: nested braces are matched", `\boxed{\frac{\sqrt{3}}{2}}`, `\frac{\sqrt{3}}{2}`, 0, true, `\frac{\sqrt{3}}{2}`, 1, 1},
	{"box: escaped \\{ \\} count as braces (balanced)", `\boxed{\{1,2\}}`, `\{1,2\}`, 0, true, `\{1,2\}`, 1, 1},
	{"box: escaped \\} closes the box", `\boxed{\}}`, `\}`, 0, false, `\`, -1, -1.1},
	{"box: text after a stray } is cut", `\boxed{4}2}`, "42", 0, false, "4", -1, -1.1},
	{"box: the inner of \\boxed{\\boxed{42}} is the last \\boxed{", `\boxed{\boxed{42}}`, "42", 0, true, "42", 1, 1},
	{"box: an unclosed last box hides an earlier closed one", `\boxed{42} and \boxed{4`, "42", 0, false, "", -1, -1.1},
	{"box: \\boxed without a brace is no answer", `\boxed 42`, "42", 0, false, "", -1, -1.1},
	{"box: \\boxed {42} (space before the brace) is no answer", `\boxed {42}`, "42", 0, false, "", -1, -1.1},
	{"box: \\fbox is no answer", `\fbox{42}`, "42", 0, false, "", -1, -1.1},
	{"box: an Answer: line is no answer", "Answer: 42", "42", 0, false, "", -1, -1.1},
	{"box: a bare number is no answer", "the answer is 42", "42", 0, false, "", -1, -1.1},
	{"box: \\boxed{} equals an empty truth", `\boxed{}`, "", 0, true, "", 1, 1},
	{"box: no box never equals, not even an empty truth", "nothing", "", 0, false, "", -1, -1.1},
	// the cuts: compute_score keeps 300 characters, is_correct_strict_box 100 of those
	{"cut: a box ending exactly 100 characters from the end counts", `\boxed{42}` + x90, "42", 0, true, "42", 1, 1},
	{"cut: one more character drops the backslash: no box", `\boxed{42}` + x90 + "x", "42", 0, false, "", -1, -1.1},
	{"cut: counted in characters, not bytes (90 × 数 = 270 bytes)", `\boxed{42}` + strings.Repeat("数", 90), "42", 0, true, "42", 1, 1},
	{"cut: 91 × 数 is 101 characters", `\boxed{42}` + strings.Repeat("数", 91), "42", 0, false, "", -1, -1.1},
	{"cut: a long response before the box does not matter", strings.Repeat("a", 5000) + `\boxed{42}`, "42", 0, true, "42", 1, 1},
	{"cut: an earlier box outside the window is not seen", `\boxed{42}` + strings.Repeat("y", 200) + `\boxed{4`, "42", 0, false, "", -1, -1.1},
	{"cut: the cut can split a box's opening", `\boxed{4` + strings.Repeat("2", 95) + "}", strings.Repeat("2", 95), 0, false, "", -1, -1.1},
	// retool.py's shaping of a wrong answer: min(-0.6, score + (num_turns-2)/2*0.1)
	{"shaping: wrong, 1 tool call", `\boxed{41}`, "42", 1, false, "41", -0.9, -1.05},
	{"shaping: wrong, 2 tool calls", `\boxed{41}`, "42", 2, false, "41", -0.8, -1.0},
	{"shaping: wrong, 3 tool calls", `\boxed{41}`, "42", 3, false, "41", -0.7, -0.95},
	{"shaping: wrong, 4 tool calls reach verl's cap", `\boxed{41}`, "42", 4, false, "41", -0.6, -0.9},
	{"shaping: wrong, 9 tool calls (slime's float)", `\boxed{41}`, "42", 9, false, "41", -0.6, -0.6499999999999999},
	{"shaping: wrong, 10 tool calls reach slime's cap", `\boxed{41}`, "42", 10, false, "41", -0.6, -0.6},
	{"shaping: wrong, 30 tool calls stay at the cap", `\boxed{41}`, "42", 30, false, "41", -0.6, -0.6},
	{"shaping: no box is shaped like a wrong box", "I ran out of tokens", "42", 2, false, "", -0.8, -1.0},
	{"shaping: a right answer is 1 whatever the tool calls", `\boxed{42}`, "42", 7, true, "42", 1, 1},
}

func TestMathDapoTable(t *testing.T) {
	if len(dapoRows) < 40 {
		t.Fatalf("%d rows; want 40 or more", len(dapoRows))
	}
	verl, _ := New("math_dapo", mathverify.Options{})
	slime, _ := New("math_dapo_slime", mathverify.Options{})
	for _, r := range dapoRows {
		v := verl.Grade(r.response, r.truth, r.toolCalls)
		if v.Correct != r.correct || v.Extracted != r.extracted || v.Normalized != r.extracted || v.Score != r.verl {
			t.Errorf("%s: math_dapo(%q, %q, %d) = %+v; want correct %v, extracted %q, score %v", r.rule, r.response, r.truth, r.toolCalls, v, r.correct, r.extracted, r.verl)
		}
		s := slime.Grade(r.response, r.truth, r.toolCalls)
		if s.Correct != r.correct || s.Extracted != r.extracted || s.Score != r.slime {
			t.Errorf("%s: math_dapo_slime(%q, %q, %d) = %+v; want correct %v, extracted %q, score %v", r.rule, r.response, r.truth, r.toolCalls, s, r.correct, r.extracted, r.slime)
		}
	}
}

// minervaRow is one case of the non-strict path, compute_score(solution, truth) (is_correct_minerva
// and normalize_final_answer).
type minervaRow struct {
	rule, response, truth string
	correct               bool
	pred                  string
}

var minervaRows = []minervaRow{
	{"minerva: the Answer: line is read", "work\nAnswer: 42", "42", true, "42"},
	{"minerva: (?i) and \\s* around the colon", "ANSWER : 42", "42", true, "42"},
	{"minerva: \\s* crosses a newline to the next line", "Answer:\n42", "42", true, "42"},
	{"minerva: the last Answer: wins", "Answer: 41\nAnswer: 42", "42", true, "42"},
	{"minerva: no Answer: is [INVALID]", `\boxed{42}`, "42", false, "[INVALID]"},
	{"minerva: \\boxed{…} inside the answer is unwrapped", `Answer: \boxed{42}`, "42", true, "42"},
	{"minerva: text after the last = only", "Answer: x = 5", "5", true, "5"},
	{"minerva: spaces are removed, so 4 2 is 42", "Answer: 4 2", "42", true, "42"},
	{"minerva: units are removed, so 5 cm is 5 km", "Answer: 5 cm", "5 km", true, "5"},
	{"minerva: degrees and ^\\circ are removed", `Answer: 30^\circ`, "30 degrees", true, "30"},
	{"minerva: commas leave an all-digit answer", "Answer: 1,000", "1000", true, "1000"},
	{"minerva: commas go from any all-digit answer, so the list 1, 2 is 12", "Answer: 1, 2", "12", true, "12"},
	{"minerva: \\fracab shorthand", `Answer: \frac12`, `\frac{1}{2}`, true, `\frac{1}{2}`},
	{"minerva: \\sqrta shorthand", `Answer: 2\sqrt3`, `2\sqrt{3}`, true, `2\sqrt{3}`},
	{"minerva: $…$ keeps what is between the first two $", "Answer: the value is $42$.", "42", true, "42"},
	{"minerva: \\text{…} is unwrapped", `Answer: \text{Monday}`, "Monday", true, "Monday"},
	{"minerva: 0.5 is still not \\frac{1}{2}", "Answer: 0.5", `\frac{1}{2}`, false, "0.5"},
	{"minerva: the 300-character cut drops an early Answer:", "Answer: 42\n" + strings.Repeat("z", 300), "42", false, "[INVALID]"},
	{"minerva: \"a \" is deleted inside words too", "Answer: pizza 5", "pizz5", true, "pizz5"},
	{"minerva: isdigit accepts ², so 1,² loses its comma", "Answer: 1,²", "1²", true, "1²"},
}

func TestMinervaTable(t *testing.T) {
	for _, r := range minervaRows {
		got := Minerva(r.response, r.truth)
		want := -1.0
		if r.correct {
			want = 1
		}
		if got.Acc != r.correct || got.Pred != r.pred || got.Score != want || !got.HasPred {
			t.Errorf("%s: Minerva(%q, %q) = %+v; want acc %v, pred %q", r.rule, r.response, r.truth, got, r.correct, r.pred)
		}
	}
}

// TestDapoVsVerifier shows where math_dapo's strict box and the verifier part ways.
func TestDapoVsVerifier(t *testing.T) {
	for _, tc := range []struct {
		rule, response, truth string
		dapo, verifier        bool
	}{
		{"dapo stricter: 0.5 vs \\frac{1}{2}", `\boxed{0.5}`, `\frac{1}{2}`, false, true},
		{"dapo stricter: \\frac12 vs \\frac{1}{2}", `\boxed{\frac12}`, `\frac{1}{2}`, false, true},
		{"dapo stricter: 033 vs 33", `\boxed{033}`, "33", false, true},
		{"dapo stricter: \\fbox", `\fbox{42}`, "42", false, true},
		{"dapo stricter: Answer: line", "Answer: 42", "42", false, true},
		{"dapo stricter: box outside the last 100 characters", `\boxed{42}` + strings.Repeat(".", 120), "42", false, true},
		{"dapo more lenient: \\boxed{} against an empty truth", `\boxed{}`, "", true, false},
		{"both: the same text", `\boxed{42}`, "42", true, true},
	} {
		d, _ := New("math_dapo", mathverify.Options{})
		v, _ := New("verifier", mathverify.Options{})
		if got := d.Grade(tc.response, tc.truth, 0).Correct; got != tc.dapo {
			t.Errorf("%s: math_dapo says %v; want %v", tc.rule, got, tc.dapo)
		}
		if got := v.Grade(tc.response, tc.truth, 0).Correct; got != tc.verifier {
			t.Errorf("%s: verifier says %v; want %v", tc.rule, got, tc.verifier)
		}
	}
}

func TestNewAndNames(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "math_dapo,math_dapo_slime,verifier" {
		t.Errorf("Names() = %s", got)
	}
	for _, name := range append(Names(), "") {
		g, err := New(name, mathverify.Options{})
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		want := name
		if name == "" {
			want = Default
		}
		v := g.Grade(`\boxed{42}`, "42", 0)
		if g.Name() != want || v.Grader != want+"@"+g.Version() || !v.Correct || v.Score != 1 {
			t.Errorf("New(%q): name %q, verdict %+v", name, g.Name(), v)
		}
	}
	v, _ := New("verifier", mathverify.Options{})
	if got := v.Grade(`\boxed{41}`, "42", 3); got.Score != 0 || got.Correct {
		t.Errorf("verifier on a wrong answer: %+v; want score 0", got)
	}
	if _, err := New("math-verify", mathverify.Options{}); err == nil || !strings.Contains(err.Error(), "math_dapo, math_dapo_slime, verifier") {
		t.Errorf("New(unknown) error %v; want one listing the graders", err)
	}
}

func TestDapoPieces(t *testing.T) {
	if _, err := RemoveBoxed(`\fbox{4}`); err == nil {
		t.Error(`RemoveBoxed(\fbox{4}): no error; want the source's assert`)
	}
	if s, err := RemoveBoxed(`\boxed{}`); err != nil || s != "" {
		t.Errorf(`RemoveBoxed(\boxed{}) = %q, %v`, s, err)
	}
	if got := ReToolShaping(0.5, 0); got != 0.5 {
		t.Errorf("ReToolShaping(0.5, 0) = %v; a non-negative score stays", got)
	}
	if VerlNumTurns(0) != 2 || VerlNumTurns(3) != 8 {
		t.Error("VerlNumTurns: want 2*toolCalls+2")
	}
}

// goldenRow is a line of testdata/dapo_golden.jsonl, written by testdata/dapo_golden.py from verl's
// own math_dapo.py.
type goldenRow struct {
	Solution   string  `json:"solution"`
	Truth      string  `json:"truth"`
	Strict     [3]any  `json:"strict"`
	Minerva    [3]any  `json:"minerva"`
	Normalized string  `json:"normalized"`
	LastBoxed  *string `json:"last_boxed"`
}

// TestDapoGolden compares the port with verl's math_dapo.py on generated inputs. DAPO_GOLDEN names
// a further file written the same way (e.g. 20,000 rows) to check as well.
func TestDapoGolden(t *testing.T) {
	files := []string{"testdata/dapo_golden.jsonl"}
	if extra := os.Getenv("DAPO_GOLDEN"); extra != "" {
		files = append(files, extra)
	}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		n := 0
		for sc.Scan() {
			n++
			var g goldenRow
			if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
				t.Fatalf("%s:%d: %v", file, n, err)
			}
			s := StrictBox(g.Solution, g.Truth)
			if !sameResult(s, g.Strict) {
				t.Errorf("%s:%d: StrictBox(%q, %q) = %+v; source says %v", file, n, g.Solution, g.Truth, s, g.Strict)
			}
			m := Minerva(g.Solution, g.Truth)
			if !sameResult(m, g.Minerva) {
				t.Errorf("%s:%d: Minerva(%q, %q) = %+v; source says %v", file, n, g.Solution, g.Truth, m, g.Minerva)
			}
			if got := NormalizeFinalAnswer(g.Truth); got != g.Normalized {
				t.Errorf("%s:%d: NormalizeFinalAnswer(%q) = %q; source says %q", file, n, g.Truth, got, g.Normalized)
			}
			lb, ok := LastBoxedOnlyString(g.Solution)
			if ok != (g.LastBoxed != nil) || (ok && lb != *g.LastBoxed) {
				t.Errorf("%s:%d: LastBoxedOnlyString(%q) = %q, %v; source says %v", file, n, g.Solution, lb, ok, g.LastBoxed)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if n < 500 {
			t.Errorf("%s: %d rows; want 500 or more", file, n)
		}
	}
}

// sameResult compares a DapoResult with the source's [score, acc, pred|null].
func sameResult(r DapoResult, want [3]any) bool {
	score, _ := want[0].(float64)
	acc, _ := want[1].(bool)
	pred, hasPred := want[2].(string)
	return r.Score == score && r.Acc == acc && r.HasPred == hasPred && r.Pred == pred
}

// TestDapoTablesAgainstSource runs this file's tables through verl's own math_dapo.py when
// DAPO_SOURCE names it (e.g. git show <commit>:verl/utils/reward_score/math_dapo.py > file) and
// python3 is at hand; the source needs nothing beyond the standard library.
func TestDapoTablesAgainstSource(t *testing.T) {
	src := os.Getenv("DAPO_SOURCE")
	if src == "" {
		t.Skip("DAPO_SOURCE (a path to verl's math_dapo.py) is not set")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	type in struct {
		Solution  string `json:"solution"`
		Truth     string `json:"truth"`
		ToolCalls int    `json:"tool_calls"`
	}
	var rows []in
	for _, r := range dapoRows {
		rows = append(rows, in{r.response, r.truth, r.toolCalls})
	}
	for _, r := range minervaRows {
		rows = append(rows, in{r.response, r.truth, 0})
	}
	var stdin bytes.Buffer
	enc := json.NewEncoder(&stdin)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(py, "testdata/dapo_check.py", src)
	cmd.Stdin = &stdin
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dapo_check.py: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(rows) {
		t.Fatalf("dapo_check.py printed %d lines for %d rows", len(lines), len(rows))
	}
	for i, line := range lines {
		var got struct {
			Strict  [3]any  `json:"strict"`
			Minerva [3]any  `json:"minerva"`
			Verl    float64 `json:"verl"`
			Slime   float64 `json:"slime"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		if i < len(dapoRows) {
			r := dapoRows[i]
			pred, _ := got.Strict[2].(string)
			if got.Strict[1] != r.correct || pred != r.extracted || got.Verl != r.verl || got.Slime != r.slime {
				t.Errorf("%s: the source says %v, verl %v, slime %v; the table says correct %v, extracted %q, %v, %v", r.rule, got.Strict, got.Verl, got.Slime, r.correct, r.extracted, r.verl, r.slime)
			}
			continue
		}
		r := minervaRows[i-len(dapoRows)]
		if got.Minerva[1] != r.correct || got.Minerva[2] != r.pred {
			t.Errorf("%s: the source says %v; the table says %v, %q", r.rule, got.Minerva, r.correct, r.pred)
		}
	}
}
