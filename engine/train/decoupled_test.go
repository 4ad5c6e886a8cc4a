package train

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDecoupledHandComputed: one stale token worked out by hand. behav −1.2, prox −1, logp
// −0.9, A = 1, clip 0.2: r = e^0.1 ≈ 1.105 (inside [0.8, 1.2]), w = e^0.2, so the token's loss is
// −e^0.2·e^0.1 = −e^0.3; the clipped loss of the rewritten sequence, as PolicyLoss computes it,
// is that number, and a fresh token keeps its inputs.
func TestDecoupledHandComputed(t *testing.T) {
	s := Sequence{Tokens: []int32{1, 2, 3}, LossMask: []bool{false, true, true}, OldLogProbs: []float32{0, -1.2, -0.7}, Advantages: []float32{0, 1, 2}}
	d, err := Decoupled(s, []float32{0, -1, -0.5}, []bool{false, true, false})
	if err != nil {
		t.Fatal(err)
	}
	if d.OldLogProbs[2] != -0.7 || d.Advantages[2] != 2 || s.OldLogProbs[1] != -1.2 {
		t.Fatalf("fresh token rewritten or input changed: %+v (input %+v)", d, s)
	}
	c := Config{ClipLow: 0.2, ClipHigh: 0.2}
	_ = c.fill()
	in := lossCase{logp: [][]float64{{-0.9}}, old: [][]float64{{float64(d.OldLogProbs[1])}}, adv: [][]float64{{float64(d.Advantages[1])}},
		mask: [][]float64{{1}}, ref: [][]float64{{0}}, ent: [][]float64{{0}}}
	loss, _, _, _ := graphLoss(t, &c, in)
	if want := -math.Exp(0.3); math.Abs(loss-want) > 1e-6 {
		t.Fatalf("decoupled loss %.7f; want −e^0.3 = %.7f", loss, want)
	}
	// A ratio past the clip around the proximal policy: logp −0.5 gives r = e^0.5 > 1.2, so the
	// loss is −w·1.2 = −1.2·e^0.2, with no gradient.
	in.logp[0][0] = -0.5
	loss, g, _, _ := graphLoss(t, &c, in)
	if want := -1.2 * math.Exp(0.2); math.Abs(loss-want) > 1e-6 || g[0][0] != 0 {
		t.Fatalf("clipped decoupled loss %.7f (gradient %v); want %.7f and 0", loss, g[0][0], want)
	}
}

// TestDecoupledStalenessZero: with max_staleness 0 every trained token was sampled by the
// current weights: nothing is stale, or the proximal log-probs are the behaviour ones; either
// way the trainer's loss, gradient norm and probe are the current objective's to the bit.
func TestDecoupledStalenessZero(t *testing.T) {
	m := tinyModel(t, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	var seqs []Sequence
	for i := 0; i < 4; i++ {
		seq, lps := sample(t, m, rng, []int32{1, 2}, 5)
		seqs = append(seqs, toSequence(seq, 2, lps, float64(i)-1.5))
	}
	seqs[0].OldLogProbs[3] -= 0.5 // some ratios clip
	var none, same []Sequence
	for _, s := range seqs {
		d, err := Decoupled(s, nil, make([]bool, len(s.Tokens)))
		if err != nil {
			t.Fatal(err)
		}
		none = append(none, d)
		all := make([]bool, len(s.Tokens))
		for i := range all {
			all[i] = true
		}
		if d, err = Decoupled(s, s.OldLogProbs, all); err != nil {
			t.Fatal(err)
		}
		same = append(same, d)
	}
	run := func(seqs []Sequence) Metrics {
		tr, err := New(tinyModel(t, 1), Config{LR: 1e-2, ClipLow: 0.2, ClipHigh: 0.2})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		met, err := tr.Update(seqs, 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		return met
	}
	want := run(seqs)
	for name, got := range map[string]Metrics{"no stale token": run(none), "proximal = behaviour": run(same)} {
		if got.Loss != want.Loss || got.GradNorm != want.GradNorm || got.MaxLogProbDiff != want.MaxLogProbDiff || got.ClipFrac != want.ClipFrac {
			t.Errorf("%s: loss %v grad_norm %v probe %v clip %v; want %v %v %v %v", name, got.Loss, got.GradNorm, got.MaxLogProbDiff, got.ClipFrac,
				want.Loss, want.GradNorm, want.MaxLogProbDiff, want.ClipFrac)
		}
	}
}
