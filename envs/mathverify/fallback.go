package mathverify

import (
	"math/big"
	"regexp"
	"strings"
)

// The last-number fallback reads numbers as the verifier before this package did (envs/retool's
// Verify at commit 2675224), so that a recipe that turns it on scores the answers it scored.

var (
	oldFracRE      = regexp.MustCompile(`\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}`)
	oldTextRE      = regexp.MustCompile(`\\(?:text|mathrm|textbf|mbox)\s*\{([^{}]*)\}`)
	oldThousandsRE = regexp.MustCompile(`(\d)(?:,|\\,|\{,\})(\d{3})\b`)
	anyNumRE       = regexp.MustCompile(`[+-]?(\d+(\.\d+)?|\.\d+)(/\d+)?`)
	oldParensRE    = regexp.MustCompile(`\(\s*([+-]?\d+(?:\.\d+)?)\s*\)`)
	oldNumberRE    = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)(/[+-]?\d+(\.\d*)?)?$`)
)

// lastNumber is the last number in free text ("x = 42 apples" → 42), exactly.
func lastNumber(s string) (*big.Rat, bool) {
	if len(s) > maxResponse {
		s = s[len(s)-maxResponse:]
	}
	all := anyNumRE.FindAllString(LegacyNormalize(s), -1)
	if len(all) == 0 {
		return nil, false
	}
	return LegacyNumber(all[len(all)-1])
}

// lastNumberText is the text of the last number in a response, for Check to compare.
func lastNumberText(s string) (string, bool) {
	if len(s) > maxResponse {
		s = s[len(s)-maxResponse:]
	}
	all := anyNumRE.FindAllString(LegacyNormalize(s), -1)
	if len(all) == 0 {
		return "", false
	}
	return all[len(all)-1], true
}

// maxLegacyPasses bounds LegacyNormalize's rewrite loops: each pass unwraps one level of
// \frac or \text nesting, and a 5,000-deep \frac took 5,000 passes over 64 KiB (15 s). No answer a
// model writes nests 64 deep, so the verdicts it gave are unchanged.
const maxLegacyPasses = 64

// LegacyNormalize is the verifier's text normalisation before this package (envs/retool's
// normalize at commit 2675224): $…$, \(…\) and \[…\] unwrapped, \text{…} and \frac{a}{b} (as
// (a)/(b)) rewritten, thousands separators, \left/\right, a trailing period and a leading +
// removed. The last-number fallback reads numbers through it, and envs/retool's RevealsAnswer
// reads hints with it, so that neither changed with the verifier. Each rewrite shortens the text,
// and at most maxLegacyPasses are made.
func LegacyNormalize(s string) string {
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
	for range maxLegacyPasses {
		t := oldTextRE.ReplaceAllString(s, "$1")
		t = oldFracRE.ReplaceAllString(t, "($1)/($2)")
		if t == s {
			break
		}
		s = t
	}
	for range maxLegacyPasses {
		t := oldThousandsRE.ReplaceAllString(s, "$1$2")
		if t == s {
			break
		}
		s = t
	}
	s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), "."))
	s = oldParensRE.ReplaceAllString(s, "$1") // (1)/(2) from \frac: 1/2
	return strings.TrimPrefix(s, "+")
}

// LegacyNumber parses an integer, decimal or fraction a/b exactly, as the verifier before this
// package did.
func LegacyNumber(s string) (*big.Rat, bool) {
	s = strings.ReplaceAll(s, " ", "")
	if !oldNumberRE.MatchString(s) {
		return nil, false
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
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
