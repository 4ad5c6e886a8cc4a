package engine

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/compare"
	"agentrl/engine/evalset"
	"agentrl/engine/event"
	"agentrl/engine/record"
	"agentrl/store"
)

// evalTrajLines are the evaluation trajectories among evs at step, as sorted JSON lines with
// their tools' seconds (a timing) zeroed: what two evaluations of the same model must share.
func evalTrajLines(t *testing.T, evs []event.Event, step int) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		v, ok := e.(event.Trajectory)
		if !ok || !v.Eval || v.Step != step {
			continue
		}
		v.Turns = slices.Clone(v.Turns)
		for i := range v.Turns {
			v.Turns[i].ToolSeconds = 0
		}
		line, err := event.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(line))
	}
	slices.Sort(out)
	return out
}

// TestEvalOnlyMatchesTrainingEvaluation: an evaluation-only run of the model a training run
// starts from gives that run's step-0 evaluation (per-task counts, pass@k, the tasks'
// fingerprint, every trajectory); both runs' evaluation trajectories are stored, marked and
// replayed; the fingerprint leaves them out; and compare reads the evaluation run against the
// training run.
func TestEvalOnlyMatchesTrainingEvaluation(t *testing.T) {
	c, st, events := tinyRun(t, map[string]string{"run.max_steps": "1"})
	trainEvs := runEvents(t, c, events)

	ec, eevents := tinyRunWith(t, st, map[string]string{"run.max_steps": "1"}, func(o *Options) {
		o.RunID, o.Eval = "eval-run", &EvalOnly{Set: evalset.Heldout, Of: "model tiny"}
	})
	evalEvs := runEvents(t, ec, eevents)

	trainEvals, err := st.Evals("test-run")
	if err != nil || len(trainEvals) != 2 || trainEvals[0].Step != 0 {
		t.Fatalf("training run's evaluations %+v (%v); want steps 0 and 1", trainEvals, err)
	}
	evals, err := st.Evals("eval-run")
	if err != nil || len(evals) != 1 {
		t.Fatalf("evaluation run's evaluations %+v (%v); want one", evals, err)
	}
	got, want := evals[0], trainEvals[0]
	if got.Step != 0 || !reflect.DeepEqual(got.Counts, want.Counts) || !reflect.DeepEqual(got.PassAtK, want.PassAtK) || got.Tasks != want.Tasks {
		t.Errorf("evaluation run: step %d, counts %v, pass@k %v, tasks %s; want the training run's step 0: counts %v, pass@k %v, tasks %s",
			got.Step, got.Counts, got.PassAtK, got.Tasks, want.Counts, want.PassAtK, want.Tasks)
	}
	if got.Validation != nil {
		t.Errorf("evaluation run's validation pass@k %v; an evaluation run chooses nothing, so none", got.Validation)
	}
	if g, w := evalTrajLines(t, evalEvs, 0), evalTrajLines(t, trainEvs, 0); len(w) != 4 || !reflect.DeepEqual(g, w) {
		t.Errorf("evaluation run's trajectories (%d) differ from the training run's step-0 ones (%d; want 2 tasks × 2 samples)", len(g), len(w))
	}

	run, err := st.GetRun("eval-run")
	if err != nil || run.Kind != store.KindEval || run.Evaluated != "model tiny" || run.EvalSet != evalset.Heldout || run.Status != "finished" {
		t.Errorf("evaluation run record %+v (%v); want kind eval, model tiny, heldout, finished", run, err)
	}
	var end event.RunEnd
	var start event.RunStart
	for _, e := range evalEvs {
		switch v := e.(type) {
		case event.RunEnd:
			end = v
		case event.RunStart:
			start = v
		case event.StepMetrics, event.Checkpoint:
			t.Errorf("an evaluation run emitted %s; it trains and saves nothing", e.Type())
		case event.Ledger:
			for name := range v.Components {
				if strings.Contains(name, "master weights") || strings.Contains(name, "AdamW") || strings.Contains(name, "reference weights") {
					t.Errorf("an evaluation run's memory holds %s: %v", name, v.Components)
				}
			}
		}
	}
	if ec.trainer != nil {
		t.Error("an evaluation-only run built a trainer (master weights and AdamW moments it never uses)")
	}
	// It holds one copy of the weights: the inference copy. The reference it was handed is
	// dropped, the master weights the copy was cast from are freed, and the copy refuses to sync.
	if ec.opts.Reference != nil || ec.dev.Reference != nil {
		t.Error("an evaluation-only run kept a reference model")
	}
	for i, v := range ec.opts.Policy.Params.Values {
		if v.Ok() {
			t.Errorf("an evaluation-only run still holds master weight %s", ec.opts.Policy.Params.Specs[i].Name)
			break
		}
	}
	if _, err := ec.dev.ToRollout(1); err == nil || !strings.Contains(err.Error(), "master weights were dropped") {
		t.Errorf("a sync in an evaluation-only run: %v; want a refusal naming the dropped master weights", err)
	}
	if !end.EvalOnly || end.Status != "finished" || end.Evaluations != 1 || start.Evaluates != "model tiny, heldout" {
		t.Errorf("start %+v, end %+v; want an evaluation-only run of model tiny, finished with one evaluation", start, end)
	}

	// Both runs' evaluation trajectories are stored apart from the training ones and replayed.
	for _, tc := range []struct {
		run   string
		evs   []event.Event
		steps []int
	}{{"test-run", trainEvs, []int{0, 1}}, {"eval-run", evalEvs, []int{0}}} {
		replayed, err := record.Replay(st, tc.run)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range tc.steps {
			if g, w := evalTrajLines(t, replayed, step), evalTrajLines(t, tc.evs, step); len(w) == 0 || !reflect.DeepEqual(g, w) {
				t.Errorf("%s: replayed %d evaluation trajectories of step %d; want the %d emitted", tc.run, len(g), step, len(w))
			}
		}
		recs, err := st.Trajectories(tc.run, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Eval {
				t.Errorf("%s: an evaluation trajectory among the training ones: %+v", tc.run, r)
			}
		}
	}
	fp, err := record.FingerprintOf(st, "test-run")
	if err != nil || fp.Trajectories != 4 || fp.EvalTrajectories != 8 || fp.Evaluations != 2 {
		t.Errorf("fingerprint counts %d trajectories, %d evaluation ones, %d evaluations (%v); want 4, 8 (not hashed), 2", fp.Trajectories, fp.EvalTrajectories, fp.Evaluations, err)
	}

	// compare pairs the evaluation run's one evaluation with the training run's of its step.
	cmp, err := compare.Runs(st, "eval-run", "test-run", -1)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Step != 0 || cmp.StepB != 0 || cmp.Tasks != 2 || len(cmp.Rows) != 2 {
		t.Fatalf("comparison %+v; want step 0 against step 0, 2 tasks, pass@1 and pass@2", cmp)
	}
	for _, r := range cmp.Rows {
		if r.Diff != 0 || r.A != r.B {
			t.Errorf("pass@%d: %v against %v; want equal", r.K, r.A, r.B)
		}
	}
	if cmp, err = compare.Runs(st, "test-run", "eval-run", 1); err != nil || cmp.Step != 1 || cmp.StepB != 0 {
		t.Errorf("compare at --step 1: %+v (%v); want the training run's step 1 against the evaluation run's step 0", cmp, err)
	}
	if _, err := compare.Runs(st, "test-run", "eval-run", 7); err == nil {
		t.Error("compare at a step the training run did not evaluate: no error")
	}
}

