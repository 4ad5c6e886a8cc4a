package best

import (
	"maps"
	"testing"
)

// TestTracker: the best evaluation by the metric's k, the evaluations since, and why they stop the
// run: a fall past max_drop, or patience evaluations without improvement.
func TestTracker(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxDrop     float64
		patience    int
		scores      []float64 // pass@2 of the evaluations of steps 0, 1, 2, …
		best, since int
		bests       []bool
		stop        string
	}{
		{name: "improving", scores: []float64{0.1, 0.2, 0.3}, best: 2, bests: []bool{true, true, true}},
		{name: "patience", patience: 2, scores: []float64{0.3, 0.2, 0.3}, best: 0, since: 2, bests: []bool{true, false, false},
			stop: "early stop: pass@2 did not improve for 2 evaluations"},
		{name: "dropped", maxDrop: 0.1, scores: []float64{0.5, 0.45, 0.3}, best: 0, since: 2, bests: []bool{true, false, false},
			stop: "early stop: pass@2 fell to 0.300, more than 0.1 below its best 0.500 at step 0"},
		{name: "neither", scores: []float64{0.5, 0.1, 0.1}, best: 0, since: 2, bests: []bool{true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New("pass@2", tc.maxDrop, tc.patience)
			for step, s := range tc.scores {
				if got := tr.Observe(step, map[int]float64{1: 1, 2: s}); got != tc.bests[step] {
					t.Errorf("step %d best: %v; want %v", step, got, tc.bests[step])
				}
			}
			if tr.Step() != tc.best || tr.since != tc.since || tr.EarlyStop() != tc.stop {
				t.Errorf("best step %d, %d since, stop %q; want %d, %d, %q", tr.Step(), tr.since, tr.EarlyStop(), tc.best, tc.since, tc.stop)
			}
			again := New("pass@2", tc.maxDrop, tc.patience)
			again.Restore(tr.Metrics())
			if !maps.Equal(again.Metrics(), tr.Metrics()) || again.Choice() != tr.Choice() {
				t.Errorf("restored %v; saved %v", again.Metrics(), tr.Metrics())
			}
		})
	}
}

// TestMarked: a step the user marks overrides the automatic choice; a metric that names no pass@k
// chooses nothing.
func TestMarked(t *testing.T) {
	tr := New("pass@1", 0, 0)
	tr.Observe(4, map[int]float64{1: 0.5})
	if tr.Choice() != 4 || tr.Marked() != 0 {
		t.Fatalf("choice %d, marked %d; want 4, none", tr.Choice(), tr.Marked())
	}
	tr.Mark(2)
	if tr.Choice() != 2 || tr.Marked() != 2 || tr.Step() != 4 {
		t.Errorf("choice %d, marked %d, automatic %d; want 2, 2, 4", tr.Choice(), tr.Marked(), tr.Step())
	}
	none := New("reward", 0, 0)
	if none.Observe(1, map[int]float64{1: 1}) || none.Choice() != 0 {
		t.Errorf("a metric with no k chose step %d", none.Choice())
	}
}
