package mathverify

import (
	"strings"
	"testing"
)

// realistic is what training judges: short boxed answers of the usual kinds and a long response.
func realistic() []struct{ name, response, truth string } {
	reasoning := strings.Repeat("We substitute $x = 3$ into the expression and simplify: $2x^2 - 5x + 1 = 4$. ", 50)
	code := "```python\nfrom sympy import *\nx = symbols('x')\nprint(solve(x**2 - 5*x + 6, x))\n```\n<interpreter>\n[2, 3]\n</interpreter>\n"
	return []struct{ name, response, truth string }{
		{"boxed-integer", `Thus the answer is $\boxed{033}$.`, "33"},
		{"boxed-fraction", `So the probability is $\boxed{\dfrac{3}{8}}$.`, "0.375"},
		{"tuple", `The point is $\boxed{\left(\frac{1}{2}, -3\right)}$.`, "(0.5,-3)"},
		{"expression", `Hence $\boxed{2\sqrt{3} + \frac{\pi}{6}}$.`, `\frac{\pi}{6}+2\sqrt3`},
		{"variables", `The polynomial is $\boxed{x^2 + 2x + 1}$.`, "(x+1)^2"},
		{"set", `The solutions are $\boxed{\{3, -2, 7\}}$.`, `\{-2,3,7\}`},
		{"interval", `Therefore $x \in \boxed{(-\infty, 2] \cup (3, \infty)}$.`, `(-\infty,2]\cup(3,\infty)`},
		{"answer-line", "Let me verify.\n**Answer:** $\\frac{7}{2}$", "3.5"},
		{"wrong", `The answer is $\boxed{41}$.`, "42"},
		{"long-response", reasoning + code + reasoning + `Therefore the answer is $\boxed{\frac{1}{2}}$.`, "0.5"},
	}
}

// worst are the slowest inputs found for Check (see fuzz_test.go's pathological and the fuzzer).
func worst() []struct{ name, response, truth string } {
	rep := strings.Repeat
	return []struct{ name, response, truth string }{
		{"unbraced-boxes-64KiB", rep(`\boxed `, 9000) + "1", "1"},
		{"answer-tags-nested", rep("<answer>", 2000) + "7" + rep("</answer>", 2000), "7"},
		{"empty-answer-lines", rep("Answer: \n", 7000), "1"},
		{"boxes-64KiB", rep(`\boxed{1} `, 6500), "1"},
		{"frac-chain-47", `\boxed{` + rep(`\frac{`, 47) + "1" + rep("}{2}", 47) + `}`, rep(`\frac{`, 47) + "1" + rep("}{2}", 47)},
		{"equation-chain", `\boxed{x = y = z = ` + rep("w = ", 200) + "1}", "1"},
		{"pm-chain", "Answer: " + rep("1 \\pm ", 60) + "1", "1"},
		{"power-tower-46", `\boxed{` + rep("2^{", 46) + "0.5" + rep("}", 46) + `}`, "2"},
		{"long-list-1500", `\boxed{` + strings.Join(strings.Fields(rep("12 ", 1500)), ", ") + `}`, strings.Join(strings.Fields(rep("12 ", 1500)), ",")},
		{"text-60KB", `\boxed{` + rep("a", 60000) + `}`, rep("a", 60000)},
	}
}

func benchCheck(b *testing.B, cases []struct{ name, response, truth string }) {
	b.Run("mix", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			c := cases[i%len(cases)]
			Check(c.response, c.truth, Options{})
		}
	})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Check(c.response, c.truth, Options{})
			}
		})
	}
}

// BenchmarkCheck times Check on a realistic mix of answers ("mix": ns/op is the mean over it) and
// on each kind.
func BenchmarkCheck(b *testing.B) { benchCheck(b, realistic()) }

// BenchmarkCheckWorst times Check on the slowest pathological inputs found.
func BenchmarkCheckWorst(b *testing.B) { benchCheck(b, worst()) }
