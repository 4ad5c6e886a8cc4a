package retool

import (
	"agentrl/envs/mathverify"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Judge prompts: the text a model judge reads to write a hint (JudgeHintPrompt) or to rate a
// trajectory's process (JudgeScorePrompt), and the parsers of its reply. The "self" hinter runs
// them through the policy model, the OpenAI hinter through an OpenAI-compatible server. They are
// short on purpose: small models read them.
const (
	// JudgeAttemptChars bounds the attempt shown to a judge: longer responses keep their last
	// JudgeAttemptChars characters (where the final answer and the last errors are) after a
	// marker.
	JudgeAttemptChars = 1500
	// JudgeProblemChars bounds the problem shown to a judge (its beginning is kept).
	JudgeProblemChars = 2000
)

const judgeCutMarker = "[… earlier part cut]\n"

// JudgeHintPrompt is the system and user text asking a judge for one short corrective sentence
// (a bridge thought) that would have led this attempt to the right answer, replied as
// \boxed{sentence}, or exactly \boxed{-1} (NoHint) when the attempt was right and needs nothing.
//
// The reference answer is shown only when the attempt was wrong or unanswered, so that the judge
// can see where it went astray, marked secret; the prompt forbids revealing it and
// ParseJudgeHint rejects a hint that does (a hint carrying the number would teach copying a value
// the student never sees).
func JudgeHintPrompt(req HintRequest) (system, user string) {
	system = "You review a student's attempt at a math problem. The student may run Python code written between <code> and </code>; the code's output is shown after it."
	var b strings.Builder
	writeJudgeCase(&b, req)
	ref := strings.TrimSpace(req.Task.Answer)
	if !req.Summary.Correct && ref != "" {
		fmt.Fprintf(&b, "Reference answer (secret: never write it or any number that gives it away): %s\n", ref)
	}
	b.WriteString("\nWrite ONE short sentence (under 25 words) the student could have thought mid-way to reach the right answer: name the mistake and how to fix it, in plain words (no code, no tags), without giving the answer. " +
		"Reply with only \\boxed{your sentence}, or " + NoHint + " if the attempt is correct and needs no fix.")
	return system, b.String()
}

// JudgeScorePrompt is the system and user text asking a judge to rate the process of the attempt
// (its reasoning and tool use, not only the final answer) from 0 to 10, replied as \boxed{N}.
// The reference answer is not shown; whether the final answer was correct is.
func JudgeScorePrompt(req HintRequest) (system, user string) {
	system = "You grade how a student worked on a math problem with a Python tool: the reasoning and the use of code, not only the final answer."
	var b strings.Builder
	writeJudgeCase(&b, req)
	b.WriteString("\nRate the work from 0 to 10: 10 = sound steps, code used where it helps, errors fixed, a clear final answer; 5 = partly sound; 0 = no real attempt. " +
		"Reply with only \\boxed{N}.")
	return system, b.String()
}

// writeJudgeCase writes the problem, the (cut) attempt, and the facts both judges read.
func writeJudgeCase(b *strings.Builder, req HintRequest) {
	b.WriteString("Problem:\n")
	b.WriteString(cutHead(strings.TrimSpace(req.Task.Prompt), JudgeProblemChars))
	b.WriteString("\n\nAttempt:\n")
	b.WriteString(cutTail(strings.TrimSpace(req.Response), JudgeAttemptChars))
	b.WriteString("\n\n")
	s := req.Summary
	switch {
	case s.ToolCalls == 0:
		b.WriteString("The student ran no code. ")
	default:
		fmt.Fprintf(b, "Code runs: %d, failed: %d. ", s.ToolCalls, s.ToolErrors+s.Timeouts+s.Killed)
	}
	switch {
	case s.Correct:
		b.WriteString("The final answer is correct.\n")
	case !s.Answered:
		b.WriteString("The attempt gave no final answer.\n")
	default:
		b.WriteString("The final answer is wrong.\n")
	}
}

// cutTail keeps the last max characters (runes) of s, after judgeCutMarker when it cut.
func cutTail(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if max <= 0 || n <= max {
		return s
	}
	i := 0
	for skip := n - max; skip > 0; skip-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return judgeCutMarker + s[i:]
}

// cutHead keeps the first max characters (runes) of s, with a marker when it cut.
func cutHead(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	return s[:runeOffset(s, max)] + " [… cut]"
}

// runeOffset is the byte offset of the n-th rune of s (len(s) when s is shorter).
func runeOffset(s string, n int) int {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// judgeBox returns the content of the last complete \boxed{…} of a judge's reply. Reasoning in
// <think>…</think> is skipped: only the text after the last </think> counts, and a reply whose
// <think> never closes (cut by the token limit) has no box. ok is false without a box or when the
// last \boxed{ never closes.
func judgeBox(reply string) (string, bool) {
	if i := strings.LastIndex(reply, "</think>"); i >= 0 {
		reply = reply[i+len("</think>"):]
	} else if strings.Contains(reply, "<think>") {
		return "", false
	}
	content, ok, bad := lastBoxed(reply)
	if !ok || bad {
		return "", false
	}
	return content, true
}

var (
	// chatTokenRE matches what must not reach the student's context: chat-template tokens
	// (<|im_start|>, <|eot_id|>…), tags (<code>, </interpreter>, <tool_call>, <think>, <s>…) and
	// code fences, which the action parser or the chat template would act on.
	chatTokenRE = regexp.MustCompile("<\\||\\|>|</?[A-Za-z_][A-Za-z0-9_.:-]*>|```|\\[/?INST\\]")
	textWrapRE  = regexp.MustCompile(`^\\(?:text|textbf|textit|mathrm|mbox)\s*\{(.*)\}$`)
)

// ParseJudgeHint extracts the hint from a judge's reply to JudgeHintPrompt: the content of the
// last \boxed{…} (balanced braces; after </think> when the reply thinks). It returns "", true for
// \boxed{-1} (no hint needed), and ok = false — no hint — when there is no complete box, the box
// is empty, its content has no letter (only punctuation, digits or whitespace), contains chat
// tokens, tags or code fences (<|im_start|>, <code>, ```), or reveals answer (see
// RevealsAnswer). A whole-box \text{…} wrapper and surrounding quotes are removed, whitespace is
// trimmed and collapsed, and the hint is cut to maxChars characters at a word boundary (maxChars
// ≤ 0: no cut).
func ParseJudgeHint(reply, answer string, maxChars int) (hint string, ok bool) {
	content, ok := judgeBox(reply)
	if !ok {
		return "", false
	}
	if m := textWrapRE.FindStringSubmatch(content); m != nil {
		content = m[1]
	}
	content = strings.Join(strings.Fields(content), " ")
	content = trimQuotes(content)
	if content == "-1" || content == "−1" {
		return "", true
	}
	if content == "" || chatTokenRE.MatchString(content) || RevealsAnswer(content, answer) {
		return "", false
	}
	if maxChars > 0 {
		// Whole sentences only: a hint cut mid-sentence loses the instruction at its end.
		content = LeadingSentences(content, func(s string) bool { return utf8.RuneCountInString(s) <= maxChars })
	}
	if !strings.ContainsFunc(content, unicode.IsLetter) {
		return "", false
	}
	return content, true
}

// trimQuotes removes one pair of matching quotes around s.
func trimQuotes(s string) string {
	for _, q := range [][2]string{{`"`, `"`}, {"“", "”"}, {"'", "'"}, {"‘", "’"}, {"`", "`"}} {
		if len(s) >= len(q[0])+len(q[1]) && strings.HasPrefix(s, q[0]) && strings.HasSuffix(s, q[1]) {
			return strings.TrimSpace(s[len(q[0]) : len(s)-len(q[1])])
		}
	}
	return s
}

// hintNumRE finds numbers in a hint: integers, decimals (.5 too) and fractions a/b, spaces
// around the slash allowed. Thousands separators and \frac are normalised away first.
var hintNumRE = regexp.MustCompile(`(?:\d+(?:\.\d+)?|\.\d+)(?:\s*/\s*(?:\d+(?:\.\d+)?|\.\d+))?`)

// RevealsAnswer reports whether text gives away the reference answer.
//
// A numeric answer (an integer, decimal or fraction, after Verify's normalisation: 1,234, $…$,
// \frac{1}{2}…) is revealed by any standalone number in text with the same absolute value —
// standalone meaning not glued after a letter, digit or underscore, so x42 is not 42 but "42nd",
// "42.0", "-42", "1,234", "\frac{1}{2}" and "0.5" (for 1/2) are. Each side of a fraction in
// text counts too (6/3 reveals 3). This is deliberately conservative: a hint that mentions a
// small answer's value for another reason (answer 2, "divide by 2") is rejected as well; one
// lost hint costs less than teaching to copy a number the student cannot see. Numbers written
// in words or powers (10^6) are not detected.
//
// Any other answer (an expression, a word, a set) is revealed when it appears in text,
// case-insensitively with whitespace collapsed, not glued to letters or digits on either side;
// an answer with symbols (3\sqrt{2}, x^2+1) of three or more characters also when it appears
// with all spaces removed from both.
func RevealsAnswer(text, answer string) bool {
	ref := mathverify.LegacyNormalize(answer)
	if ref == "" {
		return false
	}
	hint := mathverify.LegacyNormalize(text)
	if want, ok := mathverify.LegacyNumber(ref); ok {
		want = new(big.Rat).Abs(want)
		for _, loc := range hintNumRE.FindAllStringIndex(hint, -1) {
			if loc[0] > 0 {
				if r, _ := utf8.DecodeLastRuneInString(hint[:loc[0]]); unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.' {
					continue
				}
			}
			tok := strings.ReplaceAll(hint[loc[0]:loc[1]], " ", "")
			parts := []string{tok}
			if a, b, isFrac := strings.Cut(tok, "/"); isFrac {
				parts = append(parts, a, b)
			}
			for _, p := range parts {
				if v, ok := mathverify.LegacyNumber(p); ok && new(big.Rat).Abs(v).Cmp(want) == 0 {
					return true
				}
			}
		}
		return false
	}
	lowRef := strings.ToLower(strings.Join(strings.Fields(ref), " "))
	lowHint := strings.ToLower(strings.Join(strings.Fields(hint), " "))
	if containsToken(lowHint, lowRef) {
		return true
	}
	compact := strings.ReplaceAll(lowRef, " ", "")
	if utf8.RuneCountInString(compact) >= 3 && strings.ContainsFunc(compact, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		return strings.Contains(strings.ReplaceAll(lowHint, " ", ""), compact)
	}
	return false
}

// containsToken reports whether needle occurs in hay with no letter or digit right before or
// right after it.
func containsToken(hay, needle string) bool {
	for from := 0; from <= len(hay); {
		i := strings.Index(hay[from:], needle)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(needle)
		before, _ := utf8.DecodeLastRuneInString(hay[:start])
		after, _ := utf8.DecodeRuneInString(hay[end:])
		if !isAlnum(before) && !isAlnum(after) {
			return true
		}
		_, size := utf8.DecodeRuneInString(hay[start:])
		from = start + size
	}
	return false
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

var scoreRE = regexp.MustCompile(`^(?:\d+(?:\.\d*)?|\.\d+)$`)

// ParseJudgeScore reads a judge's reply to JudgeScorePrompt: the last \boxed{N} (after </think>
// when the reply thinks), N an integer or decimal in [0, 10], mapped to N/10 in [0, 1]. Anything
// else — no box, a fraction (7/10), a sign, words, a value outside [0, 10] — gives ok = false,
// and the caller falls back to RulesProcessScore.
func ParseJudgeScore(reply string) (score float64, ok bool) {
	content, ok := judgeBox(reply)
	if !ok || !scoreRE.MatchString(content) {
		return 0, false
	}
	n, err := strconv.ParseFloat(content, 64)
	if err != nil || n < 0 || n > 10 {
		return 0, false
	}
	return n / 10, true
}
