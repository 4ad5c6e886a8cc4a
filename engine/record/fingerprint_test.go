package record

import (
	"path/filepath"
	"testing"

	"agentrl/engine/event"
	"agentrl/envs"
	"agentrl/store"
)

// TestFingerprint: two stores of the same run that differ only in timings (phase seconds, *_s
// metrics, a tool's seconds) and run id have one fingerprint; a different loss, reward or
// pass@k gives another.
func TestFingerprint(t *testing.T) {
	type change struct {
		id              string
		secs, loss, rew float64
		pass            float64
	}
	fingerprint := func(c change) Fingerprint {
		st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if err := st.PutRun(store.Run{ID: c.id, Status: "finished", TotalSteps: 1}); err != nil {
			t.Fatal(err)
		}
		rec := New(st, c.id, 4)
		rec.Observe(event.Phase{Step: 1, Phase: "rollout", Seconds: c.secs})
		err = rec.Record(event.StepMetrics{Step: 1, Metrics: map[event.Metric]float64{event.MetricLoss: c.loss, "train_s": c.secs, event.MetricToolStallShare: c.secs}},
			event.Trajectory{Step: 1, TaskID: "t", Reward: envs.Reward{Total: c.rew}, Turns: []event.Turn{{Assistant: "a", ToolSeconds: c.secs}}},
			event.Eval{Step: 1, PassAtK: map[int]float64{1: c.pass}, Counts: [][2]int{{2, 1}}, Tasks: "fp"})
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Phases(1); err != nil {
			t.Fatal(err)
		}
		f, err := FingerprintOf(st, c.id)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := change{id: "a", secs: 1, loss: -0.25, rew: 1, pass: 0.5}
	want := fingerprint(base)
	if want.Steps != 1 || want.Trajectories != 1 || want.Evaluations != 1 || len(want.Hash) != 64 {
		t.Fatalf("fingerprint %+v; want one step, trajectory and evaluation and a SHA-256", want)
	}
	for _, tc := range []struct {
		name string
		c    change
		same bool
	}{
		{"other timings and run id", change{id: "b", secs: 7, loss: -0.25, rew: 1, pass: 0.5}, true},
		{"other loss", change{id: "a", secs: 1, loss: -0.5, rew: 1, pass: 0.5}, false},
		{"other reward", change{id: "a", secs: 1, loss: -0.25, rew: 0, pass: 0.5}, false},
		{"other pass@1", change{id: "a", secs: 1, loss: -0.25, rew: 1, pass: 0.75}, false},
	} {
		if got := fingerprint(tc.c); (got.Hash == want.Hash) != tc.same {
			t.Errorf("%s: hash %s vs %s; same %v, want %v\n%v\n%v", tc.name, got.Hash, want.Hash, got.Hash == want.Hash, tc.same, got.Lines, want.Lines)
		}
	}
}
