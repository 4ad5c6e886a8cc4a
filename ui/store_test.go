package ui

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"agentrl/engine/event"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// storedRun writes two runs into a temporary store: r1 (finished, best step 2) with metrics,
// evaluations, trajectories and checkpoints, and r0 with evaluations only, for the overlay.
func storedRun(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	must(st.PutRun(store.Run{ID: "r1", Name: "retool", Recipe: "recipes/retool.yaml", Created: now, Status: "finished", BestStep: 2, TotalSteps: 2}))
	must(st.PutRun(store.Run{ID: "r0", Name: "baseline", Recipe: "recipes/grpo.yaml", Created: now, Status: "finished", BestStep: 1, TotalSteps: 2}))
	for step := 1; step <= 2; step++ {
		must(st.PutMetrics("r1", step, map[string]float64{"reward_mean": 0.1 * float64(step)}))
		must(st.PutPhases("r1", step, map[string]float64{"train": 1.25 * float64(step), "rollout": 0.5}))
		// Per-task counts: pass@1 goes 0.25, 0.5 → 0.75, 0.5 (change +0.25 ± 0.25); pass@8 is 1 throughout.
		counts := [][2]int{{8, 2}, {8, 4}}
		if step == 2 {
			counts = [][2]int{{8, 6}, {8, 4}}
		}
		levels := map[string]map[int]float64{"0": {1: 0.375, 8: 1}, "1": {1: 0.125 * float64(step), 8: 1}}
		must(st.PutEval("r1", store.Eval{Step: step, PassAtK: map[int]float64{1: 0.2 * float64(step), 8: 0.3 * float64(step)}, ByLevel: levels, Counts: counts}))
		must(st.PutEval("r0", store.Eval{Step: step, PassAtK: map[int]float64{1: 0.15 * float64(step), 8: 0.25 * float64(step)}}))
		var recs []store.TrajectoryRecord
		for i := 0; i < 3; i++ {
			tr := trajectory(step, i)
			data, _ := json.Marshal(tr)
			recs = append(recs, store.TrajectoryRecord{Step: step, TaskID: tr.TaskID, Sample: tr.Group*4 + tr.Sample, Reward: tr.Reward.Total, Correct: tr.Correct, Hinted: tr.Hint != "", Data: data})
		}
		must(st.PutTrajectories("r1", recs))
		must(st.SaveCheckpoint(&store.Checkpoint{
			Manifest: store.Manifest{Run: "r1", Step: step, Metrics: map[string]float64{"best": 0.4}},
			Weights:  []*safetensors.Tensor{{Name: "w", DType: safetensors.F32, Shape: []int{4}, Data: make([]byte, 16)}},
		}))
	}
	return st
}

func TestStoredEvents(t *testing.T) {
	st := storedRun(t)
	evs, err := StoredEvents(st, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type())
	}
	want := "run_start phase phase metrics trajectory trajectory trajectory eval checkpoint phase phase metrics trajectory trajectory trajectory eval checkpoint run_end"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events:\n%s\nwant\n%s", got, want)
	}
	if ck := evs[16].(event.Checkpoint); !ck.Best || ck.Step != 2 || ck.Bytes != 16 || ck.ID != "r1/2" {
		t.Fatalf("checkpoint event %+v", ck)
	}
	if ev := evs[7].(event.Eval); ev.Change != nil {
		t.Fatalf("the first evaluation has a change: %+v", ev)
	}
	if ev := evs[15].(event.Eval); ev.Since != 1 || !reflect.DeepEqual(ev.Change, map[int]event.Delta{1: {Mean: 0.25, SE: 0.25}, 8: {}}) {
		t.Fatalf("step 2 evaluation %+v; want pass@1 +0.25 ± 0.25 and pass@8 +0 ± 0 since step 1", ev)
	}
	if tr := evs[4].(event.Trajectory); len(tr.Turns) == 0 || len(tr.Pieces) == 0 {
		t.Fatalf("the stored trajectory lost its turns: %+v", tr)
	}
	if end := evs[len(evs)-1].(event.RunEnd); end.Status != "finished" || end.BestStep != 2 {
		t.Fatalf("end %+v", end)
	}
	if _, err := StoredEvents(st, "nope"); err == nil {
		t.Fatal("no error for a run that is not stored")
	}
	// a best checkpoint marked by hand reads back as the user's mark
	run, _ := st.GetRun("r1")
	run.BestStep, run.BestPinned = 1, true
	if err := st.PutRun(run); err != nil {
		t.Fatal(err)
	}
	marked, err := StoredEvents(st, "r1")
	if err != nil {
		t.Fatal(err)
	}
	mv := newModel(config{initial: marked, store: st, runID: "r1", memSample: func() uint64 { return 1 }})
	mv.resize(120, 40)
	press(mv, "7")
	if end := marked[len(marked)-1].(event.RunEnd); !end.Marked || end.BestStep != 1 {
		t.Fatalf("end of the marked run %+v", end)
	}
	if v := screen(t, mv, 120, 40); !strings.Contains(v, "★ manual") {
		t.Fatalf("checkpoints pane of a run marked by hand without ★ manual:\n%s", v)
	}
	run.BestStep, run.BestPinned = 2, false
	if err := st.PutRun(run); err != nil {
		t.Fatal(err)
	}

	// the read-only view of it, with r0 overlaid on the curves
	m := newModel(config{initial: evs, store: st, runID: "r1", memSample: func() uint64 { return 1 }})
	m.Update(keyMsg("x")) // nothing
	m.resize(120, 40)
	press(m, "1")
	if v := screen(t, m, 120, 40); !strings.Contains(v, "since step 1: pass@1 +0.250±0.250  pass@8 +0.000±0.000") ||
		!strings.Contains(v, "level 1: pass@1 0.250  pass@8 1.000") {
		t.Fatalf("status pane without the change since the first evaluation or the step-2 level lines:\n%s", v)
	}
	if v := screen(t, m, 120, 40); !strings.Contains(v, "rollout      0.50s") || !strings.Contains(v, "train        2.50s") {
		t.Fatalf("status pane without the stored phase times of step 2 (rollout 0.50s, train 2.50s):\n%s", v)
	}
	press(m, "7")
	v := screen(t, m, 120, 40)
	if !strings.Contains(v, "run finished") || !strings.Contains(v, "best*") || !strings.Contains(v, "r1/2") {
		t.Fatalf("view of a stored run:\n%s", v)
	}
	press(m, "6", "o")
	v = screen(t, m, 120, 40)
	if !strings.Contains(v, "Overlay which run?") || !strings.Contains(v, "baseline (r0)") || strings.Contains(v, "retool (r1)") {
		t.Fatalf("picker:\n%s", v)
	}
	press(m, "j", "enter")
	v = screen(t, m, 120, 40)
	if !strings.Contains(v, "6 Curves · pass@k vs baseline (r0)") || !strings.Contains(v, "∘ baseline (r0) 0.") {
		t.Fatalf("overlay:\n%s", v)
	}
	press(m, "o", "enter") // "none" removes it
	if v = screen(t, m, 120, 40); strings.Contains(v, "baseline") {
		t.Fatalf("overlay not removed:\n%s", v)
	}
}

