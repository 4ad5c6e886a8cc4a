package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"agentrl/envs"
	"agentrl/store"
)

// SeedComparison compares two recipes over several seeds: pairs of runs (A's seed i against B's
// seed i, evaluated on the same held-out tasks), each pair as Runs gives it, each run's change
// since its own step-0 evaluation, and per k the mean over seeds of each with the spread of the
// seeds over √n — the standard error of an n-seed mean.
type SeedComparison struct {
	Pairs   []*Comparison `json:"pairs"`
	Changes []RunChanges  `json:"changes"` // per pair: A's and B's change since step 0
	Summary []SeedRow     `json:"summary"` // per k, over the pairs
}

// RunChanges is one pair's change since step 0, by k; absent when a run has no step-0 evaluation.
type RunChanges struct {
	A map[int]Change `json:"a,omitempty"`
	B map[int]Change `json:"b,omitempty"`
}

// Change is pass@k after minus before, task by task, with its paired standard error.
type Change struct {
	Delta float64 `json:"delta"`
	SE    float64 `json:"se"`
}

// SeedRow is one k's n-seed means, each ± the seeds' standard deviation over √n (NaN for one seed).
type SeedRow struct {
	K      int     `json:"k"`
	Seeds  int     `json:"seeds"`
	A      Mean    `json:"a"`
	B      Mean    `json:"b"`
	Diff   Mean    `json:"a_minus_b"`
	Change [2]Mean `json:"change_since_step0"` // A's, B's; Seeds 0 when no run has step 0
}

// Mean is a mean over seeds and its standard error (spread / √n).
type Mean struct {
	Mean  float64 `json:"mean"`
	SE    float64 `json:"se"`
	Seeds int     `json:"seeds"`
}

// jsonNum is x, or nil (JSON null) when x is not a finite number.
func jsonNum(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

// MarshalJSON writes an undefined standard error (one task) as null.
func (c Change) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Delta any `json:"delta"`
		SE    any `json:"se"`
	}{jsonNum(c.Delta), jsonNum(c.SE)})
}

// MarshalJSON writes an undefined mean or standard error (no seeds, one seed) as null.
func (m Mean) MarshalJSON() ([]byte, error) {
	num := jsonNum
	return json.Marshal(struct {
		Mean  any `json:"mean"`
		SE    any `json:"se"`
		Seeds int `json:"seeds"`
	}{num(m.Mean), num(m.SE), m.Seeds})
}

// Seeds pairs as[i] with bs[i] (the same seed of two recipes) and compares each pair at step
// (negative: the last step the pair both evaluated), then averages over the pairs.
func Seeds(st Source, as, bs []string, step int) (*SeedComparison, error) {
	if len(as) != len(bs) || len(as) == 0 {
		return nil, fmt.Errorf("compare: %d A runs and %d B runs; give the same number on both sides, seed i of A paired with seed i of B", len(as), len(bs))
	}
	sc := &SeedComparison{}
	for i := range as {
		c, err := Runs(st, as[i], bs[i], step)
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", i+1, err)
		}
		var rc RunChanges
		if rc.A, err = changeSinceStart(st, as[i], c.Step); err != nil {
			return nil, err
		}
		if rc.B, err = changeSinceStart(st, bs[i], c.StepB); err != nil {
			return nil, err
		}
		sc.Pairs = append(sc.Pairs, c)
		sc.Changes = append(sc.Changes, rc)
	}
	for _, r0 := range sc.Pairs[0].Rows {
		k := r0.K
		var a, b, d, ca, cb []float64
		for i, c := range sc.Pairs {
			row, ok := c.row(k)
			if !ok {
				return nil, fmt.Errorf("compare: pair %d (%s, %s) has no pass@%d; compare runs evaluated with the same eval.ks", i+1, c.A, c.B, k)
			}
			a, b, d = append(a, row.A), append(b, row.B), append(d, row.Diff)
			if ch, ok := sc.Changes[i].A[k]; ok {
				ca = append(ca, ch.Delta)
			}
			if ch, ok := sc.Changes[i].B[k]; ok {
				cb = append(cb, ch.Delta)
			}
		}
		sc.Summary = append(sc.Summary, SeedRow{K: k, Seeds: len(d), A: meanSE(a), B: meanSE(b), Diff: meanSE(d),
			Change: [2]Mean{meanSE(ca), meanSE(cb)}})
	}
	return sc, nil
}

// row returns the comparison's row for k.
func (c *Comparison) row(k int) (Row, bool) {
	for _, r := range c.Rows {
		if r.K == k {
			return r, true
		}
	}
	return Row{}, false
}

// changeSinceStart is run's pass@k at step minus its step-0 pass@k, task by task; nil when the
// run has no step-0 evaluation with per-task counts (eval.at_start off).
func changeSinceStart(st Source, run string, step int) (map[int]Change, error) {
	es, err := st.Evals(run)
	if err != nil {
		return nil, err
	}
	var first, at *store.Eval
	for i := range es {
		switch e := &es[i]; {
		case e.Step == 0 && e.Counts != nil:
			first = e
		case e.Step == step && e.Counts != nil:
			at = e
		}
	}
	if first == nil || at == nil || step == 0 {
		return nil, nil
	}
	out := map[int]Change{}
	ks := make([]int, 0, len(at.PassAtK))
	for k := range at.PassAtK {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	for _, k := range ks {
		d, se, err := envs.PassAtKChange(first.Counts, at.Counts, k)
		if err != nil {
			return nil, fmt.Errorf("compare: run %s, pass@%d since step 0: %w", run, k, err)
		}
		out[k] = Change{d, se}
	}
	return out, nil
}

// meanSE is the mean of xs and the sample standard deviation over √n (NaN below two values).
func meanSE(xs []float64) Mean {
	m := Mean{Seeds: len(xs), Mean: math.NaN(), SE: math.NaN()}
	if len(xs) == 0 {
		return m
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	m.Mean = s / float64(len(xs))
	if len(xs) < 2 {
		return m
	}
	var ss float64
	for _, x := range xs {
		ss += (x - m.Mean) * (x - m.Mean)
	}
	m.SE = math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))
	return m
}

// MarshalJSON writes an undefined standard error (one held-out task) as null.
func (r Row) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		K    int     `json:"k"`
		A    float64 `json:"a"`
		B    float64 `json:"b"`
		Diff float64 `json:"a_minus_b"`
		SE   any     `json:"se"`
	}{r.K, r.A, r.B, r.Diff, jsonNum(r.SE)})
}
