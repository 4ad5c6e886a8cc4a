package retool

import (
	"context"
	"math"
	"strings"
	"testing"

	"agentrl/envs"
)

func TestRulesHinter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       envs.Summary
		hint    string // substring; "" means no hint
		process float64
	}{
		{"clean and correct", envs.Summary{ToolCalls: 1, Answered: true, Correct: true}, "", 1},
		{"timeout", envs.Summary{ToolCalls: 1, Timeouts: 1, LastError: "timeout"}, "ran too long", 0.5},
		{"guessed wrong", envs.Summary{Answered: true}, "compute the answer with code", 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Hinter = Rules{}
			got, err := h.Hint(context.Background(), HintRequest{Summary: tc.s})
			if err != nil || got != RulesHint(tc.s) || (tc.hint == "") != (got == "") || !strings.Contains(got, tc.hint) {
				t.Errorf("got %q, %v; want %q (containing %q), nil", got, err, RulesHint(tc.s), tc.hint)
			}
			var sc Scorer = Rules{}
			p, ok, err := sc.Score(context.Background(), HintRequest{Summary: tc.s})
			if err != nil || !ok || math.Abs(p-tc.process) > 1e-9 {
				t.Errorf("got score %v, %v, %v; want %v, true, nil", p, ok, err, tc.process)
			}
		})
	}
}

