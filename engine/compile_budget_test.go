package engine

import (
	"context"
	"testing"

	"agentrl/engine/event"
)

// TestCompileBudget runs three steps of the default recipe (recipes/retool.yaml at its rollout
// lengths: 96 new tokens a turn, 512 a trajectory; a tiny model and batch, an evaluation before
// step 1 and after every step) and checks the compile budget: every program is compiled by the
// end of step 1 — steps 2 and 3 and the evaluations after them compile nothing — and each kind
// stays within the count its shapes allow.
func TestCompileBudget(t *testing.T) {
	c, _, events := tinyRun(t, map[string]string{"run.max_steps": "3", "eval.every": "1",
		"rollout.max_new_tokens": "96", "rollout.max_total_tokens": "512"})
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	var start map[string]event.Compiled
	var steps []event.StepMetrics
	for e := range events {
		switch v := e.(type) {
		case event.RunStart:
			start = v.Compiles
		case event.StepMetrics:
			steps = append(steps, v)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 {
		t.Fatalf("got %d steps' metrics; want 3", len(steps))
	}
	// Before the run: the generator's steps, for 4 attention buckets (64 … 512): decode (chunk 1)
	// and prefill (chunk 64), the same on the CPU as on a GPU; and the weight sync's cast.
	if start["decode"].Programs != 4 || start["prefill"].Programs != 4 || start["sync"].Programs != 1 {
		t.Errorf("compiled before the run: %v; want decode 4, prefill 4, sync 1", start)
	}
	total := 0
	for _, s := range steps {
		t.Logf("step %d: compiles %v, new %v, %v", s.Step, s.Metrics["compiles"], s.Metrics["compiles_new"], s.Compiles)
		total += int(s.Metrics["compiles_new"])
		if s.Step > 1 && s.Metrics["compiles_new"] != 0 {
			t.Errorf("step %d compiled %v new programs; want 0 after step 1", s.Step, s.Metrics["compiles_new"])
		}
	}
	end := c.Compiles()
	t.Logf("end of run: %s", end)
	if end.Programs != total || end.Programs != int(steps[0].Metrics["compiles"]) {
		t.Errorf("the run compiled %d programs; step 1 reported %v and the steps' new ones sum to %d: "+
			"the evaluations and saves after step 1 compiled", end.Programs, steps[0].Metrics["compiles"], total)
	}
	// Each kind's bound: the generator's and the sync's exactly; the reference forward one program
	// per length bucket a sequence can take (64 … 1024: a teacher's prompt carries a hint of up to
	// 128 tokens beyond the 512 of a trajectory), the update one per micro-batch length (64 … 512).
	bounds := map[string]int{"decode": 4, "prefill": 4, "sync": 2, "reference": 5, "train": 4}
	budget := 0
	for k, n := range bounds {
		budget += n
		if got := end.Kinds[k].Programs; got > n || (k != "reference" && k != "train" && got != n) {
			t.Errorf("kind %s compiled %d programs; want %d", k, got, n)
		}
	}
	for k := range end.Kinds {
		if _, ok := bounds[k]; !ok {
			t.Errorf("kind %s compiled %d programs; want none", k, end.Kinds[k].Programs)
		}
	}
	if end.Programs > budget {
		t.Errorf("compiled %d programs; the budget is %d", end.Programs, budget)
	}
}
