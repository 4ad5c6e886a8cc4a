package compare

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/store"
)

// seedStore writes runs with one task fingerprint: each run's evaluations at the given steps, as
// per-task (samples, correct) counts with pass@1 computed by hand from them.
func seedStore(t *testing.T, runs map[string]map[int][][2]int) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for id, evals := range runs {
		if err := st.PutRun(store.Run{ID: id}); err != nil {
			t.Fatal(err)
		}
		for step, counts := range evals {
			var p float64
			for _, c := range counts {
				p += float64(c[1]) / float64(c[0])
			}
			e := store.Eval{Step: step, Counts: counts, Tasks: "f", PassAtK: map[int]float64{1: p / float64(len(counts))}}
			if err := st.PutEval(id, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

// TestSeeds checks the three-seed means and standard errors against values worked out by hand:
// per-pair A − B of 1/4, 1/4, 1/2 has mean 1/3 and spread/√3 = (√3/12)/√3 = 1/12.
func TestSeeds(t *testing.T) {
	start := [][2]int{{2, 0}, {2, 1}} // pass@1 = 1/4
	st := seedStore(t, map[string]map[int][][2]int{
		"a1": {0: start, 5: {{2, 2}, {2, 1}}}, // 3/4
		"a2": {0: start, 5: {{2, 2}, {2, 1}}},
		"a3": {0: start, 5: {{2, 1}, {2, 2}}},
		"b1": {0: start, 5: {{2, 1}, {2, 1}}}, // 1/2
		"b2": {0: start, 5: {{2, 1}, {2, 1}}},
		"b3": {0: start, 5: {{2, 0}, {2, 1}}}, // 1/4
	})
	sc, err := Seeds(st, []string{"a1", "a2", "a3"}, []string{"b1", "b2", "b3"}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Pairs) != 3 || len(sc.Summary) != 1 {
		t.Fatalf("got %d pairs, %d summary rows", len(sc.Pairs), len(sc.Summary))
	}
	r := sc.Summary[0]
	for _, c := range []struct {
		name     string
		got      Mean
		mean, se float64
	}{
		{"A", r.A, 0.75, 0},
		{"B", r.B, 5.0 / 12, 1.0 / 12},
		{"A − B", r.Diff, 1.0 / 3, 1.0 / 12},
		{"A since step 0", r.Change[0], 0.5, 0},
		{"B since step 0", r.Change[1], 1.0 / 6, 1.0 / 12},
	} {
		if math.Abs(c.got.Mean-c.mean) > 1e-12 || math.Abs(c.got.SE-c.se) > 1e-12 || c.got.Seeds != 3 {
			t.Errorf("%s: %.6f ± %.6f over %d seeds; want %.6f ± %.6f over 3", c.name, c.got.Mean, c.got.SE, c.got.Seeds, c.mean, c.se)
		}
	}
	if ch := sc.Changes[2].B[1]; math.Abs(ch.Delta) > 1e-12 {
		t.Errorf("b3 since step 0: %+v, want 0 (the same counts)", ch)
	}
	if _, err := json.Marshal(sc); err != nil {
		t.Errorf("JSON: %v", err)
	}
}

// TestSeedsRefuses: unequal sides, a pair evaluated on other tasks, a run with no step 0.
func TestSeedsRefuses(t *testing.T) {
	st := seedStore(t, map[string]map[int][][2]int{
		"a": {0: {{2, 1}}, 5: {{2, 2}}},
		"b": {5: {{2, 1}}},
		"c": {5: {{2, 1}, {2, 1}}},
	})
	for _, tc := range []struct {
		as, bs []string
		want   string
	}{
		{[]string{"a", "a"}, []string{"b"}, "2 A runs and 1 B runs"},
		{[]string{"a", "a"}, []string{"b", "c"}, "pair 2: compare: runs a and c evaluated different held-out tasks"},
	} {
		if _, err := Seeds(st, tc.as, tc.bs, -1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Seeds(%v, %v): %v; want an error saying %q", tc.as, tc.bs, err, tc.want)
		}
	}
	// b has no step-0 evaluation: its change is left out, one seed's mean has no standard error.
	sc, err := Seeds(st, []string{"a"}, []string{"b"}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if r := sc.Summary[0]; r.Change[1].Seeds != 0 || r.Change[0].Seeds != 1 || !math.IsNaN(r.Diff.SE) {
		t.Errorf("summary %+v: want B's change over no seeds, A's over one, no standard error", r)
	}
	if b, err := json.Marshal(sc); err != nil || !strings.Contains(string(b), `"se":null`) {
		t.Errorf("JSON of an undefined standard error: %v %s", err, b)
	}
}