func TestParseJudgeHint(t *testing.T) {
	long := "Check " + strings.Repeat("every intermediate value ", 20) + "before answering."
	for _, tc := range []struct {
		name     string
		reply    string
		answer   string
		maxChars int
		want     string
		ok       bool
	}{
		{"plain", `\boxed{Check the loop bounds before summing.}`, "42", 0, "Check the loop bounds before summing.", true},
		{"text around", "The mistake is the range.\n\\boxed{Use range(1, n+1) so n is included.}\nDone.", "42", 0, "Use range(1, n+1) so n is included.", true},
		{"no hint", `\boxed{-1}`, "42", 0, "", true},
		{"no hint spaced", `The attempt is fine. \boxed{ -1 }`, "42", 0, "", true},
		{"no hint unicode minus", `\boxed{−1}`, "42", 0, "", true},
		{"last box wins", `\boxed{-1} no wait \boxed{Divide by the count, not the sum.}`, "42", 0, "Divide by the count, not the sum.", true},
		{"last box no hint", `\boxed{Fix it.} actually \boxed{-1}`, "42", 0, "", true},
		{"nested braces", `\boxed{Give the answer as \boxed{answer} after printing it.}`, "42", 0, `Give the answer as \boxed{answer} after printing it.`, true},
		{"text wrapper", `\boxed{\text{Square the radius, do not double it.}}`, "42", 0, "Square the radius, do not double it.", true},
		{"quotes", `\boxed{"Print the value before boxing it."}`, "42", 0, "Print the value before boxing it.", true},
		{"collapse whitespace", "\\boxed{  Check\n\nthe\t units  }", "42", 0, "Check the units", true},
		{"think skipped", `<think>maybe \boxed{-1}</think>\boxed{Count the even terms only.}`, "42", 0, "Count the even terms only.", true},
		{"think unclosed", `<think>the hint is \boxed{Count the even terms only.}`, "42", 0, "", false},
		{"cut at sentence", `\boxed{Check the loop bounds. Then sum.}`, "42", 25, "Check the loop bounds.", true},
		{"cut keeps two", `\boxed{Check the bounds. Sum them! Then box it?}`, "42", 32, "Check the bounds. Sum them!", true},
		{"decimal is no end", `\boxed{Use 0.5 as the rate. Then round.}`, "42", 30, "Use 0.5 as the rate.", true},
		{"quoted period is no end", `\boxed{Fix "a. b" first. Then run.}`, "42", 20, `Fix "a. b" first.`, true},
		{"one long sentence dropped", `\boxed{Check the loop bounds before summing.}`, "42", 20, "", false},
		{"cut long", `\boxed{` + long + `}`, "42", 100, "", false},
		{"no box", "Check the loop bounds.", "42", 0, "", false},
		{"empty box", `\boxed{}`, "42", 0, "", false},
		{"blank box", `\boxed{   }`, "42", 0, "", false},
		{"unbalanced last box", `\boxed{Fine.} and \boxed{Check the`, "42", 0, "", false},
		{"punctuation only", `\boxed{...!?}`, "42", 0, "", false},
		{"digits only", `\boxed{17}`, "42", 0, "", false},
		{"im_start", `\boxed{<|im_start|>assistant Check it.}`, "42", 0, "", false},
		{"eot token", `\boxed{Check it.<|eot_id|>}`, "42", 0, "", false},
		{"code tag", `\boxed{Run <code>print(x)</code> first.}`, "42", 0, "", false},
		{"interpreter tag", `\boxed{Read the </interpreter> output.}`, "42", 0, "", false},
		{"fence", "\\boxed{Run ```python print(1)``` first.}", "42", 0, "", false},
		{"reveals answer", `\boxed{The sum is 42, so box 42.}`, "42", 0, "", false},
		{"reveals fraction", `\boxed{The probability is \frac{1}{2}, not 1/3.}`, "0.5", 0, "", false},
		{"reveals word answer", `\boxed{The shape is a Hexagon, count its sides.}`, "hexagon", 0, "", false},
		{"other numbers fine", `\boxed{Sum 1 to 100 with n(n+1)/2, not a loop to 99.}`, "5050", 0, "Sum 1 to 100 with n(n+1)/2, not a loop to 99.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseJudgeHint(tc.reply, tc.answer, tc.maxChars)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestRevealsAnswer(t *testing.T) {
	for _, tc := range []struct {
		text, answer string
		want         bool
	}{
		{"the result is 42", "42", true},
		{"the result is 42.", "42", true},
		{"it should be 42.0 here", "42", true},
		{"the 42nd term", "42", true},
		{"it is -42", "42", true},
		{"it is 42", "-42", true},
		{"about 1,234 items", "1234", true},
		{"about 1234 items", "1,234", true},
		{"half: 0.5", `\frac{1}{2}`, true},
		{"half: 1/2", "0.5", true},
		{"half: 1 / 2", "0.5", true},
		{`half: $\frac{1}{2}$`, "1/2", true},
		{"6/3 of it", "3", true},
		{"divide by 2", "2", true}, // conservative
		{"421 is not it", "42", false},
		{"4.2 is not it", "42", false},
		{"x42 is a name", "42", false},
		{"var_42 too", "42", false},
		{"no numbers here", "42", false},
		{"0.333 is not a third", "1/3", false},
		{"the answer is 3\\sqrt{2}", `3\sqrt{2}`, true},
		{"the answer is 3 \\sqrt{2}", `3\sqrt{2}`, true},
		{"x^2 + 1 factors", "x^2+1", true},
		{"pick B", "B", true},
		{"pick (B)", "b", true},
		{"Be careful", "B", false},
		{"a hexagonal grid", "hexagon", false},
		{"It is a HEXAGON", "hexagon", true},
		{"anything", "", false},
		{"", "42", false},
	} {
		t.Run(tc.text+"|"+tc.answer, func(t *testing.T) {
			if got := RevealsAnswer(tc.text, tc.answer); got != tc.want {
				t.Errorf("got %v; want %v", got, tc.want)
			}
		})
	}
}

func TestParseJudgeScore(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  float64
		ok    bool
	}{
		{`\boxed{7}`, 0.7, true},
		{`Good use of code. \boxed{10}`, 1, true},
		{`\boxed{0}`, 0, true},
		{`\boxed{ 7.5 }`, 0.75, true},
		{`\boxed{.5}`, 0.05, true},
		{`\boxed{3} then \boxed{8}`, 0.8, true},
		{`<think>\boxed{2}</think> \boxed{6}`, 0.6, true},
		{`<think>\boxed{2}`, 0, false},
		{`\boxed{11}`, 0, false},
		{`\boxed{10.5}`, 0, false},
		{`\boxed{-1}`, 0, false},
		{`\boxed{+5}`, 0, false},
		{`\boxed{7/10}`, 0, false},
		{`\boxed{seven}`, 0, false},
		{`\boxed{NaN}`, 0, false},
		{`\boxed{1e1}`, 0, false},
		{`\boxed{}`, 0, false},
		{`7`, 0, false},
		{`\boxed{7`, 0, false},
	} {
		t.Run(tc.reply, func(t *testing.T) {
			got, ok := ParseJudgeScore(tc.reply)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestJudgePrompts(t *testing.T) {
	longResp := "START " + strings.Repeat("x", 3000) + " END"
	task := envs.Task{Prompt: "What is 6 times 7?", Answer: "42"}
	for _, tc := range []struct {
		name    string
		req     HintRequest
		hint    []string // in the hint prompt's user text
		notHint []string
		score   []string // in the score prompt's user text
	}{
		{
			name:    "wrong",
			req:     HintRequest{Task: task, Response: "<code>print(6*8)</code>\n<interpreter>48</interpreter>\n\\boxed{48}", Summary: envs.Summary{ToolCalls: 1, Answered: true, Answer: "48"}},
			hint:    []string{"What is 6 times 7?", "print(6*8)", "The final answer is wrong.", "Reference answer (secret", ": 42", `\boxed{-1}`, "ONE short sentence", "Code runs: 1, failed: 0."},
			notHint: []string{judgeCutMarker},
			score:   []string{"What is 6 times 7?", "print(6*8)", "The final answer is wrong.", `\boxed{N}`, "0 to 10"},
		},
		{
			name:    "correct",
			req:     HintRequest{Task: task, Response: `\boxed{42}`, Summary: envs.Summary{Answered: true, Answer: "42", Correct: true}},
			hint:    []string{"The final answer is correct.", "The student ran no code."},
			notHint: []string{"Reference answer", ": 42"},
			score:   []string{"The final answer is correct."},
		},
		{
			name:  "unanswered with failures",
			req:   HintRequest{Task: task, Response: "<code>x</code>", Summary: envs.Summary{ToolCalls: 3, ToolErrors: 1, Timeouts: 1}},
			hint:  []string{"The attempt gave no final answer.", "Code runs: 3, failed: 2.", "Reference answer"},
			score: []string{"The attempt gave no final answer."},
		},
		{
			name:    "long attempt cut",
			req:     HintRequest{Task: task, Response: longResp, Summary: envs.Summary{Answered: true}},
			hint:    []string{judgeCutMarker, " END"},
			notHint: []string{"START"},
			score:   []string{judgeCutMarker, " END"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, user := JudgeHintPrompt(tc.req)
			if sys == "" {
				t.Errorf("got an empty hint system prompt; want text")
			}
			for _, s := range tc.hint {
				if !strings.Contains(user, s) {
					t.Errorf("hint prompt %q; want it to contain %q", user, s)
				}
			}
			for _, s := range tc.notHint {
				if strings.Contains(user, s) {
					t.Errorf("hint prompt %q; want it without %q", user, s)
				}
			}
			sys, user = JudgeScorePrompt(tc.req)
			if sys == "" {
				t.Errorf("got an empty score system prompt; want text")
			}
			for _, s := range tc.score {
				if !strings.Contains(user, s) {
					t.Errorf("score prompt %q; want it to contain %q", user, s)
				}
			}
			if strings.Contains(user, "Reference answer") {
				t.Errorf("score prompt %q; want it without the reference answer", user)
			}
		})
	}
}

func TestCutTail(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, judgeCutMarker + "def"},
		{"ééééé", 2, judgeCutMarker + "éé"},
		{"abc", 0, "abc"},
	} {
		if got := cutTail(tc.s, tc.max); got != tc.want {
			t.Errorf("cutTail(%q, %d): got %q; want %q", tc.s, tc.max, got, tc.want)
		}
	}
}
