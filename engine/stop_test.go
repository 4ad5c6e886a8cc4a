package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"agentrl/engine/event"
)

// TestStopWhereTheRunIs stops tiny runs at each kind of point (on the run's own goroutine, as an
// event goes out or an update's micro-batch is about to run, so the point is exact) and checks
// the announcement, the run's end event, and the store: status, reason and detail, what was
// kept, and a loadable latest checkpoint.
func TestStopWhereTheRunIs(t *testing.T) {
	type stopAt struct {
		progress *event.Progress // stop as this progress goes out
		update   [2]int          // else as micro-batch update[1] of step update[0]'s update is about to run
	}
	for _, tc := range []struct {
		name         string
		over         map[string]string
		at           stopAt
		finishWithin time.Duration
		cancel       bool // cancel Run's context instead of calling Stop
		announce     string
		status       string
		reason       string
		detail       string
		steps        []int // steps whose metrics went out
		evals        []int // steps with a stored evaluation
		checkpoint   int   // the run's latest checkpoint, 0 none
	}{
		{name: "start evaluation", at: stopAt{progress: &event.Progress{Step: 0, Phase: event.PhaseEval, Done: 1}},
			announce: "stopping now: the evaluation of step 0 is dropped (0 of 2 tasks done); no step is trained yet",
			status:   "stopped", reason: "terminated (SIGTERM)", detail: "the evaluation of step 0 was dropped (0 of 2 tasks done)"},
		{name: "rollout", over: map[string]string{"checkpoint.every": "0"}, at: stopAt{progress: &event.Progress{Step: 2, Phase: event.PhaseRollout, Done: 1}},
			announce: "stopping now: step 2's rollout is dropped; saving step 1", status: "stopped", reason: "terminated (SIGTERM)",
			detail: "step 2 was dropped during its rollout, before its update", steps: []int{1}, evals: []int{0, 1}, checkpoint: 1},
		{name: "update discarded", over: map[string]string{"checkpoint.every": "0", "train.micro_batch": "1"}, at: stopAt{update: [2]int{2, 1}}, finishWithin: time.Nanosecond,
			announce: "stopping now: the update of step 2 is discarded (the weights go back to step 1); saving step 1", status: "stopped",
			reason: "terminated (SIGTERM)", detail: "the update of step 2 was discarded", steps: []int{1}, evals: []int{0, 1}, checkpoint: 1},
		{name: "update finished", over: map[string]string{"train.micro_batch": "1"}, at: stopAt{update: [2]int{2, 1}}, finishWithin: time.Hour,
			announce: "stopping: finishing the update of step 2", status: "stopped", reason: "terminated (SIGTERM)",
			steps: []int{1, 2}, evals: []int{0, 1}, checkpoint: 2},
		{name: "evaluation after a step", at: stopAt{progress: &event.Progress{Step: 1, Phase: event.PhaseEval, Done: 1}},
			announce: "stopping now: the evaluation of step 1 is dropped", status: "stopped", reason: "terminated (SIGTERM)",
			detail: "the evaluation of step 1 was dropped", steps: []int{1}, evals: []int{0}, checkpoint: 1},
		{name: "context cancelled", at: stopAt{progress: &event.Progress{Step: 1, Phase: event.PhaseRollout, Done: 1}}, cancel: true,
			announce: "stopping now: step 1's rollout is dropped; no step is trained yet", status: "stopped", reason: "interrupted",
			detail: "step 1 was dropped during its rollout, before its update", evals: []int{0}},
		{name: "early stop", over: map[string]string{"early_stop.patience": "1", "eval.at_start": "true"},
			announce: "stopping: the checkpoint of step 1 is kept", status: "stopped", reason: "early stop: pass@1 did not improve for 1 evaluations",
			steps: []int{1}, evals: []int{0, 1}, checkpoint: 1},
		{name: "last step", announce: "finishing: the checkpoint of step 2 is kept", status: "finished", reason: "all 2 steps done",
			steps: []int{1, 2}, evals: []int{0, 1, 2}, checkpoint: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, st, events := tinyRun(t, tc.over)
			if tc.finishWithin > 0 {
				c.stop.FinishWithin = tc.finishWithin
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := func() {
				if tc.cancel {
					cancel()
					for !c.stop.Stopping() { // the context's stop runs on a goroutine of its own
						time.Sleep(time.Millisecond)
					}
					return
				}
				c.Stop("terminated (SIGTERM)")
			}
			steps := 0
			c.opts.hooks.onEmit = func(e event.Event) {
				switch v := e.(type) {
				case event.StepMetrics:
					steps = v.Step
				case event.Progress:
					if p := tc.at.progress; p != nil && v.Step == p.Step && v.Phase == p.Phase && v.Done == p.Done {
						stop()
					}
				}
			}
			c.opts.hooks.onUpdate = func(done, _ int) {
				if tc.at.update[0] == steps+1 && tc.at.update[1] == done {
					stop()
				}
			}
			errc := make(chan error, 1)
			go func() { errc <- c.Run(ctx); close(events) }()
			var announced []event.Stopping
			var metrics, evals []int
			var end event.RunEnd
			for e := range events {
				switch v := e.(type) {
				case event.Stopping:
					announced = append(announced, v)
				case event.StepMetrics:
					metrics = append(metrics, v.Step)
				case event.Eval:
					evals = append(evals, v.Step)
				case event.RunEnd:
					end = v
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if len(announced) != 1 || !strings.HasPrefix(announced[0].Message, tc.announce) || announced[0].Reason != tc.reason {
				t.Errorf("announced %+v; want one stop with %q… and reason %q", announced, tc.announce, tc.reason)
			}
			wantStep := 0
			if n := len(tc.steps); n > 0 {
				wantStep = tc.steps[n-1]
			}
			if end.Status != tc.status || end.Reason != tc.reason || !strings.HasPrefix(end.Detail, tc.detail) || (tc.detail == "") != (end.Detail == "") ||
				end.Checkpoint != tc.checkpoint || end.Step != wantStep {
				t.Errorf("end %+v; want %s, %q, detail %q…, checkpoint %d", end, tc.status, tc.reason, tc.detail, tc.checkpoint)
			}
			if !slices.Equal(metrics, tc.steps) || !slices.Equal(evals, tc.evals) {
				t.Errorf("steps %v, evaluations %v went out; want %v, %v", metrics, evals, tc.steps, tc.evals)
			}
			run, err := st.GetRun("test-run")
			if err != nil || run.Status != tc.status || run.StopReason != tc.reason || run.StopDetail != end.Detail || run.Ended.IsZero() {
				t.Errorf("stored run %+v (%v); want %s, %q, detail %q, an end time", run, err, tc.status, tc.reason, end.Detail)
			}
			stored, err := st.Evals("test-run")
			if err != nil || len(stored) != len(tc.evals) {
				t.Errorf("%d evaluations stored (%v); want %d (a dropped one leaves none)", len(stored), err, len(tc.evals))
			}
			if tc.checkpoint == 0 {
				if _, err := st.LatestCheckpoint("test-run"); err == nil {
					t.Error("a checkpoint was stored, though no step was trained")
				}
				return
			}
			m, err := st.LatestCheckpoint("test-run")
			if err != nil || m.Step != tc.checkpoint {
				t.Fatalf("latest checkpoint %d (%v); want %d", m.Step, err, tc.checkpoint)
			}
			cp, err := st.LoadCheckpoint("test-run", m.Step)
			if err != nil {
				t.Fatal(err)
			}
			// A discarded update leaves the weights and the AdamW moments of the step before: the
			// update count saved is that of the steps kept (4 micro-batch updates per step here).
			if tc.over["train.micro_batch"] == "1" {
				if got, want := cp.Metrics["adam_step"], float64(4*tc.checkpoint); got != want {
					t.Errorf("the checkpoint of step %d holds %v AdamW updates; want %v", m.Step, got, want)
				}
			}
			if err := st.Verify("test-run", m.Step); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestEndWithoutEvaluations: a run that never evaluates ends naming no best step and its last
// checkpoint.
func TestEndWithoutEvaluations(t *testing.T) {
	c, _, events := tinyRun(t, noEval(map[string]string{"run.max_steps": "1"}))
	var end event.RunEnd
	for _, e := range runEvents(t, c, events) {
		if v, ok := e.(event.RunEnd); ok {
			end = v
		}
	}
	if end.Status != "finished" || end.Evaluations != 0 || end.BestStep != 0 || end.Checkpoint != 1 || end.Step != 1 {
		t.Errorf("end %+v; want finished, no evaluation, no best step, checkpoint 1", end)
	}
}