// TestEvalOnlyStop: a stop during an evaluation run drops its evaluation, says so without
// speaking of steps or checkpoints, and records the run as stopped with nothing else kept; its
// ETA is the evaluation's own.
func TestEvalOnlyStop(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, events := tinyRunWith(t, st, nil, func(o *Options) { o.RunID, o.Eval = "eval-run", &EvalOnly{Set: evalset.Heldout, Of: "model tiny"} })
	var said string
	var etas []event.Progress
	c.opts.hooks.onEmit = func(e event.Event) {
		if p, ok := e.(event.Progress); ok && p.Phase == event.PhaseEval {
			etas = append(etas, p)
			if p.Done == 1 {
				said = c.Stop("terminated (SIGTERM)")
			}
		}
	}
	evs := runEvents(t, c, events)
	end := evs[len(evs)-1].(event.RunEnd)
	if want := "stopping now: the evaluation of step 0 is dropped (0 of 2 tasks done); an evaluation run keeps nothing else"; said != want {
		t.Errorf("stop said %q; want %q", said, want)
	}
	if end.Status != "stopped" || !end.EvalOnly || end.Detail != "the evaluation of step 0 was dropped (0 of 2 tasks done)" || end.Evaluations != 0 {
		t.Errorf("end %+v; want an evaluation run stopped with its evaluation dropped", end)
	}
	run, err := st.GetRun("eval-run")
	if err != nil || run.Status != "stopped" || run.Kind != store.KindEval {
		t.Errorf("run record %+v (%v); want a stopped evaluation run", run, err)
	}
	if evals, _ := st.Evals("eval-run"); len(evals) != 0 {
		t.Errorf("evaluations stored %+v; want none", evals)
	}
	if recs, _ := st.EvalTrajectories("eval-run", -1); len(recs) != 0 {
		t.Errorf("%d evaluation trajectories stored; want none", len(recs))
	}
	for _, p := range etas {
		if p.RunETAAtLeast || p.RunETA != p.ETA {
			t.Errorf("progress %+v: an evaluation run's ETA is its evaluation's, not a lower bound", p)
		}
	}
}
