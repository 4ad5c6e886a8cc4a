package retool

import (
	"context"
	"testing"

	"agentrl/envs"
	"agentrl/envs/grade"
	"agentrl/envs/mathverify"
	"agentrl/envs/sandbox"
)

// TestEnvGrader: with a Grader the outcome is the grader's score of the whole response, tool
// outputs included: math_dapo as verl's ReTool recipe calls it rejects 0.5 for \frac{1}{2} (its
// strict box compares strings) and shapes a wrong answer by the tool calls (two: num_turns 6,
// -1 + (6-2)/2·0.1 = -0.8); a trajectory that ends unanswered is graded too (-1).
func TestEnvGrader(t *testing.T) {
	g, err := grade.New("math_dapo", mathverify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		turns       []string
		correct     bool
		outcome     float64
		formatError bool
	}{
		{"the truth as written", []string{`So it is \boxed{\frac{1}{2}}.`}, true, 1, false},
		{"the value, not the string, after two tool calls", []string{"<code>print(1/2)</code>", "<code>print(0.5)</code>", `So \boxed{0.5}.`}, false, -0.8, false},
		{"no answer", []string{"<code>print(1)</code>", "thinking", "still thinking"}, false, -0.9, true},
	}
	for _, c := range cases {
		e, err := New(Config{Executor: &sandbox.Starlark{}, MaxTurns: 3, Weights: Weights{Outcome: 1}, Grader: g})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reset(context.Background(), envs.Task{ID: "t", Prompt: "Half of one?", Answer: `\frac{1}{2}`}); err != nil {
			t.Fatal(err)
		}
		var st envs.Step
		for _, turn := range c.turns {
			if st, err = e.Step(context.Background(), turn); err != nil {
				t.Fatal(err)
			}
		}
		if !st.Done {
			t.Fatalf("%s: the trajectory did not end", c.name)
		}
		v := e.Graded()
		if e.Summary().Correct != c.correct || st.Reward.Outcome != c.outcome || st.Reward.Total != c.outcome || v.Grader == "" {
			t.Errorf("%s: correct %v, outcome %v, total %v (verdict %+v); want %v, %v", c.name, e.Summary().Correct, st.Reward.Outcome, st.Reward.Total, v, c.correct, c.outcome)
		}
		if (st.Reward.FormatPenalty == 1) != c.formatError {
			t.Errorf("%s: format penalty %v; want %v", c.name, st.Reward.FormatPenalty, c.formatError)
		}
		e.Close()
	}
}
