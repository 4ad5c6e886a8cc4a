package engine

import (
	"testing"

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