func TestTrajectoryOfFallsBack(t *testing.T) {
	tr := trajectoryOf(store.TrajectoryRecord{Step: 3, TaskID: "t", Sample: 5, Reward: 0.5, Correct: true, Hinted: true, Data: []byte("not json")})
	if tr.Step != 3 || tr.TaskID != "t" || tr.Sample != 5 || tr.Reward.Total != 0.5 || !tr.Correct || tr.Hint == "" {
		t.Fatalf("fallback %+v", tr)
	}
}

// TestViewWalksEvaluationTrajectories: the view of a stored run lists its evaluations'
// trajectories as such (e shows them alone), a training run's beside its step's training ones,
// and an evaluation run says what it evaluated.
func TestViewWalksEvaluationTrajectories(t *testing.T) {
	st := storedRun(t)
	evalTrajs := func(run string, step int) {
		t.Helper()
		var recs []store.TrajectoryRecord
		for i := 0; i < 2; i++ {
			tr := trajectory(step, i)
			tr.Eval, tr.TaskID, tr.Pieces, tr.Advantages = true, fmt.Sprintf("heldout-%04d", i), nil, nil
			data, _ := json.Marshal(tr)
			recs = append(recs, store.TrajectoryRecord{Step: step, TaskID: tr.TaskID, Sample: tr.Sample, Correct: tr.Correct, Eval: true, Data: data})
		}
		if err := st.PutTrajectories(run, recs); err != nil {
			t.Fatal(err)
		}
	}
	evalTrajs("r1", 2)
	if err := st.PutRun(store.Run{ID: "ev", Name: "retool", Recipe: "recipes/retool.yaml", Status: "finished", Kind: store.KindEval,
		Evaluated: "checkpoint r1 step 2", EvalSet: "heldout", EvalStep: 2, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutEval("ev", store.Eval{Step: 2, PassAtK: map[int]float64{1: 0.5}, Counts: [][2]int{{1, 1}, {1, 0}}}); err != nil {
		t.Fatal(err)
	}
	evalTrajs("ev", 2)
	for _, tc := range []struct {
		run          string
		total, evals int
		want         []string
	}{
		{"r1", 8, 2, []string{"3 Trajectories · 8 (2 eval)"}},
		{"ev", 2, 2, []string{"3 Trajectories · 2 (2 eval)"}},
	} {
		evs, err := StoredEvents(st, tc.run)
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(config{initial: evs, store: st, runID: tc.run, memSample: func() uint64 { return 1 }})
		m.resize(120, 40)
		press(m, "3")
		v := screen(t, m, 120, 40)
		for _, w := range append(tc.want, "2 eval  heldout-0000") {
			if !strings.Contains(v, w) {
				t.Errorf("%s: the Trajectories pane lacks %q:\n%s", tc.run, w, v)
			}
		}
		if n := len(shown(m)); n != tc.total {
			t.Errorf("%s: %d trajectories listed; want %d", tc.run, n, tc.total)
		}
		press(m, "e", "e") // all → training → evaluation
		if n := len(shown(m)); n != tc.evals {
			t.Errorf("%s: %d evaluation trajectories listed; want %d", tc.run, n, tc.evals)
		}
		if tc.run == "ev" {
			press(m, "1")
			if v := screen(t, m, 120, 40); !strings.Contains(v, "Evaluates checkpoint r1 step 2") || !strings.Contains(v, "run finished") {
				t.Errorf("the Status pane of an evaluation run does not say what it evaluated:\n%s", v)
			}
		}
	}
}
