package engine

import (
	"math"
	"testing"

	"agentrl/engine/event"
)

// TestEvaluationProgress: an evaluation shows itself while it runs: each trajectory as it
// finishes (marked Eval, outside the training ones), progress with the time left in the phase and
// the run, and pass@k over the tasks complete so far, which at the end is the evaluation's own.
func TestEvaluationProgress(t *testing.T) {
	c, _, events := tinyRun(t, map[string]string{"run.max_steps": "1", "eval.heldout_tasks": "3", "eval.n_samples": "2"})
	var evalTrajs, trainTrajs int
	var last event.Progress
	var evals []event.Eval
	tasksDone := -1
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.Trajectory:
			if v.Eval {
				evalTrajs++
				if len(v.Pieces) != 0 || v.Hint != "" {
					t.Errorf("evaluation trajectory %s #%d carries token pieces or a hint", v.TaskID, v.Sample)
				}
			} else {
				trainTrajs++
			}
		case event.Progress:
			if v.ETA < 0 || v.RunETA < 0 || (v.Done < v.Total && v.RunETA <= 0) {
				t.Errorf("progress %+v: a negative or missing ETA", v)
			}
			if v.Phase != event.PhaseEval {
				continue
			}
			if v.Tasks != 3 || v.TasksDone < max(tasksDone, 0) || (v.TasksDone > 0) != (v.PassAtK != nil) {
				t.Errorf("evaluation progress %+v after %d tasks done", v, tasksDone)
			}
			tasksDone, last = v.TasksDone, v
			if v.Done == v.Total {
				tasksDone = -1 // the next evaluation starts again
			}
		case event.Eval:
			evals = append(evals, v)
			if last.Step != v.Step || last.TasksDone != 3 || last.Done != last.Total {
				t.Errorf("the evaluation of step %d ended after progress %+v", v.Step, last)
			}
			for k, p := range v.PassAtK {
				if math.Abs(last.PassAtK[k]-p) > 1e-12 {
					t.Errorf("step %d pass@%d: %v in the last progress, %v in the evaluation", v.Step, k, last.PassAtK[k], p)
				}
			}
		}
	}
	// the start evaluation and step 1's, 3 tasks × 2 samples each; one step of 2 tasks × 2 samples
	if len(evals) != 2 || evalTrajs != 12 || trainTrajs != 4 {
		t.Errorf("%d evaluations, %d evaluation and %d training trajectories; want 2, 12, 4", len(evals), evalTrajs, trainTrajs)
	}
}
