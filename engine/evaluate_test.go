package engine

import (
	"testing"

	"agentrl/engine/event"
	"agentrl/engine/record"
)

// TestEvalTrajectoriesLeaveFingerprint: eval.store_trajectories keeps the evaluations'
// trajectories without changing what a run's fingerprint hashes.
func TestEvalTrajectoriesLeaveFingerprint(t *testing.T) {
	hashes := map[string]string{}
	for _, keep := range []string{"true", "false"} {
		c, st, events := tinyRun(t, map[string]string{"run.max_steps": "1", "eval.store_trajectories": keep})
		runEvents(t, c, events)
		fp, err := record.FingerprintOf(st, "test-run")
		if err != nil {
			t.Fatal(err)
		}
		recs, err := st.EvalTrajectories("test-run", -1)
		if err != nil {
			t.Fatal(err)
		}
		if n := map[string]int{"true": 8, "false": 0}[keep]; len(recs) != n || fp.EvalTrajectories != n {
			t.Errorf("store_trajectories %s: %d stored, %d counted; want %d", keep, len(recs), fp.EvalTrajectories, n)
		}
		hashes[keep] = fp.Hash
	}
	if hashes["true"] != hashes["false"] {
		t.Errorf("fingerprints %s (stored) and %s (not stored) differ", hashes["true"], hashes["false"])
	}
}

// TestEvalContext: with eval.max_total_tokens longer than rollout's, evaluation decodes on KV
// slots of its own length (its generation reports their number) and its trajectories may grow
// past rollout's context but not past the evaluation's; without it they stay within rollout's,
// on rollout's slots. Training trajectories keep rollout's bound either way.
func TestEvalContext(t *testing.T) {
	for _, tc := range []struct {
		name              string
		evalTotal         string
		evalSlots, maxLen int // the eval phase's slots; the longest an eval trajectory may be
		longer            bool
	}{
		{name: "rollout's context", evalTotal: "0", evalSlots: 4, maxLen: 128},
		{name: "its own context", evalTotal: "512", evalSlots: 6, maxLen: 512, longer: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, events := tinyRun(t, map[string]string{"run.max_steps": "1", "eval.at_start": "false", "eval.n_samples": "3",
				"eval.max_new_tokens": "256", "eval.max_total_tokens": tc.evalTotal})
			evs := runEvents(t, c, events)
			longest := map[bool]int{} // eval → the longest trajectory
			slots := map[string]int{}
			for _, e := range evs {
				switch e := e.(type) {
				case event.Trajectory:
					longest[e.Eval] = max(longest[e.Eval], e.Tokens)
				case event.Generation:
					slots[e.Phase] = e.Slots
				}
			}
			if slots[event.PhaseEval] != tc.evalSlots || slots[event.PhaseRollout] != 4 {
				t.Errorf("slots %v; want %d in eval, 4 in rollout", slots, tc.evalSlots)
			}
			if longest[false] > 128 || longest[true] > tc.maxLen || tc.longer != (longest[true] > 128) {
				t.Errorf("longest trajectories: training %d, eval %d; want training ≤ 128, eval ≤ %d and past 128: %v", longest[false], longest[true], tc.maxLen, tc.longer)
			}
		})
	}
}
