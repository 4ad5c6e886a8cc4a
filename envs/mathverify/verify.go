package mathverify

import (
	"regexp"
	"slices"
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
	if joined, ok := boxesAsOne(response, truth); ok && !Equal(ans, truth, opts) {
		ans = joined
	}
	return Result{Correct: Equal(ans, truth, opts), Extracted: ans, Normalized: Normalize(ans)}
}

// boxesAsOne reads an answer written as several boxes in a row (\boxed{1}, \boxed{2} and
// \boxed{3}) as one, where the truth has as many elements: a set \{…\} of them, a tuple (…) in
// their order, else a list. Boxes are in a row when only spaces, $, commas, semicolons, "and" and
// "or" stand between them. ok is false when the last box stands alone or the truth is one value.
func boxesAsOne(response, truth string) (string, bool) {
	if len(response) > maxResponse {
		response = response[len(response)-maxResponse:]
	}
	boxes := allBoxes(response)
	if len(boxes) < 2 {
		return "", false
	}
	n := 1
	for i := len(boxes) - 1; i > 0 && n < maxElems; i-- {
		if !boxGapRE.MatchString(response[boxes[i-1].end:boxes[i].start]) {
			break
		}
		n++
	}
	ts := shapeOf(Normalize(truth))
	if n < 2 || ts.kind == scalar || len(ts.elems) != n {
		return "", false
	}
	parts := make([]string, 0, n)
	for _, b := range boxes[len(boxes)-n:] {
		parts = append(parts, b.content)
	}
	joined := strings.Join(parts, ", ")
	switch {
	case ts.kind == set:
		return `\{` + joined + `\}`, true
	case ts.kind == seq && ts.open == '(' && ts.close == ')':
		return "(" + joined + ")", true
	}
	return joined, true
}

// boxGapRE is what may stand between boxes that form one answer.
// A \text{…} of a few words with "and" in it joins parts of one answer ("for part (a) and").
var boxGapRE = regexp.MustCompile(`^(?:[\s$,;]|\\text\s*\{[^{}$]{0,40}\band\b[^{}$]{0,40}\}|\\text\s*\{\s*(?:and|or)\s*\}|\\quad|\\qquad|\band\b|\bor\b)*$`)

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
	// "Final Answer:", "The final answer is": Minerva's few-shot format, and prose
	finalMarkRE = regexp.MustCompile(`(?i)\bfinal\s+answer(?:\s*[:：]|\s+is\s*:?)\s*`)
	// $…$ or \(…\) at the start of a text
	leadingMathRE = regexp.MustCompile(`^(?:\$\$?|\\\()(.+?)(?:\$\$?|\\\))`)
	inlineMathRE  = regexp.MustCompile(`\$([^$]+)\$`)
	// a number in a sentence: 3, -2.5, 10,455
	sentenceNumberRE = regexp.MustCompile(`[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[+-]?\d+(?:\.\d+)?`)
)

// finalAnswerMarked reads the answer after the last "Final Answer:" or "the final answer is" in
// s (Minerva's "Final Answer: The final answer is $100$. I hope it is correct.", and prose), and
// where it starts. Of the rest of that line it takes, in order: what follows the last " is "
// (to the end of its sentence, $ removed); else the last $…$; else the one number in it.
func finalAnswerMarked(s string) (string, int, bool) {
	locs := finalMarkRE.FindAllStringIndex(s, -1)
	if len(locs) == 0 {
		return "", 0, false
	}
	at := locs[len(locs)-1]
	rest := s[at[1]:]
	if line, _, ok := strings.Cut(rest, "\n"); ok {
		rest = line
	}
	for _, tail := range []string{"I hope it is correct", "<|im_start|>", "<|im_end|>"} {
		if k := strings.Index(rest, tail); k >= 0 {
			rest = rest[:k]
		}
	}
	rest = strings.TrimSpace(rest)
	is := strings.HasSuffix(strings.ToLower(strings.TrimRight(s[at[0]:at[1]], " :")), "is") // "the final answer is …"
	if k := strings.LastIndex(rest, " is "); k >= 0 {
		rest, is = rest[k+len(" is "):], true
	}
	if is {
		rest = strings.TrimSpace(rest)
		if m := leadingMathRE.FindStringSubmatch(rest); m != nil && strings.TrimSpace(strings.Trim(rest[len(m[0]):], ". ")) == "" {
			return strings.TrimSpace(m[1]), at[0], true
		}
		if k := strings.Index(rest, ". "); k >= 0 {
			rest = rest[:k]
		}
		rest = strings.Trim(strings.TrimSuffix(strings.TrimSpace(rest), "."), "\\\"' ") // quotes, as in "$12$ and $13$"
		return strings.TrimSpace(strings.ReplaceAll(rest, "$", "")), at[0], true
	}
	if all := inlineMathRE.FindAllStringSubmatch(rest, -1); len(all) > 0 {
		return strings.TrimSpace(all[len(all)-1][1]), at[0], true
	}
	if nums := sentenceNumberRE.FindAllString(rest, -1); len(nums) == 1 {
		return nums[0], at[0], true
	}
	return strings.TrimSpace(strings.TrimSuffix(rest, ".")), at[0], true
}

// Extract reads the final answer out of a response: the last \boxed{…} or \fbox{…} (also \boxed X
// without braces), else the last "Answer: …" line, else the last <answer>…</answer>; ok is false
// when none gives an answer that normalises to something. Only the last 64 KiB are read.
func Extract(response string) (answer string, ok bool) {
	if len(response) > maxResponse {
		response = response[len(response)-maxResponse:]
	}
	boxes := allBoxes(response)
	marked, markedAt, hasMarked := finalAnswerMarked(response)
	if n := len(boxes); n > 0 && (!hasMarked || markedAt < boxes[n-1].end) && Normalize(boxes[n-1].content) != "" {
		return boxes[n-1].content, true
	}
	if hasMarked && Normalize(marked) != "" { // a "Final Answer" after the last box wins over it
		return marked, true
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
	boxes := allBoxes(s)
	if len(boxes) == 0 {
		return "", false
	}
	return boxes[len(boxes)-1].content, true
}

// box is one \boxed or \fbox in a response: where it starts and ends, and its content.
type box struct {
	start, end int
	content    string
}

// allBoxes are the boxes of s in order (see lastBox).
func allBoxes(s string) []box {
	var boxes []box
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
				content, from = s[j+1:k], k+1
			} else {
				k := j
				for k < len(s) && s[k] != ' ' && s[k] != '\n' && s[k] != '\t' && s[k] != '$' {
					k++
				}
				content, from = s[j:k], k
			}
			boxes = append(boxes, box{start: at, end: from, content: strings.TrimSpace(content)})
		}
	}
	slices.SortFunc(boxes, func(a, b box) int { return a.start - b.start })
	return boxes
}
