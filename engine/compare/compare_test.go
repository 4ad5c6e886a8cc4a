package compare

import (
	"strings"
	"testing"

	"agentrl/store"
)

// TestRunsWithoutCommonEvaluation: compare says which run has no evaluation and how to get one,
// keeps the "per-task counts" wording for runs whose evaluations predate the counts, and names the
// steps of runs that evaluated at different steps.
func TestRunsWithoutCommonEvaluation(t *testing.T) {
	counts := [][2]int{{2, 1}, {2, 2}}
	st := seedStore(t, map[string]map[int][][2]int{
		"evaluated": {0: counts, 5: counts},
		"none":      {},
		"other":     {3: counts},
	})
	if err := st.PutRun(store.Run{ID: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutEval("old", store.Eval{Step: 5, PassAtK: map[int]float64{1: 0.5}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a, b      string
		want, not []string
	}{
		{"evaluated", "none", []string{"run none has no evaluation:", "eval.every", "eval.at_start"}, []string{"before this version"}},
		{"none", "evaluated", []string{"run none has no evaluation:"}, []string{"before this version"}},
		{"evaluated", "old", []string{"have no evaluation step in common with per-task counts (runs made before this version store none)"}, nil},
		{"evaluated", "other", []string{"runs evaluated and other have no evaluation step in common (evaluated: steps 0, 5; other: steps 3)"}, []string{"before this version"}},
	} {
		_, err := Runs(st, tc.a, tc.b, -1)
		if err == nil {
			t.Errorf("Runs(%s, %s): no error", tc.a, tc.b)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Runs(%s, %s): %v; want it to say %q", tc.a, tc.b, err, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(err.Error(), n) {
				t.Errorf("Runs(%s, %s): %v; should not say %q", tc.a, tc.b, err, n)
			}
		}
	}
}

// TestRunsGraders: compare names each run's grader and warns when they differ; a run that
// recorded none was judged by the verifier of its day, the same measure as a recorded verifier.
func TestRunsGraders(t *testing.T) {
	counts := [][2]int{{2, 1}, {2, 2}}
	st := seedStore(t, map[string]map[int][][2]int{"old": {0: counts}, "verifier": {0: counts}, "dapo": {0: counts}})
	for id, g := range map[string]string{"verifier": "verifier@agentrl mathverify", "dapo": "math_dapo@verl b178a3c"} {
		run, err := st.GetRun(id)
		if err != nil {
			t.Fatal(err)
		}
		run.Grader = g
		if err := st.PutRun(run); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		a, b string
		warn bool
	}{{"old", "verifier", false}, {"verifier", "verifier", false}, {"verifier", "dapo", true}, {"old", "dapo", true}} {
		c, err := Runs(st, tc.a, tc.b, -1)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Warning != ""; got != tc.warn {
			t.Errorf("Runs(%s, %s): warning %q (graders %q); want a warning %v", tc.a, tc.b, c.Warning, c.Graders, tc.warn)
		}
		if tc.warn && !strings.Contains(c.Warning, "math_dapo@verl b178a3c") {
			t.Errorf("Runs(%s, %s): warning %q does not name the graders", tc.a, tc.b, c.Warning)
		}
	}
}
