package record

import (
	"path/filepath"
	"reflect"
	"testing"

	"agentrl/engine/event"
	"agentrl/envs"
	"agentrl/store"
)

// TestRecordReplay records a step's events and reads them back: what the store keeps replays as
// the events that were recorded (phase times before Phases are not kept), the evaluation's
// trajectories kept apart from the training ones and replayed after them, marked Eval.
func TestRecordReplay(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutRun(store.Run{ID: "r", Status: "running", TotalSteps: 1}); err != nil {
		t.Fatal(err)
	}
	rec := New(st, "r", 4)
	metrics := event.StepMetrics{Step: 1, Metrics: map[event.Metric]float64{"loss": -0.25, "accuracy": 0.5}}
	tr := event.Trajectory{Step: 1, TaskID: "t7", Group: 1, Sample: 2, Reward: envs.Reward{Total: 1}, Correct: true, Hint: "h",
		Turns: []event.Turn{{Assistant: "a", Code: "print(1)"}}, Pieces: []string{"a"}, Advantages: []float32{0.5}}
	ev := event.Eval{Step: 1, PassAtK: map[int]float64{1: 0.5}, Counts: [][2]int{{2, 1}}, Tasks: "fp"}
	for _, e := range []event.Event{event.Phase{Step: 1, Phase: "rollout", Seconds: 1}, event.Phase{Step: 1, Phase: "rollout", Seconds: 2}, event.Phase{Step: 1, Phase: "train", Seconds: 3}} {
		rec.Observe(e)
	}
	// two evaluation tasks with the same id, two samples each: kept as samples 0-3 of "e"
	var evalTrajs []event.Event
	for g := range 2 {
		for s := range 2 {
			evalTrajs = append(evalTrajs, event.Trajectory{Step: 1, TaskID: "e", Group: g, Sample: s, Correct: g == s, Eval: true})
		}
	}
	if err := rec.Record(append([]event.Event{metrics, tr, ev}, evalTrajs...)...); err != nil {
		t.Fatal(err)
	}
	if err := rec.Phases(1); err != nil {
		t.Fatal(err)
	}
	recs, err := st.Trajectories("r", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Sample != 6 || !recs[0].Hinted || !recs[0].Correct || recs[0].Reward != 1 {
		t.Fatalf("stored trajectories %+v; want the training one alone, sample 1·4+2 = 6", recs)
	}
	evalRecs, err := st.EvalTrajectories("r", 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range evalRecs {
		if !r.Eval || r.Sample != i || r.Correct != (i == 0 || i == 3) {
			t.Errorf("evaluation trajectory %d stored as %+v; want sample %d (group·2 + sample), marked eval", i, r, i)
		}
	}
	if len(evalRecs) != 4 {
		t.Fatalf("%d evaluation trajectories stored; want 4", len(evalRecs))
	}
	evs, err := Replay(st, "r")
	if err != nil {
		t.Fatal(err)
	}
	var got []event.Event
	for _, e := range evs[1:] {
		got = append(got, e)
	}
	want := append([]event.Event{event.Phase{Step: 1, Phase: "rollout", Seconds: 3}, event.Phase{Step: 1, Phase: "train", Seconds: 3}, metrics, tr}, evalTrajs...)
	want = append(want, ev)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed\n%+v\nwant\n%+v", got, want)
	}
	if New(nil, "r", 4) != nil || (*Recorder)(nil).Record(metrics) != nil {
		t.Fatal("a run without a store must keep nothing")
	}
}
