package engine

import (
	"context"
	"reflect"
	"testing"

	"agentrl/engine/event"
)

// TestValidationChoosesBest runs the same two steps with and without validation tasks: the
// held-out evaluations and the training metrics are identical (validation samples apart from
// both), and with them each evaluation's Best follows validation pass@1, not held-out pass@1.
func TestValidationChoosesBest(t *testing.T) {
	type result struct {
		evals   []event.Eval
		metrics []map[event.Metric]float64
		phases  map[string]bool
	}
	run := func(extra map[string]string) result {
		c, _, events := tinyRun(t, extra)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(context.Background()); close(events) }()
		res := result{phases: map[string]bool{}}
		for e := range events {
			switch v := e.(type) {
			case event.Eval:
				res.evals = append(res.evals, v)
			case event.StepMetrics:
				m := map[event.Metric]float64{}
				for _, k := range []event.Metric{"loss", "reward_mean", "grad_norm", "accuracy"} {
					m[k] = v.Metrics[k]
				}
				res.metrics = append(res.metrics, m)
			case event.Progress:
				res.phases[v.Phase] = true
			}
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return res
	}
	plain := run(map[string]string{"eval.validation_tasks": "0"})
	val := run(map[string]string{"eval.validation_tasks": "3", "eval.validation_samples": "2"})
	if len(plain.evals) != 3 || len(val.evals) != 3 {
		t.Fatalf("got %d and %d evaluations, want 3 (start, steps 1 and 2)", len(plain.evals), len(val.evals))
	}
	if !reflect.DeepEqual(plain.metrics, val.metrics) {
		t.Errorf("training changed with validation tasks:\n%v\n%v", plain.metrics, val.metrics)
	}
	best := -1.0
	for i, e := range val.evals {
		if !reflect.DeepEqual(e.PassAtK, plain.evals[i].PassAtK) {
			t.Errorf("step %d: held-out pass@k %v with validation, %v without", e.Step, e.PassAtK, plain.evals[i].PassAtK)
		}
		if plain.evals[i].Validation != nil || len(e.Validation) != 2 {
			t.Fatalf("step %d: validation pass@k %v (without: %v); want pass@1 and pass@2 only with it", e.Step, e.Validation, plain.evals[i].Validation)
		}
		if want := e.Validation[1] > best; e.Best != want {
			t.Errorf("step %d: Best %v with validation pass@1 %.3f after a best of %.3f", e.Step, e.Best, e.Validation[1], best)
		}
		best = max(best, e.Validation[1])
	}
	if !val.phases[event.PhaseValidate] || plain.phases[event.PhaseValidate] {
		t.Errorf("validation progress: %v with, %v without", val.phases, plain.phases)
	}
}
