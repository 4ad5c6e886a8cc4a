package retool

import (
	"math/big"
	"regexp"
	"strings"
)

// The text normalisation RevealsAnswer reads hints and answers with: the ReTool verifier's before
// envs/mathverify replaced it, kept so that what counts as a revealing hint did not change.

var (
	fracRE      = regexp.MustCompile(`\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}`)
	textRE      = regexp.MustCompile(`\\(?:text|mathrm|textbf|mbox)\s*\{([^{}]*)\}`)
	thousandsRE = regexp.MustCompile(`(\d)(?:,|\\,|\{,\})(\d{3})\b`)
	numberRE    = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)(/[+-]?\d+(\.\d*)?)?$`)
)

// normalize removes $…$, \text{…}, \frac, thousands separators and a trailing period.
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
