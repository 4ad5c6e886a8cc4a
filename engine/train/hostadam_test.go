package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/core/tensors"
)

// TestHostAdamWMatchesGraph: the host optimizer leaves the same weights and moments as AdamW in
// the graph, bit for bit, after three updates of the same batches on the same random model, and
// reports the same gradient norms: unclipped and clipped, with one micro-batch and with two
// accumulated, with and without weight decay.
func TestHostAdamWMatchesGraph(t *testing.T) {
	for _, c := range []struct {
		name       string
		cfg        Config
		microBatch int
	}{
		{"no clip", Config{LR: 1e-2, WeightDecay: 0.1}, 0},
		{"clipped, accumulated", Config{LR: 1e-2, WeightDecay: 0.1, GradClip: 1e-3, GradAccumulation: 1}, 2},
		{"clipped", Config{LR: 1e-2, GradClip: 1e-3}, 0},
		{"no decay", Config{LR: 3e-3, GradClip: 1}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(graph bool) ([]*tensors.Tensor, []*tensors.Tensor, []*tensors.Tensor, []float64) {
				m := tinyModel(t, 7)
				cfg := c.cfg
				cfg.MicroBatch = c.microBatch
				tr, err := New(m, cfg)
				if err != nil {
					t.Fatal(err)
				}
				tr.graphOptimizer = graph
				if got := tr.hostOptimizer(); got == graph {
					t.Fatalf("graph %v: hostOptimizer() = %v", graph, got)
				}
				var norms []float64
				for step := range 3 {
					seqs := benchSequences(m.Config.VocabSize, BenchConfig{Sequences: 4, Length: 12, Prompt: 3, Seed: uint64(step + 1)})
					met, err := tr.Update(seqs, cfg.LR)
					if err != nil {
						t.Fatal(err)
					}
					norms = append(norms, met.GradNorm)
				}
				mom, vel := tr.moments()
				return tr.params(), mom, vel, norms
			}
			gp, gm, gv, gn := run(true)
			hp, hm, hv, hn := run(false)
			for i := range gn {
				if gn[i] != hn[i] {
					t.Errorf("update %d: gradient norm %.9g on the host, %.9g in the graph", i+1, hn[i], gn[i])
				}
			}
			for _, set := range []struct {
				what string
				g, h []*tensors.Tensor
			}{{"weight", gp, hp}, {"first moment", gm, hm}, {"second moment", gv, hv}} {
				for i := range set.g {
					g, h := tensors.MustCopyFlatData[float32](set.g[i]), tensors.MustCopyFlatData[float32](set.h[i])
					if d := maxRelDiff(g, h); d != 0 {
						t.Errorf("%s %d: host and graph differ by %.3g (relative)%s", set.what, i, d, first(g, h))
					}
				}
			}
		})
	}
}

func maxRelDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		den := math.Max(math.Abs(float64(a[i])), 1e-6)
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i]))/den)
	}
	return d
}

func first(a, b []float32) string {
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("; first at %d: %v against %v", i, b[i], a[i])
		}
	}
	return ""
}

// TestAdamWBlockMatchesScalar: the vector loop (eight values at a time where the CPU has AVX2)
// gives the scalar loop's bits for every length around its width, with and without weight
// decay, on values from tiny to large and with zero gradients and moments.
func TestAdamWBlockMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	k := adamConsts{scale: 0.37, b1: 0.9, b2: 0.999, ob1: float32(1 - 0.9), ob2: float32(1 - 0.999), bc1: 0.19, bc2: 0.002997,
		eps: 1e-8, wd: 0.01, lr: 3e-4}
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 63, 1000} {
		for _, decay := range []bool{false, true} {
			vals := func(sc float64) []float32 {
				out := make([]float32, n)
				for i := range out {
					out[i] = float32(rng.NormFloat64() * math.Pow(10, sc*(rng.Float64()-0.5)))
					if rng.IntN(10) == 0 {
						out[i] = 0
					}
				}
				return out
			}
			p, g, m, v := vals(8), vals(12), vals(8), vals(8)
			for i := range v {
				v[i] = float32(math.Abs(float64(v[i])))
			}
			p2, g2, m2, v2 := slices.Clone(p), slices.Clone(g), slices.Clone(m), slices.Clone(v)
			adamwScalar(p, g, m, v, &k, decay)
			adamwBlock(p2, g2, m2, v2, &k, decay)
			for _, pair := range [][2][]float32{{p, p2}, {m, m2}, {v, v2}} {
				for i := range pair[0] {
					if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
						t.Fatalf("n=%d decay=%v: value %d is %v in the vector loop, %v in the scalar one", n, decay, i, pair[1][i], pair[0][i])
					}
				}
			}
		}
	}
}
