package retool

import (
	"math/big"
	"regexp"
	"strings"

	"agentrl/envs"
)

// Verify reports whether a predicted final answer equals the reference.
//
// Semantics (exact equivalence, no tolerance):
//   - Both sides are normalised: surrounding $…$ and \( \), \text{…}/\mathrm{…} wrappers, a
//     trailing period, thousands separators (1,234 and 1\,234), the Unicode minus, and a leading +
//     are removed; \frac, \dfrac and \tfrac{a}{b} become a/b.
//   - If both sides are numbers — integers, decimals, fractions a/b, or negatives of those —
//     they are compared as exact rationals: 0.5 = 1/2 = \frac{1}{2}, 42 = 42.0, but 0.333 ≠ 1/3.
//   - A side that is not a number by itself but ends in a number with units or words around it
//     ("42 apples", "x = 42", "The answer is 42.") is reduced to its last number.
//   - Otherwise the normalised strings are compared case-insensitively without spaces.
func Verify(pred, ref string) bool {
	p, r := normalize(pred), normalize(ref)
	if p == "" || r == "" {
		return false
	}
	pv, pok := number(p)
	rv, rok := number(r)
	if pok && rok {
		return pv.Cmp(rv) == 0
	}
	if rok && !pok {
		if last, ok := lastNumber(p); ok {
			return last.Cmp(rv) == 0
		}
	}
	return strings.EqualFold(strings.ReplaceAll(p, " ", ""), strings.ReplaceAll(r, " ", ""))
}

// ScoreAnswer is the reward parts of a final answer that came from outside the ReTool loop (an
// external agent's {"answer": …}), as the loop scores its own: outcome 1 when the answer verifies
// against ref, a format penalty when there is no answer. An answer written as \boxed{…} is read
// from its last box. Compose the parts with the recipe's Weights.
func ScoreAnswer(answer, ref string) envs.Reward {
	if boxed, ok, _ := lastBoxed(answer); ok {
		answer = boxed
	}
	var r envs.Reward
	if strings.TrimSpace(answer) == "" {
		r.FormatPenalty = 1
	} else if Verify(answer, ref) {
		r.Outcome = 1
	}
	return r
}

var (
	fracRE      = regexp.MustCompile(`\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}`)
	textRE      = regexp.MustCompile(`\\(?:text|mathrm|textbf|mbox)\s*\{([^{}]*)\}`)
	thousandsRE = regexp.MustCompile(`(\d)(?:,|\\,|\{,\})(\d{3})\b`)
	numberRE    = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)(/[+-]?\d+(\.\d*)?)?$`)
	anyNumRE    = regexp.MustCompile(`[+-]?(\d+(\.\d+)?|\.\d+)(/\d+)?`)
)

func normalize(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "−", "-") // Unicode minus
	s = strings.ReplaceAll(s, "\\left", "")
	s = strings.ReplaceAll(s, "\\right", "")
	s = strings.ReplaceAll(s, "\\!", "")
	s = strings.ReplaceAll(s, "\\%", "%")
	for _, pair := range [][2]string{{"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}} {
		if strings.HasPrefix(s, pair[0]) && strings.HasSuffix(s, pair[1]) && len(s) >= len(pair[0])+len(pair[1]) {
			s = strings.TrimSpace(s[len(pair[0]) : len(s)-len(pair[1])])
		}
	}
	for {
		t := textRE.ReplaceAllString(s, "$1")
		t = fracRE.ReplaceAllString(t, "($1)/($2)")
		if t == s {
			break
		}
		s = t
	}
	for {
		t := thousandsRE.ReplaceAllString(s, "$1$2")
		if t == s {
			break
		}
		s = t
	}
	s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), "."))
	// (a)/(b) from \frac: drop the parentheses around plain numbers.
	s = simpleParens.ReplaceAllString(s, "$1")
	s = strings.TrimPrefix(s, "+")
	return s
}

var simpleParens = regexp.MustCompile(`\(\s*([+-]?\d+(?:\.\d+)?)\s*\)`)

// number parses an integer, decimal or fraction exactly.
func number(s string) (*big.Rat, bool) {
	s = strings.ReplaceAll(s, " ", "")
	if !numberRE.MatchString(s) {
		return nil, false
	}
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	s = strings.TrimPrefix(s, "+")
	num, den, isFrac := strings.Cut(s, "/")
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return nil, false
	}
	if isFrac {
		d, ok := new(big.Rat).SetString(den)
		if !ok || d.Sign() == 0 {
			return nil, false
		}
		r.Quo(r, d)
	}
	if neg {
		r.Neg(r)
	}
	return r, true
}

// lastNumber finds the last number in free text ("x = 42 apples" → 42).
func lastNumber(s string) (*big.Rat, bool) {
	all := anyNumRE.FindAllString(s, -1)
	if len(all) == 0 {
		return nil, false
	}
	return number(all[len(all)-1])
}
