// Package best tracks a run's best checkpoint: the step whose evaluation scored highest on the
// early-stopping metric (pass@k, on the validation tasks when the run has them), how many
// evaluations have passed since, the fall below the best that stops the run, and the step the
// user marked best instead, which overrides the automatic choice.
package best

import (
	"fmt"
	"sync/atomic"
)

// Tracker is a run's best-checkpoint bookkeeping. Observe, Restore and the automatic choice
// belong to the run's goroutine; Mark and Marked may be called from any.
type Tracker struct {
	metric   string  // early_stop.metric: pass@K
	maxDrop  float64 // early_stop.max_drop: a fall below the best by more stops the run (0: none)
	patience int     // early_stop.patience: evaluations without improvement that stop the run (0: none)

	best    float64
	step    int
	since   int
	dropped string       // why the metric's fall below its best stops the run ("" = it does not)
	marked  atomic.Int64 // the step the user marked best, 0 = automatic
}

// New is the bookkeeping of a run with no evaluation yet, choosing by metric (pass@K) and
// stopping on a fall of more than maxDrop below the best (0: never) or after patience
// evaluations without improvement (0: never).
func New(metric string, maxDrop float64, patience int) *Tracker {
	return &Tracker{metric: metric, maxDrop: maxDrop, patience: patience, best: -1}
}

// Observe takes the evaluation of step, its pass@k by k, and reports whether it is the best so
// far. A metric that names no pass@k chooses nothing.
func (t *Tracker) Observe(step int, passAtK map[int]float64) (isBest bool) {
	var k int
	if _, err := fmt.Sscanf(t.metric, "pass@%d", &k); err != nil {
		return false
	}
	v := passAtK[k]
	if v > t.best {
		t.best, t.step, t.since = v, step, 0
		return true
	}
	t.since++
	if t.maxDrop > 0 && t.best-v > t.maxDrop {
		t.dropped = fmt.Sprintf("early stop: %s fell to %.3f, more than %.3g below its best %.3f at step %d", t.metric, v, t.maxDrop, t.best, t.step)
	}
	return false
}

// EarlyStop is why the evaluations so far stop the run ("" they do not): the metric fell too far
// below its best, or it did not improve for patience evaluations.
func (t *Tracker) EarlyStop() string {
	switch {
	case t.dropped != "":
		return t.dropped
	case t.patience > 0 && t.since >= t.patience:
		return fmt.Sprintf("early stop: %s did not improve for %d evaluations", t.metric, t.since)
	}
	return ""
}

// Step is the automatic choice: the step of the best evaluation so far, 0 none.
func (t *Tracker) Step() int { return t.step }

// Mark makes step the run's best whatever the evaluations say.
func (t *Tracker) Mark(step int) { t.marked.Store(int64(step)) }

// Marked is the step the user marked best, 0 none.
func (t *Tracker) Marked() int { return int(t.marked.Load()) }

// Choice is the run's best step: the user's choice if they made one, else the automatic one.
func (t *Tracker) Choice() int {
	if m := t.Marked(); m > 0 {
		return m
	}
	return t.step
}

// Metrics is the bookkeeping as a checkpoint's manifest keeps it (Restore reads it back).
func (t *Tracker) Metrics() map[string]float64 {
	return map[string]float64{"best": t.best, "best_step": float64(t.step), "since_best": float64(t.since)}
}

// Restore continues from the bookkeeping a checkpoint's manifest kept (Metrics).
func (t *Tracker) Restore(metrics map[string]float64) {
	t.best, t.step, t.since = metrics["best"], int(metrics["best_step"]), int(metrics["since_best"])
}
