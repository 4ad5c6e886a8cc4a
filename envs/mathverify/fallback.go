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
	all := anyNumRE.FindAllString(oldClean(s), -1)
	if len(all) == 0 {
		return nil, false
	}
	return oldNumber(all[len(all)-1])
}

// lastNumberText is the text of the last number in a response, for Check to compare.
func lastNumberText(s string) (string, bool) {
	if len(s) > maxResponse {
		s = s[len(s)-maxResponse:]
	}
	all := anyNumRE.FindAllString(oldClean(s), -1)
	if len(all) == 0 {
		return "", false
	}
	return all[len(all)-1], true
}

// oldClean is the old verifier's normalisation, as far as finding numbers needs it.
func oldClean(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "−", "-")
	for range 16 {
		t := oldTextRE.ReplaceAllString(s, "$1")
		t = oldFracRE.ReplaceAllString(t, "($1)/($2)")
		if t == s {
			break
		}
		s = t
	}
	s = oldParensRE.ReplaceAllString(s, "$1") // (1)/(2) from \frac: 1/2
	for range 16 {
		t := oldThousandsRE.ReplaceAllString(s, "$1$2")
		if t == s {
			break
		}
		s = t
	}
	return s
}

// oldNumber parses an integer, decimal or fraction a/b exactly.
func oldNumber(s string) (*big.Rat, bool) {
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
