package eta

import (
	"math"
	"testing"

	"agentrl/engine/event"
)

// TestClockLeft: the run's ETA from the steps and evaluations still to come.
func TestClockLeft(t *testing.T) {
	s := Shape{MaxSteps: 30, EvalEvery: 15, StepTrajs: 64, EvalTrajs: 2048}
	for _, tc := range []struct {
		name        string
		k           *Clock
		step        int
		phase       string
		left, all   float64
		want        float64
		wantAtLeast bool
	}{
		// the start evaluation, nothing timed: its rest, 30 rollouts and 2 evaluations at its pace
		{name: "start evaluation", k: &Clock{perTraj: 0.05}, step: 0, phase: event.PhaseEval, left: 90, all: 102.4,
			want: 90 + 30*64*0.05 + 2*102.4, wantAtLeast: true},
		// mid-run rollout of step 16: the rest of the step, 14 steps, the evaluation of step 30
		{name: "rollout", k: &Clock{steps: []float64{10, 12, 10, 12, 10, 20}, evalSecs: 100, perTraj: 0.05}, step: 16, phase: event.PhaseRollout,
			left: 1, all: 3, want: 1 + (12.8 - 3) + 14*12.8 + 100},
		// the evaluation of step 15: 15 steps and one evaluation left
		{name: "evaluation", k: &Clock{steps: []float64{10}, evalSecs: 100, perTraj: 0.05}, step: 15, phase: event.PhaseEval,
			left: 50, all: 100, want: 50 + 15*10 + 100},
		// the rollout of step 15 counts that step's own evaluation
		{name: "rollout before an evaluation", k: &Clock{steps: []float64{10}, evalSecs: 100}, step: 15, phase: event.PhaseRollout,
			left: 1, all: 3, want: 1 + 7 + 15*10 + 2*100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, atLeast := tc.k.Left(s, tc.step, tc.phase, tc.left, tc.all)
			if math.Abs(got-tc.want) > 1e-9 || atLeast != tc.wantAtLeast {
				t.Errorf("got %v (at least %v); want %v (%v)", got, atLeast, tc.want, tc.wantAtLeast)
			}
		})
	}
}

// TestClockRecords: the clock's records feed the estimate: an evaluation-only run has only the
// phase left, a timed step replaces the generation pace, and a pace of no trajectories is not one.
func TestClockRecords(t *testing.T) {
	var k Clock
	if got, atLeast := k.Left(Shape{EvalOnly: true, MaxSteps: 9}, 0, event.PhaseEval, 7, 10); got != 7 || atLeast {
		t.Errorf("evaluation only: got %v (at least %v); want 7 (false)", got, atLeast)
	}
	k.Pace(10, 0) // nothing done: no pace
	k.Pace(4, 2)
	s := Shape{MaxSteps: 2, StepTrajs: 3}
	if got, atLeast := k.Left(s, 1, event.PhaseTrain, 0, 0); got != 6 || !atLeast {
		t.Errorf("at the generation pace: got %v (at least %v); want 6 (true)", got, atLeast)
	}
	k.StepDone(5)
	k.EvalDone(8)
	s.EvalEvery = 2
	if got, atLeast := k.Left(s, 1, event.PhaseTrain, 0, 0); got != 5+8 || atLeast {
		t.Errorf("timed: got %v (at least %v); want 13 (false)", got, atLeast)
	}
}
