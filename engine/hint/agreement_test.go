package hint

import (
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/envs"
	"agentrl/envs/mathverify"
)

// TestPRMAgreement: the PRM's verdicts against what the environment checked, worked by hand. Two
// judged trajectories: a recovered one (a failed run, a run printing the answer, the right box)
// judged wrong/correct/correct (3 of 3 agree, the final too), and a copying slip (the run printed
// the answer, the box holds another number) judged correct/correct (the run agrees, the final
// does not); a step the PRM did not see (-1) and an unjudged trajectory count for nothing.
func TestPRMAgreement(t *testing.T) {
	task := envs.Task{ID: "t", Prompt: "What is 6 * 7?", Answer: "42"}
	obs := func(out string) string { return "<interpreter>\n" + out + "\n</interpreter>" }
	recovered := &batch.Trajectory{Task: task, Summary: envs.Summary{Answered: true, Answer: "42", Correct: true},
		Turns: []event.Turn{{Assistant: "<code>print(x)</code>", ToolStatus: "error", Observation: obs("NameError")},
			{Assistant: "<code>print(6*7)</code>", ToolStatus: "ok", Observation: obs("42")}, {Assistant: `\boxed{42}`}},
		PRM: &event.PRM{Status: event.PRMJudged, Verdicts: []float64{0, 1, 1}}}
	slip := &batch.Trajectory{Task: task, Summary: envs.Summary{Answered: true, Answer: "43"},
		Turns: []event.Turn{{Assistant: "<code>print(6*7)</code>", ToolStatus: "ok", Observation: obs("42")}, {Assistant: `\boxed{43}`}},
		PRM:   &event.PRM{Status: event.PRMJudged, Verdicts: []float64{1, 1}}}
	unseen := &batch.Trajectory{Task: task, Summary: envs.Summary{Answered: true, Answer: "42", Correct: true},
		Turns: []event.Turn{{Assistant: "<code>print(6*7)</code>", ToolStatus: "ok", Observation: obs("42")}, {Assistant: `\boxed{42}`}},
		PRM:   &event.PRM{Status: event.PRMJudged, Verdicts: []float64{-1, 1}}} // step 1 left out of the prompt
	unjudged := &batch.Trajectory{Task: task, Turns: slip.Turns, PRM: &event.PRM{Status: event.PRMUnjudged}}
	final, steps, ok := PRMAgreement([]*batch.Trajectory{recovered, slip, unseen, unjudged, {Task: task}}, mathverify.Options{})
	// finals: recovered ✓, slip ✗, unseen ✓ → 2/3; steps: 3 + 1 + 1 agree of 3 + 2 + 1 → 5/6
	if !ok || final != 2.0/3 || steps != 5.0/6 {
		t.Errorf("PRMAgreement = %v, %v, %v; want 2/3, 5/6, true", final, steps, ok)
	}
	if _, _, ok := PRMAgreement([]*batch.Trajectory{unjudged}, mathverify.Options{}); ok {
		t.Error("agreement without a judged trajectory")
	}
}
