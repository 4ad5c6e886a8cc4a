package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	_ "github.com/gomlx/compute/gobackend"

	"agentrl/engine/device"
	"agentrl/engine/model"
)

func tinyModel(t testing.TB, seed uint64) *model.Model {
	t.Helper()
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &model.Config{Family: model.Qwen3, VocabSize: 16, HiddenSize: 16, IntermediateSize: 32, NumLayers: 1,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true}
	m, err := model.New(b, model.RandomParams(cfg, seed, 0.1), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sample draws n tokens after prompt from the model's own softmax, recording log-probs.
func sample(t *testing.T, m *model.Model, rng *rand.Rand, prompt []int32, n int) ([]int32, []float32) {
	seq := append([]int32{}, prompt...)
	var lps []float32
	for i := 0; i < n; i++ {
		logits, err := m.Logits(seq)
		if err != nil {
			t.Fatal(err)
		}
		row := logits[len(seq)-1]
		maxv := math.Inf(-1)
		for _, v := range row {
			maxv = math.Max(maxv, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - maxv)
		}
		u, acc := rng.Float64()*z, 0.0
		pick := len(row) - 1
		for j, v := range row {
			acc += math.Exp(float64(v) - maxv)
			if acc > u {
				pick = j
				break
			}
		}
		seq = append(seq, int32(pick))
		lps = append(lps, float32(float64(row[pick])-maxv-math.Log(z)))
	}
	return seq, lps
}

func toSequence(seq []int32, promptLen int, lps []float32, adv float64) Sequence {
	s := Sequence{Tokens: seq, LossMask: make([]bool, len(seq)), OldLogProbs: make([]float32, len(seq)), Advantages: make([]float32, len(seq))}
	for i := promptLen; i < len(seq); i++ {
		s.LossMask[i] = true
		s.OldLogProbs[i] = lps[i-promptLen]
		s.Advantages[i] = float32(adv)
	}
	return s
}

// TestLossMatchesHandComputation: the reported loss equals the clipped surrogate computed on the
// host from the trainer's own log-probs; and the log-prob probe is ~0 when rollout and trainer
// weights agree, and > 0 after an update the rollout did not see.
func TestLossAndProbe(t *testing.T) {
	m := tinyModel(t, 1)
	tr, err := New(m, Config{LR: 1e-2, ClipLow: 0.2, ClipHigh: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var seqs []Sequence
	for i := 0; i < 4; i++ {
		seq, lps := sample(t, m, rng, []int32{1, 2}, 5)
		seqs = append(seqs, toSequence(seq, 2, lps, float64(i)-1.5))
	}
	// Perturb the old log-probs so that some ratios clip.
	seqs[0].OldLogProbs[3] -= 0.5
	seqs[1].OldLogProbs[4] += 0.5
	b, err := Pack(seqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := tr.LogProbs(b)
	if err != nil {
		t.Fatal(err)
	}
	var want, count float64
	for i := 0; i < b.B; i++ {
		for p := 0; p < b.T; p++ {
			k := i*b.T + p
			if b.Mask[k] == 0 {
				continue
			}
			r := math.Exp(float64(cur[i][p]) - float64(b.OldLogProbs[k]))
			a := float64(b.Advantages[k])
			want += -math.Min(r*a, math.Max(0.8, math.Min(r, 1.2))*a)
			count++
		}
	}
	want /= count
	met, err := tr.Step(b, 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(met.Loss-want) > 1e-5 {
		t.Errorf("loss %.6f; hand-computed %.6f", met.Loss, want)
	}
	if met.ClipFrac <= 0 || met.Tokens != 4*5 {
		t.Errorf("clip fraction %v, tokens %d", met.ClipFrac, met.Tokens)
	}

	// Probe: rollout log-probs from the same weights agree to float rounding…
	var fresh []Sequence
	for i := 0; i < 2; i++ {
		seq, lps := sample(t, m, rng, []int32{3}, 6)
		fresh = append(fresh, toSequence(seq, 1, lps, 1))
	}
	b2, _ := Pack(fresh, 0)
	met, err = tr.Step(b2, 1e-2)
	if err != nil {
		t.Fatal(err)
	}
	if met.MaxLogProbDiff > 1e-5 {
		t.Errorf("probe %.2g with synced weights; want < 1e-5", met.MaxLogProbDiff)
	}
	// …and after an update the rollout copy did not get (a skipped sync), they do not.
	met, _ = tr.Step(b2, 1e-2)
	if met.MaxLogProbDiff < 1e-4 {
		t.Errorf("probe %.2g after a skipped sync; want it to rise", met.MaxLogProbDiff)
	}
}

// TestGRPOLearnsToyTask: the model learns to emit a fixed 4-token sequence; the mean reward
// (fraction of positions right) rises well above its starting point.
func TestGRPOLearnsToyTask(t *testing.T) {
	m := tinyModel(t, 3)
	tr, err := New(m, Config{LR: 3e-2, GradClip: 1})
	if err != nil {
		t.Fatal(err)
	}
	target := []int32{3, 5, 7, 9}
	prompt := []int32{1}
	rng := rand.New(rand.NewPCG(5, 6))
	meanReward := func(rewards []float64) float64 {
		var s float64
		for _, r := range rewards {
			s += r
		}
		return s / float64(len(rewards))
	}
	var first, last float64
	const steps, group = 40, 16
	for step := 1; step <= steps; step++ {
		var seqs [][]int32
		var lps [][]float32
		var rewards []float64
		groups := make([]int, group)
		for i := 0; i < group; i++ {
			seq, lp := sample(t, m, rng, prompt, len(target))
			r := 0.0
			for j, want := range target {
				if seq[1+j] == want {
					r += 0.25
				}
			}
			seqs, lps, rewards = append(seqs, seq), append(lps, lp), append(rewards, r)
		}
		adv, err := GRPO(rewards, groups, true, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		var batch []Sequence
		for i := range seqs {
			batch = append(batch, toSequence(seqs[i], 1, lps[i], adv[i]))
		}
		b, _ := Pack(batch, 0)
		if _, err := tr.Step(b, 3e-2); err != nil {
			t.Fatal(err)
		}
		mr := meanReward(rewards)
		if step <= 3 {
			first += mr / 3
		}
		if step > steps-3 {
			last += mr / 3
		}
	}
	t.Logf("mean reward: first 3 steps %.3f, last 3 steps %.3f", first, last)
	if last < first+0.3 || last < 0.5 {
		t.Errorf("mean reward went from %.3f to %.3f; want a clear rise (≥ +0.3, ≥ 0.5)", first, last)
	}
}

func TestPackAndLR(t *testing.T) {
	b, err := Pack([]Sequence{{Tokens: []int32{1, 2, 3}, LossMask: []bool{false, true, true}, OldLogProbs: []float32{0, -1, -2}, Advantages: []float32{0, 0.5, 0.5}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Position 0 feeds token 1 and predicts token 2 (a policy token); position 1 predicts 3.
	if b.T != 16 || b.Targets[0] != 2 || b.Targets[1] != 3 || b.Mask[0] != 1 || b.OldLogProbs[1] != -2 || b.Positions[2] != -1 {
		t.Errorf("packed %+v", b)
	}
	if _, err := Pack([]Sequence{{Tokens: []int32{1, 2}, LossMask: []bool{true}}}, 0); err == nil {
		t.Error("ragged sequence accepted")
	}
	for _, tc := range []struct {
		step, warm, total int
		sched             string
		want              float64
	}{{1, 4, 10, "constant", 0.25}, {4, 4, 10, "constant", 1}, {9, 4, 10, "constant", 1}, {4, 4, 10, "cosine", 1}, {7, 4, 10, "cosine", 0.5}, {10, 4, 10, "cosine", 0}} {
		if got := LR(1, tc.step, tc.warm, tc.total, tc.sched); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("LR(step %d, %s) = %v; want %v", tc.step, tc.sched, got, tc.want)
		}
	}
}

// TestSequenceLogProbsOrder: scored two at a time, longest first (so short sequences are not
// padded to the longest of the call), sequences of mixed lengths get the log-probs each gets
// scored alone, back in the order given.
func TestSequenceLogProbsOrder(t *testing.T) {
	m := tinyModel(t, 31)
	rng := rand.New(rand.NewPCG(5, 6))
	var seqs [][]int32
	for _, n := range []int{3, 40, 7, 70, 12} { // buckets differ: 3 micro-batches of 2, 2, 1
		seq, _ := sample(t, m, rng, []int32{1, 2}, n)
		seqs = append(seqs, seq)
	}
	pairs, err := New(m, Config{MicroBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := pairs.SequenceLogProbs(nil, seqs)
	if err != nil {
		t.Fatal(err)
	}
	one, err := New(m, Config{MicroBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		want, err := one.SequenceLogProbs(nil, [][]int32{s})
		if err != nil {
			t.Fatal(err)
		}
		if len(got[i]) != len(s) {
			t.Fatalf("sequence %d: %d log-probs for %d tokens", i, len(got[i]), len(s))
		}
		for p := range s {
			if d := math.Abs(float64(got[i][p] - want[0][p])); d > 1e-5 {
				t.Fatalf("sequence %d (length %d), token %d: %v scored in pairs, %v alone", i, len(s), p, got[i][p], want[0][p])
			}
		}
	}
}

// TestOnPolicySFT: with Config.OnPolicy a supervised step needs no log-probs pass: the ratio is
// exactly 1 (no clipping, no drift), Metrics.NLL is the mean NLL the log-probs pass gives before
// the update, and the step moves the model as the same step with the log-probs pass does, to
// float32 rounding, on the same seed's model.
func TestOnPolicySFT(t *testing.T) {
	seqs := func() []Sequence {
		var out []Sequence
		for i := range 4 {
			tok := []int32{1, int32(2 + i), 3, 4, int32(5 + i), 6, 7, 8}
			out = append(out, Sequence{Tokens: tok, LossMask: []bool{false, false, true, true, true, true, true, true}})
		}
		return out
	}
	run := func(onPolicy bool) (nll float64, met Metrics, after []float32) {
		m := tinyModel(t, 43)
		tr, err := New(m, Config{LR: 1e-2, OnPolicy: onPolicy})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if nll, err = tr.SFTStep(seqs(), 1e-2); err != nil {
			t.Fatal(err)
		}
		probe := seqs()
		for i := range probe {
			probe[i].OldLogProbs = make([]float32, len(probe[i].Tokens))
			probe[i].Advantages = slices.Repeat([]float32{1}, len(probe[i].Tokens))
		}
		b, err := Pack(probe, 0)
		if err != nil {
			t.Fatal(err)
		}
		if met, err = tr.Step(b, 1e-12); err != nil { // a negligible step, for its metrics
			t.Fatal(err)
		}
		lp, err := tr.LogProbs(b)
		if err != nil {
			t.Fatal(err)
		}
		return nll, met, lp[0]
	}
	nllPass, _, lpPass := run(false)
	nllGraph, met, lpGraph := run(true)
	if math.Abs(nllPass-nllGraph) > 1e-5*nllPass {
		t.Errorf("NLL before the update: %.8f in the graph, %.8f by the log-probs pass", nllGraph, nllPass)
	}
	if met.MeanRatio != 1 || met.ClipFrac != 0 || met.MaxLogProbDiff != 0 {
		t.Errorf("on-policy metrics: mean ratio %v, clip fraction %v, max log-prob difference %v; want 1, 0, 0", met.MeanRatio, met.ClipFrac, met.MaxLogProbDiff)
	}
	for i := range lpPass {
		if d := math.Abs(float64(lpPass[i] - lpGraph[i])); d > 1e-5 {
			t.Fatalf("log-prob %d after the step: %g on-policy, %g with the log-probs pass", i, lpGraph[i], lpPass[i])
		}
	}
}
