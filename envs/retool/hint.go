package retool

import (
	"fmt"
	"regexp"
	"strings"

	"agentrl/envs"
)

// NoHint is what a judge answers when a trajectory needs no bridge thought.
const NoHint = `\boxed{-1}`

var errorNameRE = regexp.MustCompile(`([A-Za-z_]*Error|Exception)\b:?\s*(.*)$`)

// The rules hints that RulesHintFor makes specific when the task has a reference program.
const (
	hintGuessed      = "Do not guess: compute the answer with code first, then give it."
	hintComputedElse = "The code computed something else than the question asks: use exactly its numbers and operation in the code, then copy the printed result."
	hintCopySlip     = "The code printed " // the start of a copying slip's hint, which names the numbers
)

// RulesHint writes the hindsight "bridge thought" for a finished trajectory from its tool
// feedback, or "" when none is needed (a correct answer reached without unrecovered trouble).
// It is always available and suits small models: one short corrective sentence, grounded in
// what actually happened.
func RulesHint(s envs.Summary) string {
	switch {
	case s.Correct && (s.ToolErrors+s.Timeouts+s.Killed == 0 || s.Recovered):
		return ""
	case s.Timeouts > 0 && !s.Recovered:
		return "The code ran too long; compute the result directly (for example with pow(base, exp, mod)) instead of looping."
	case s.Killed > 0 && !s.Recovered:
		return "The code hit a resource limit; keep the computation small and print only the final number."
	case s.ToolErrors > 0 && !s.Recovered:
		full := lastLine(s.LastError)
		msg := clipQuote(full)
		if m := errorNameRE.FindStringSubmatch(full); m != nil {
			switch {
			case strings.Contains(m[1], "NameError") || strings.Contains(full, "undefined"):
				return fmt.Sprintf("The code failed with %q: define every name before using it, then run it again.", msg)
			case strings.Contains(m[1], "SyntaxError"):
				return fmt.Sprintf("The code had a syntax error (%q): fix the syntax and run it again.", msg)
			}
			return fmt.Sprintf("The code raised %q: fix that error and run it again before answering.", msg)
		}
		return fmt.Sprintf("The code failed (%q): fix it and run it again before answering.", msg)
	case s.FormatErrors > 0 && !s.Answered:
		return `Write code between <code> and </code>, read its output, then give the answer as \boxed{answer}.`
	case !s.Answered:
		return `Finish by giving the final answer as \boxed{answer}.`
	case s.ToolCalls == 0:
		return hintGuessed
	case s.LastOutput != "" && s.Answer == s.LastOutput:
		// The answer copies the output faithfully: the code itself computed the wrong thing.
		return hintComputedElse
	case s.LastOutput != "" && s.Answer != "":
		// A copying slip: the hint names both numbers, so a teacher that reads it knows which
		// digits of the answer are wrong and what they should be (the trajectory's own output,
		// not the reference answer).
		printed := clipNumber(lastLine(s.LastOutput))
		return fmt.Sprintf(hintCopySlip+"%s but the final answer was %s: copy the printed number, %s, into \\boxed{}.", printed, clipNumber(s.Answer), printed)
	default:
		return "The final answer does not match the printed result: copy the number the code printed into \\boxed{}."
	}
}

// maxQuotedError bounds the error text a rules hint quotes, in characters, so that the hint's
// instruction always fits hinter.max_hint_tokens (128 tokens of the built-in tokenizer hold every
// rules hint with a quote this long).
const maxQuotedError = 48

// RulesHintFor is RulesHint with hindsight from the task: where the trajectory computed the wrong
// thing or did not compute at all, and the task carries a one-line reference program (the
// synthetic tasks' Meta["code"], such as print(5047 * 4336)), the hint names that program, so a
// teacher that reads it knows which numbers and operation the code needed. Only the teacher reads
// hints; the policy never sees one.
//
// It also corrects a copying-slip hint whose printed number is itself wrong (the task's answer
// says so): copying it would not help, the code computed the wrong thing.
//
// It judges the printed number with the verifier's default options; Rules.HintFor with the
// recipe's.
func RulesHintFor(s envs.Summary, t envs.Task) string {
	return Rules{}.HintFor(s, t)
}

// HintFor is RulesHintFor with the printed number judged by r.Verify.
func (r Rules) HintFor(s envs.Summary, t envs.Task) string {
	h := RulesHint(s)
	if strings.HasPrefix(h, hintCopySlip) && t.Answer != "" && !Verify(lastLine(s.LastOutput), t.Answer, r.Verify) {
		h = hintComputedElse
	}
	code := referenceLine(t)
	if code == "" || h == "" {
		return h
	}
	switch h {
	case hintGuessed:
		return fmt.Sprintf("Do not guess: run %s first, then give the printed result.", code)
	case hintComputedElse:
		return fmt.Sprintf("The code computed something else than the question asks: run %s, then copy the printed result.", code)
	}
	return h
}

// maxReferenceLine bounds the reference program a hint names, in characters.
const maxReferenceLine = 48

// referenceLine is the task's reference program when it is one short line, else "".
func referenceLine(t envs.Task) string {
	code := strings.TrimSpace(t.Meta["code"])
	if code == "" || strings.Contains(code, "\n") || len([]rune(code)) > maxReferenceLine {
		return ""
	}
	return code
}

// maxQuotedNumber bounds a printed result or an answer a rules hint names, in characters (the
// hint names the printed one twice).
const maxQuotedNumber = 24

// clipNumber bounds a result a hint names to maxQuotedNumber characters, keeping its start.
func clipNumber(s string) string {
	if r := []rune(s); len(r) > maxQuotedNumber {
		return string(r[:maxQuotedNumber-1]) + "…"
	}
	return s
}

// lastLine is the last line of s, trimmed: Python's exception line for an error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// clipQuote bounds an error line a hint quotes to maxQuotedError characters: a longer one keeps
// its start, where the exception's name is, and ends in "…".
func clipQuote(line string) string {
	if r := []rune(line); len(r) > maxQuotedError {
		return string(r[:maxQuotedError-1]) + "…"
	}
	return line
}

// RulesProcessScore is a process reward in [0, 1] from the trajectory's facts: it credits using
// the tool, recovering from tool errors, well-formed turns and giving a final answer, whatever
// the answer's correctness (the outcome reward covers that).
func RulesProcessScore(s envs.Summary) float64 {
	score := 0.0
	if s.ToolCalls > 0 {
		score += 0.4
	}
	failures := s.ToolErrors + s.Timeouts + s.Killed
	if failures == 0 || s.Recovered {
		score += 0.3
	}
	if s.FormatErrors == 0 {
		score += 0.1
	}
	if s.Answered {
		score += 0.2
	}
	return score
}

// LeadingSentences returns the longest run of s's leading whole sentences for which fits holds:
// s itself when it fits, "" when not even its first sentence does. Sentences end at '.', '!' or
// '?' followed by white space or the end of s, outside double quotes (a quoted error message may
// hold periods).
func LeadingSentences(s string, fits func(string) bool) string {
	s = strings.TrimSpace(s)
	if fits(s) {
		return s
	}
	var ends []int
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character, such as \" inside a quoted message
		case '"':
			quoted = !quoted
		case '.', '!', '?':
			if !quoted && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\n') {
				ends = append(ends, i+1)
			}
		}
	}
	for i := len(ends) - 1; i >= 0; i-- {
		if head := strings.TrimSpace(s[:ends[i]]); fits(head) {
			return head
		}
	}
	return ""
}
