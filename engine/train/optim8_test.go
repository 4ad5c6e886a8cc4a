package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"
)

// roundTrip quantises and dequantises x (a [rows, cols] float32) with q and d, returning the
// values read back and the packed storage's shape.
func roundTrip(t *testing.T, x [][]float32, q func(*Node) *Node, d func(*Node, shapes.Shape) *Node) ([]float32, shapes.Shape) {
	t.Helper()
	e, err := NewExec(goBackend(t), func(in []*Node) []*Node {
		p := q(in[0])
		return []*Node{d(p, in[0].Shape()), p}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	out, err := e.Call(x)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0]), out[1].Shape()
}

// Hand-computable blocks: |m| and √v that are absmax times a power of two are exact on the log
// codes; others are within half a code (2^(1/16) for m, 2^(1/32) for √v); m below absmax · 2^(−127.5/8)
// reads as 0, v's 0 as the smallest step, absmax · 2^(−255/16) for √v.
func TestQuantizeRoundTrip(t *testing.T) {
	// 300 values: two blocks, the second padded with 212 zeros.
	m := make([]float32, 300)
	m[0], m[1], m[2], m[3], m[4] = 127, -63.5, 31.75, 1, 1e-5 // block 0: absmax 127
	m[256], m[257] = -2.54, 0.01                              // block 1: absmax 2.54
	got, shape := roundTrip(t, [][]float32{m[:150], m[150:]}, QuantizeSigned, DequantizeSigned)
	if want := shapes.Make(dtypes.Int8, 2, MomentBlock+4); !shape.Equal(want) {
		t.Errorf("storage %s; want %s", shape, want)
	}
	// 1 = 127 · 2^(−6.99): code 127 − 56 = 71, read as 127 · 2^(−7) = 0.9921875; 0.01 = 2.54 · 2^(−7.99):
	// code 63, read as 2.54 · 2^(−8) = 0.00992188.
	for i, want := range map[int]float64{0: 127, 1: -63.5, 2: 31.75, 3: 0.9921875, 4: 0, 5: 0, 256: -2.54, 257: 2.54 / 256} {
		if math.Abs(float64(got[i])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("m[%d] = %v read back as %v; want %v", i, m[i], got[i], want)
		}
	}
	for i := range m {
		if r := math.Abs(float64(got[i] / m[i])); m[i] != 0 && got[i] != 0 && math.Abs(math.Log2(r)) > 1.0/16+1e-6 {
			t.Errorf("m[%d] = %v read back as %v: more than half a code off", i, m[i], got[i])
		}
	}

	v := []float32{4, 1, 0.25, 0, 3}
	got, _ = roundTrip(t, [][]float32{v}, QuantizeSqrtLog, DequantizeSqrtLog)
	smallest := 4 * math.Pow(2, -255.0/8) // (2 · 2^(−255/16))²
	for i, want := range []float64{4, 1, 0.25, smallest} {
		if math.Abs(float64(got[i])-want) > 1e-6*want {
			t.Errorf("v[%d] = %v read back as %v; want %v", i, v[i], got[i], want)
		}
	}
	// √3 is between codes: within half a code, 2^(1/32) − 1 ≈ 2.2 %, of √3.
	if r := math.Sqrt(float64(got[4])) / math.Sqrt(3); math.Abs(r-1) > math.Pow(2, 1.0/32)-1 {
		t.Errorf("√v of 3 read back %.4f× off", r)
	}
	// An all-zero block stays zero.
	got, _ = roundTrip(t, [][]float32{{0, 0}}, QuantizeSqrtLog, DequantizeSqrtLog)
	if got[0] != 0 || got[1] != 0 {
		t.Errorf("zero v read back as %v", got)
	}
}

// Over 60 AdamW steps on a noisy quadratic whose gradient scales span 10⁰ … 10⁻³ inside each
// block, 8-bit moments keep the parameters within 6 % of the total distance the float32 path moves
// them (measured 4.0 %: mostly v not decaying by less than a code, which only shortens steps) and
// every parameter within 10 % of lr × steps (measured 7.8 %).
func TestAdamW8MatchesFloat32(t *testing.T) {
	const rows, cols, steps, lr = 3, 200, 60, 0.01 // 600 values: 3 blocks, the last padded
	rng := rand.New(rand.NewPCG(1, 2))
	target := make([]float32, rows*cols)
	start := make([]float32, rows*cols)
	for i := range target {
		// Magnitudes over four orders within each block, the case a linear v code gets wrong.
		target[i] = float32(rng.NormFloat64() * math.Pow(10, -float64(i%4)))
		start[i] = float32(rng.NormFloat64() * 0.1)
	}
	run := func(bits int) []float32 {
		c := Config{LR: lr, WeightDecay: 0.01, OptimizerBits: bits}
		if err := c.fill(); err != nil {
			t.Fatal(err)
		}
		e, err := NewExec(goBackend(t), func(in []*Node) []*Node {
			p, m, v := in[0], in[1], in[2]
			// g = 2(p − target) · scale + noise, the noise fixed per step.
			g := Add(Mul(MulScalar(Sub(p, in[3]), 2), in[4]), in[5])
			newP, newM, newV, _ := AdamW(&c, []*Node{p}, []*Node{g}, []*Node{m}, []*Node{v}, in[6], in[7])
			return []*Node{newP[0], newM[0], newV[0]}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Finalize()
		ms := MomentShape(bits, shapes.Make(dtypes.Float32, rows, cols))
		var p, m, v any = tensors.FromFlatDataAndDimensions(append([]float32{}, start...), rows, cols), tensors.FromShape(ms), tensors.FromShape(ms)
		tgt := tensors.FromFlatDataAndDimensions(target, rows, cols)
		noise := rand.New(rand.NewPCG(3, 4))
		for s := 1; s <= steps; s++ {
			scale, nz := make([]float32, rows*cols), make([]float32, rows*cols)
			for i := range nz {
				scale[i] = float32(math.Pow(10, -float64(i%4))) // gradient scales spanning 10⁰ … 10⁻³
				nz[i] = float32(noise.NormFloat64()*0.05) * scale[i]
			}
			out, err := e.Call(p, m, v, tgt, tensors.FromFlatDataAndDimensions(scale, rows, cols),
				tensors.FromFlatDataAndDimensions(nz, rows, cols), float32(lr), float32(s))
			if err != nil {
				t.Fatal(err)
			}
			p, m, v = out[0], out[1], out[2]
		}
		return tensors.MustCopyFlatData[float32](p.(*tensors.Tensor))
	}
	p32, p8 := run(32), run(8)
	var moved, diff, worst float64
	for i := range p32 {
		moved += math.Abs(float64(p32[i] - start[i]))
		d := math.Abs(float64(p8[i] - p32[i]))
		diff += d
		worst = math.Max(worst, d)
	}
	t.Logf("mean |Δp| float32 %.3g; mean |8-bit − float32| %.3g (%.2f %%), worst %.3g", moved/float64(len(p32)),
		diff/float64(len(p32)), 100*diff/moved, worst)
	if diff > 0.06*moved {
		t.Errorf("8-bit parameters differ from float32's by %.3g in total, more than 6 %% of the %.3g they moved", diff, moved)
	}
	if worst > 0.1*lr*steps {
		t.Errorf("worst parameter differs by %.3g; want ≤ 10 %% of lr × steps = %.3g", worst, 0.1*lr*steps)
	}
}
