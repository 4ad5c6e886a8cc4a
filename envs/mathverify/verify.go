package mathverify

import (
	"regexp"
	"strings"
)

// Options change how answers are judged.
type Options struct {
	// LastNumberFallback lets a prediction that is not equal to a numeric truth count when the last
	// number in it is (the old ReTool verifier's rule: "The answer is 42." for 42), and lets Check
	// take a response's last number when nothing else extracts. Off by default: it rewards answers
	// that merely end in the right number, such as "4 and 3" for 3.
	LastNumberFallback bool
}

// Result is the verdict on one response.
type Result struct {
	// Correct: the extracted answer equals the truth.
	Correct bool `json:"correct"`
	// Extracted is the answer read from the response ("" when none).
	Extracted string `json:"extracted"`
	// Normalized is Normalize(Extracted), the form that was compared.
	Normalized string `json:"normalized"`
}

// Check extracts the answer from a whole response (Extract) and compares it with truth (Equal).
// With opts.LastNumberFallback, a response with nothing to extract is judged by its last number.
func Check(response, truth string, opts Options) Result {
	ans, ok := Extract(response)
	if !ok && opts.LastNumberFallback {
		if n, found := lastNumberText(response); found {
			ans, ok = n, true
		}
	}
	if !ok {
		return Result{}
	}
	return Result{Correct: Equal(ans, truth, opts), Extracted: ans, Normalized: Normalize(ans)}
}

// Equal reports whether an already extracted answer, pred, equals truth (see the package doc for
// the rules). It is symmetric unless opts.LastNumberFallback is set. An answer that normalises to
// nothing equals nothing.
func Equal(pred, truth string, opts Options) bool {
	p, t := Normalize(pred), Normalize(truth)
	if equalNorm(p, t) {
		return true
	}
	if !opts.LastNumberFallback || t == "" || textOnly(t) {
		return false
	}
	tv, ok := numeric(t)
	if !ok {
		return false
	}
	last, ok := lastNumber(pred)
	return ok && same(exact(last), tv)
}

// maxResponse bounds the tail of a response that Extract reads, in bytes.
const maxResponse = 1 << 16

var (
	answerLineRE = regexp.MustCompile(`(?i)^\s*(?:\*\*|__)?\s*(?:final\s+)?answer\s*(?:\*\*|__)?\s*[:：]\s*(.*)$`)
	answerTagRE  = regexp.MustCompile(`(?s)<answer>(.*?)</answer>`)
)

// Extract reads the final answer out of a response: the last \boxed{…} or \fbox{…} (also \boxed X
// without braces), else the last "Answer: …" line, else the last <answer>…</answer>; ok is false
// when none gives an answer that normalises to something. Only the last 64 KiB are read.
func Extract(response string) (answer string, ok bool) {
	if len(response) > maxResponse {
		response = response[len(response)-maxResponse:]
	}
	if a, ok := lastBox(response); ok && Normalize(a) != "" {
		return a, true
	}
	lines := strings.Split(response, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		m := answerLineRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		a := strings.TrimSpace(m[1])
		a = strings.TrimSpace(strings.Trim(a, "*_"))
		a = strings.TrimSpace(strings.TrimSuffix(a, "."))
		a = strings.TrimSpace(strings.Trim(a, "$"))
		if Normalize(a) != "" {
			return a, true
		}
		break
	}
	if all := answerTagRE.FindAllStringSubmatch(response, -1); len(all) > 0 {
		a := strings.TrimSpace(all[len(all)-1][1])
		if Normalize(a) != "" {
			return a, true
		}
	}
	return "", false
}

// lastBox is the content of the last \boxed or \fbox: a braced group (nested braces matched; one
// that never closes is skipped), or without braces the text up to the next space or $.
func lastBox(s string) (string, bool) {
	best, bestAt := "", -1
	for _, cmd := range []string{`\boxed`, `\fbox`} {
		for from := 0; ; {
			i := strings.Index(s[from:], cmd)
			if i < 0 {
				break
			}
			at := from + i
			j := at + len(cmd)
			from = j
			if j < len(s) && isLetter(s[j]) { // \boxedx is another command
				continue
			}
			j = skipSpace(s, j)
			var content string
			if j < len(s) && s[j] == '{' {
				k := matching(s, j, '{', '}')
				if k < 0 {
					continue
				}
				content = s[j+1 : k]
			} else {
				k := j
				for k < len(s) && s[k] != ' ' && s[k] != '\n' && s[k] != '\t' && s[k] != '$' {
					k++
				}
				content = s[j:k]
			}
			if at > bestAt {
				best, bestAt = strings.TrimSpace(content), at
			}
		}
	}
	return best, bestAt >= 0
}
