package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
)

// TestTokenStatsMatchesHost: chunked log-probs and entropies (chunk 3 over 16 positions, so the
// last chunk is short) equal a float64 log-softmax of the model's full logits computed on the host.
func TestTokenStatsMatchesHost(t *testing.T) {
	m := tinyModel(t, 4)
	seq := []int32{1, 5, 2, 9, 9, 0, 3, 7, 15, 4, 4, 8, 11, 2, 6, 13}
	logits, err := m.Logits(seq)
	if err != nil {
		t.Fatal(err)
	}
	np := len(m.Params.Values)
	e, err := NewExec(m.Backend, func(in []*Node) []*Node {
		net := model.NewNet(m.Config, dtypes.Float32, in[:np])
		lp, ent := TokenStats(net, net.Forward(in[np], in[np+1]), in[np+2], 3, true, false)
		return []*Node{lp, ent}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	n := len(seq)
	pos, tgt := make([]int32, n), make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
		tgt[i] = seq[(i+1)%n]
	}
	args := make([]any, 0, np+3)
	for _, v := range m.Params.Values {
		args = append(args, v)
	}
	args = append(args, [][]int32{seq}, [][]int32{pos}, [][]int32{tgt})
	out, err := e.Call(args...)
	if err != nil {
		t.Fatal(err)
	}
	lp, ent := out[0].Value().([][]float32)[0], out[1].Value().([][]float32)[0]
	for i, row := range logits {
		maxv := math.Inf(-1)
		for _, v := range row {
			maxv = math.Max(maxv, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - maxv)
		}
		lse := maxv + math.Log(z)
		var h float64
		for _, v := range row {
			l := float64(v) - lse
			h -= math.Exp(l) * l
		}
		wantLP := float64(row[tgt[i]]) - lse
		if math.Abs(float64(lp[i])-wantLP) > 1e-5 || math.Abs(float64(ent[i])-h) > 1e-5 {
			t.Errorf("position %d: log-prob %.6f entropy %.6f; host %.6f %.6f", i, lp[i], ent[i], wantLP, h)
		}
	}
}

// paramArgs returns the model's parameters as graph arguments.
func paramArgs(p *model.Params) []any {
	out := make([]any, len(p.Values))
	for i, v := range p.Values {
		out[i] = v
	}
	return out
}

// gradBatch packs sampled sequences whose old log-probs sit at chosen offsets from the current
// ones — inside the clip range, beyond either bound, never within 0.02 of a kink — with reference
// log-probs from another model.
func gradBatch(t *testing.T, tr *Trainer, ref *model.Model) *Batch {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, 22))
	var seqs []Sequence
	for i := 0; i < 3; i++ {
		seq, lps := sample(t, tr.m, rng, []int32{1, int32(i + 2)}, 6)
		seqs = append(seqs, toSequence(seq, 2, lps, float64(i)-0.8))
	}
	offsets := []float32{-0.4, -0.1, 0.05, 0.15, 0.5, 0}
	for i := range seqs {
		for p := 2; p < len(seqs[i].Tokens); p++ {
			seqs[i].OldLogProbs[p] -= offsets[(i+p)%len(offsets)]
			seqs[i].Advantages[p] += 0.3 * float32(p%3)
		}
	}
	refLP, err := tr.SequenceLogProbs(ref.Params, [][]int32{seqs[0].Tokens, seqs[1].Tokens, seqs[2].Tokens})
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		seqs[i].RefLogProbs = refLP[i]
	}
	b, err := Pack(seqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lossAndGrad evaluates tr's training loss (and its gradient with respect to every parameter) on
// b with parameter values p.
func lossAndGrad(t *testing.T, tr *Trainer, p []*tensors.Tensor, b *Batch) (float64, [][]float32) {
	t.Helper()
	np := len(p)
	e, err := NewExec(tr.m.Backend, func(in []*Node) []*Node {
		out := tr.lossGraph(in[:np], in[np:])
		return append([]*Node{out.Loss}, Gradient(out.Loss, in[:np]...)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	args := make([]any, 0, np+dataInputs)
	for _, v := range p {
		args = append(args, v)
	}
	for _, a := range dataArgs(b, tr.denominator([]*Batch{b}), false) {
		args = append(args, a.t)
	}
	out, err := e.Call(args...)
	if err != nil {
		t.Fatal(err)
	}
	grads := make([][]float32, np)
	for i := range grads {
		grads[i] = tensors.MustCopyFlatData[float32](out[1+i])
	}
	return float64(tensors.ToScalar[float32](out[0])), grads
}

// TestModelGradientFiniteDifferences: the gradient of the full training loss (clipped surrogate,
// k3 KL, entropy bonus) through the tiny model matches central finite differences along the
// gradient itself and along random directions, in float32.
func TestModelGradientFiniteDifferences(t *testing.T) {
	m := tinyModel(t, 11)
	tr, err := New(m, Config{KLCoef: 0.05, EntropyCoef: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	b := gradBatch(t, tr, tinyModel(t, 12))
	base := m.Params.Values
	_, grads := lossAndGrad(t, tr, base, b)
	var gnorm float64
	for _, g := range grads {
		for _, v := range g {
			gnorm += float64(v) * float64(v)
		}
	}
	gnorm = math.Sqrt(gnorm)
	if gnorm == 0 {
		t.Fatal("zero gradient")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for dir := 0; dir < 3; dir++ {
		// Unit direction: the normalised gradient for dir 0, random ones after.
		u := make([][]float64, len(grads))
		var norm float64
		for i, g := range grads {
			u[i] = make([]float64, len(g))
			for j := range g {
				if dir == 0 {
					u[i][j] = float64(g[j])
				} else {
					u[i][j] = rng.NormFloat64()
				}
				norm += u[i][j] * u[i][j]
			}
		}
		var analytic float64
		for i, g := range grads {
			for j := range g {
				u[i][j] /= math.Sqrt(norm)
				analytic += float64(g[j]) * u[i][j]
			}
		}
		const h = 1e-2
		shifted := func(s float64) []*tensors.Tensor {
			out := make([]*tensors.Tensor, len(base))
			for i, v := range base {
				flat := tensors.MustCopyFlatData[float32](v)
				for j := range flat {
					flat[j] += float32(s * u[i][j])
				}
				out[i] = tensors.FromFlatDataAndDimensions(flat, v.Shape().Dimensions...)
			}
			return out
		}
		up, _ := lossAndGrad(t, tr, shifted(h), b)
		down, _ := lossAndGrad(t, tr, shifted(-h), b)
		fd := (up - down) / (2 * h)
		if math.Abs(fd-analytic) > 2e-2*math.Abs(analytic)+2e-4 {
			t.Errorf("direction %d: directional derivative %.6g; finite difference %.6g (|g| = %.4g)", dir, analytic, fd, gnorm)
		}
	}
}

// TestGradientCheckpointing: the checkpointed forward equals the plain one, the training graph
// really carries checkpoint barriers, and the loss and every gradient agree with and without.
func TestGradientCheckpointing(t *testing.T) {
	m := tinyModel(t, 13)
	plain, err := New(m, Config{KLCoef: 0.05, EntropyCoef: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := New(m, Config{KLCoef: 0.05, EntropyCoef: 0.01, GradientCheckpointing: true, LogitsChunk: 4})
	if err != nil {
		t.Fatal(err)
	}
	b := gradBatch(t, plain, tinyModel(t, 14))
	l1, g1 := lossAndGrad(t, plain, m.Params.Values, b)
	l2, g2 := lossAndGrad(t, ckpt, m.Params.Values, b)
	sameLossAndGrad(t, "", "without checkpointing", "with", func(i int) string { return m.Params.Specs[i].Name }, l1, g1, l2, g2)

	// Forward equality and barriers in the gradient graph.
	np := len(m.Params.Values)
	var barriers int
	e, err := NewExec(m.Backend, func(in []*Node) []*Node {
		net := model.NewNet(m.Config, dtypes.Float32, in[:np])
		a := net.Forward(in[np], in[np+1])
		c := forward(net, in[ckpt.normIdx], in[np], in[np+1], true)
		loss := ReduceAllSum(Square(c))
		gr := Gradient(loss, in[0])
		for _, n := range a.Graph().Nodes() {
			if n.Type() == NodeTypeSchedulingBarrier {
				barriers++
			}
		}
		return []*Node{ReduceAllMax(Abs(Sub(a, c))), gr[0]}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	args := append(paramArgs(m.Params), [][]int32{{1, 2, 3, 4}}, [][]int32{{0, 1, 2, -1}})
	out, err := e.Call(args...)
	if err != nil {
		t.Fatal(err)
	}
	if d := tensors.ToScalar[float32](out[0]); d != 0 {
		t.Errorf("checkpointed forward differs from net.Forward by %g", d)
	}
	if barriers == 0 {
		t.Error("the checkpointed gradient graph has no scheduling barrier: nothing is recomputed")
	}
}

// TestChunkedHeadGradient: the log-prob head's gradient assembled chunk by chunk (several chunks,
// the last one short; chunkedHeadGradient) equals the one of a single chunk, with and without
// checkpointing, loss and every gradient.
func TestChunkedHeadGradient(t *testing.T) {
	m := tinyModel(t, 15)
	whole, err := New(m, Config{KLCoef: 0.05, EntropyCoef: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	b := gradBatch(t, whole, tinyModel(t, 16))
	l1, g1 := lossAndGrad(t, whole, m.Params.Values, b)
	for _, ckpt := range []bool{false, true} {
		chunked, err := New(m, Config{KLCoef: 0.05, EntropyCoef: 0.01, LogitsChunk: 3, GradientCheckpointing: ckpt})
		if err != nil {
			t.Fatal(err)
		}
		l2, g2 := lossAndGrad(t, chunked, m.Params.Values, b)
		sameLossAndGrad(t, fmt.Sprintf("checkpointing %v: ", ckpt), "in one chunk", "in chunks of 3",
			func(i int) string { return m.Params.Specs[i].Name }, l1, g1, l2, g2)
	}
}

// sameLossAndGrad fails t unless two evaluations of a loss and its gradient agree: the loss within
// 1e-6, each gradient element within 1e-5 relative (1e-5 absolute near 0). ctx prefixes the
// messages, as and bs say how each evaluation was made, and name names parameter i.
func sameLossAndGrad(t *testing.T, ctx, as, bs string, name func(i int) string, l1 float64, g1 [][]float32, l2 float64, g2 [][]float32) {
	t.Helper()
	if math.Abs(l1-l2) > 1e-6 {
		t.Errorf("%sloss %.8f %s, %.8f %s", ctx, l1, as, l2, bs)
	}
	for i := range g1 {
		for j := range g1[i] {
			if math.Abs(float64(g1[i][j]-g2[i][j])) > 1e-5*(1+math.Abs(float64(g1[i][j]))) {
				t.Fatalf("%sgradient of %s[%d]: %.7g %s, %.7g %s", ctx, name(i), j, g1[i][j], as, g2[i][j], bs)
			}
		}
	}
}
