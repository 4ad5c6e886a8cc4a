package retool

import (
	"math"
	"slices"
	"strings"
	"testing"

	"agentrl/envs"
)

func words(s string) int { return len(strings.Fields(s)) }

// The PRM reads the whole trajectory when it fits, and otherwise loses whole steps from the
// middle (after step 1), then step 1, never part of a step; the prompt says which.
func TestPRMPromptBudget(t *testing.T) {
	tmpl := "P: {problem} A: {answer} O: {outcome} N: {steps}\n{trajectory}"
	c := PRMCase{Task: envs.Task{Prompt: "add 2 and 3", Answer: "5"}, Summary: envs.Summary{Answered: true}}
	for i := 0; i < 6; i++ {
		c.Steps = append(c.Steps, PRMStepText(strings.Repeat("w ", 10), "out"))
	}
	whole, shown := PRMPrompt(tmpl, c, words, 0)
	if !slices.Equal(shown, []int{1, 2, 3, 4, 5, 6}) || strings.Contains(whole, "left out") || !strings.Contains(whole, "N: 6\n") {
		t.Fatalf("no budget: shown %v\n%s", shown, whole)
	}
	if !strings.Contains(whole, "O: the final answer is wrong") || !strings.Contains(whole, "Step 6:\nw w w w w w w w w w\n[tool output]\nout") {
		t.Errorf("prompt:\n%s", whole)
	}
	full := words(whole)
	cut, shown := PRMPrompt(tmpl, c, words, full-5)
	// Each step is 15 words and the marker 26: three steps go to save 5.
	if !slices.Equal(shown, []int{1, 5, 6}) {
		t.Errorf("a little over: shown %v; want steps 2-4 left out\n%s", shown, cut)
	}
	if !strings.Contains(cut, "[steps 2–4 left out here") || !strings.Contains(cut, "N: 6 (steps 2–4 left out to fit)") || words(cut) > full-5 {
		t.Errorf("a little over:\n%s", cut)
	}
	tight, shown := PRMPrompt(tmpl, c, words, 60)
	if len(shown) == 0 || shown[len(shown)-1] != 6 || words(tight) > 60 {
		t.Errorf("tight: shown %v, %d words\n%s", shown, words(tight), tight)
	}
	for _, k := range shown {
		if !strings.Contains(tight, "Step "+string(rune('0'+k))+":\nw w w w w w w w w w\n[tool output]\nout") {
			t.Errorf("step %d is not whole:\n%s", k, tight)
		}
	}
	if _, shown := PRMPrompt(tmpl, c, words, 10); shown != nil {
		t.Errorf("nothing fits: shown %v; want none", shown)
	}
}

func TestParsePRM(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name  string
		reply string
		n     int
		shown []int
		want  []float64
		hint  string
		ok    bool
	}{
		{"verdicts and a hint", "Step 1: correct\nStep 2: wrong — x undefined\n\\boxed{Define x as a symbol before summing.}", 2, []int{1, 2},
			[]float64{1, 0}, "Define x as a symbol before summing.", true},
		{"no hint needed", "Step 1: Correct.\n**Step 2:** right\n\\boxed{-1}", 2, []int{1, 2}, []float64{1, 1}, "", true},
		{"thinking first, last line wins", "<think>Step 1: wrong</think>\nStep 1: wrong\nStep 1: correct\n\\boxed{-1}", 1, []int{1}, []float64{1}, "", true},
		{"a left-out step has no verdict", "Step 1: correct\nStep 3: bad\n\\boxed{Check the sign.}", 3, []int{1, 3}, []float64{1, nan, 0}, "Check the sign.", true},
		{"no box", "Step 1: correct", 1, []int{1}, nil, "", false},
		{"a step without a verdict", "Step 1: correct\n\\boxed{-1}", 2, []int{1, 2}, nil, "", false},
		{"hint gives the answer away", "Step 1: wrong\n\\boxed{The answer is 42.}", 1, []int{1}, nil, "", false},
		{"cut by the token limit", "<think>Step 1: correct", 1, []int{1}, nil, "", false},
	}
	for _, tt := range tests {
		got := ParsePRM(tt.reply, tt.n, tt.shown, "42", 200)
		if got.OK != tt.ok || got.Hint != tt.hint || !sameVerdicts(got.Verdicts, tt.want) {
			t.Errorf("%s: got %+v; want verdicts %v, hint %q, ok %v", tt.name, got, tt.want, tt.hint, tt.ok)
		}
		if !got.OK && got.Why == "" {
			t.Errorf("%s: malformed without a reason", tt.name)
		}
	}
}

func sameVerdicts(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) })
}
