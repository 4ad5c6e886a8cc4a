package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// TestChunkedMatchesDense compares chunked attention with the dense path on random q, k, v
// (B = 2, T = 37, 4 query heads over 2 KV heads, head size 8), one row padded after 25 tokens, in
// blocks of 8 (T is not a multiple) and of 64 (one block): the outputs of the real tokens, and the
// gradients of Σ w ⊙ out with respect to q, k and v, w zero on padding as the trainer's loss mask
// makes it (the dense path's by GoMLX's autodiff through its closed-form softmax, the chunked
// path's by its block-wise custom gradient). Tolerance in float32: |got − want| ≤ 2e-5 · (1 +
// |want|), about 100 float32 ulps at the values' scale; the two differ in summation order only. A
// padding query sees no key in either path; the dense path averages the values of every key for
// it, the chunked one those up to its block's end, so padding outputs are only checked finite.
func TestChunkedMatchesDense(t *testing.T) {
	const b, tl, nh, nkv, hd = 2, 37, 4, 2, 8
	c := &Config{NumHeads: nh, NumKVHeads: nkv, HeadDim: hd}
	rng := rand.New(rand.NewPCG(5, 6))
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	q, k, v, w := randn(b*tl*nh*hd), randn(b*tl*nkv*hd), randn(b*tl*nkv*hd), randn(b*tl*nh*hd)
	pos := make([]int32, b*tl)
	for i := range tl {
		pos[i], pos[tl+i] = int32(i), int32(i)
		if i >= 25 {
			pos[tl+i] = -1
			for j := range nh * hd {
				w[(tl+i)*nh*hd+j] = 0
			}
		}
	}
	for _, block := range []int{8, 64} {
		e, err := NewExec(goBackend(t), func(qn, kn, vn, wn, pn *Node) []*Node {
			qn, kn, vn = Reshape(qn, b, tl, nh, hd), Reshape(kn, b, tl, nkv, hd), Reshape(vn, b, tl, nkv, hd)
			pn, wn = Reshape(pn, b, tl), Reshape(wn, b, tl, nh*hd)
			var outs []*Node
			for _, kind := range []AttentionKind{AttentionChunked, AttentionDense} {
				n := &Net{Config: c, Compute: dtypes.Float32, Differentiated: true, Attention: kind, AttentionBlock: block, g: qn.Graph()}
				o := n.SelfAttend(qn, kn, vn, pn)
				outs = append(append(outs, o), Gradient(ReduceAllSum(Mul(o, wn)), qn, kn, vn)...)
			}
			// A net that is not differentiated takes the forward alone.
			n := &Net{Config: c, Compute: dtypes.Float32, Attention: AttentionChunked, AttentionBlock: block, g: qn.Graph()}
			return append(outs, n.SelfAttend(qn, kn, vn, pn))
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Call(q, k, v, w, pos)
		e.Finalize()
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"output", "dq", "dk", "dv"}
		real := func(x []float32) []float32 { // the outputs of real tokens; padding set to 0
			x = append([]float32(nil), x...)
			for i, p := range pos {
				if p < 0 {
					for j := range nh * hd {
						if math.IsNaN(float64(x[i*nh*hd+j])) || math.IsInf(float64(x[i*nh*hd+j]), 0) {
							t.Errorf("block %d: padding output %d is %v", block, i, x[i*nh*hd+j])
						}
						x[i*nh*hd+j] = 0
					}
				}
			}
			return x
		}
		for i, name := range names {
			got, want := flat(out[i].Value()), flat(out[i+len(names)].Value())
			if i == 0 {
				got, want = real(got), real(want)
			}
			compareFlat(t, block, name, got, want)
		}
		compareFlat(t, block, "output (forward only)", real(flat(out[2*len(names)].Value())), real(flat(out[len(names)].Value())))
	}
}

func compareFlat(t *testing.T, block int, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("block %d: %s has %d values; want %d", block, name, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > 2e-5*(1+math.Abs(float64(want[i]))) || math.IsNaN(float64(got[i])) {
			if bad++; bad <= 3 {
				t.Errorf("block %d: %s[%d] = %v; dense gives %v", block, name, i, got[i], want[i])
			}
		}
	}
}

// flat flattens a nested float32 slice of any rank.
func flat(v any) []float32 {
	switch x := v.(type) {
	case []float32:
		return x
	case [][]float32:
		var out []float32
		for _, r := range x {
			out = append(out, r...)
		}
		return out
	case [][][]float32:
		var out []float32
		for _, r := range x {
			out = append(out, flat(r)...)
		}
		return out
	case [][][][]float32:
		var out []float32
		for _, r := range x {
			out = append(out, flat(r)...)
		}
		return out
	}
	panic("flat: not a float32 slice")
}

// TestChooseAttention: the resolution of a recipe's train.attention for a backend with or without
// the fused op.
func TestChooseAttention(t *testing.T) {
	for _, tc := range []struct {
		kind  AttentionKind
		fused bool
		seq   int
		want  AttentionKind
	}{
		{AttentionAuto, true, 512, AttentionFused},
		{AttentionAuto, false, 512, AttentionChunked},
		{AttentionAuto, false, 256, AttentionDense},
		{"", false, 8192, AttentionChunked},
		{AttentionFused, false, 8192, AttentionChunked},
		{AttentionFused, true, 16, AttentionFused},
		{AttentionDense, true, 8192, AttentionDense},
		{AttentionChunked, true, 16, AttentionChunked},
	} {
		if got := ChooseAttention(tc.kind, tc.fused, tc.seq, 256); got != tc.want {
			t.Errorf("ChooseAttention(%q, fused %v, %d) = %q; want %q", tc.kind, tc.fused, tc.seq, got, tc.want)
		}
	}
	if _, err := ParseAttention("flash"); err == nil {
		t.Error("ParseAttention(flash) gave no error")
	}
	if FusedAttentionAvailable(goBackend(t), dtypes.BFloat16, 128) {
		t.Error("the Go backend reports fused attention; this test assumed it has none")
	}
}

// TestFusedAttentionOnTheGoBackend: the Go backend says why it has no fused attention, and the
// program CompileFusedAttention builds (forward and backward of one sequence) still compiles and
// runs there, its fused call refused when the graph is built and computed chunked, as a run's is.
func TestFusedAttentionOnTheGoBackend(t *testing.T) {
	b := goBackend(t)
	if why := FusedAttentionUnavailable(b, dtypes.BFloat16, 128); !strings.Contains(why, "the go backend has no fused attention op") {
		t.Errorf("FusedAttentionUnavailable = %q; want it to name the go backend", why)
	}
	c := &Config{NumHeads: 4, NumKVHeads: 2, HeadDim: 8}
	if err := CompileFusedAttention(b, c, dtypes.Float32, 12); err != nil {
		t.Errorf("CompileFusedAttention on the go backend: %v", err)
	}
}
