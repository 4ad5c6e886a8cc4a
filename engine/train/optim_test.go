package train

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"
)

// TestAdamWHandComputed runs two AdamW steps on a 2×1 matrix (decayed) and a 2-vector (a norm
// weight: not decayed). With zero initial moments and the same gradient twice, both bias-corrected
// steps move each weight by lr·sign(g), plus lr·wd·p for the matrix.
func TestAdamWHandComputed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		clip     float64
		wantP0   [2][]float32 // matrix after steps 1 and 2
		wantP1   [2][]float32 // vector after steps 1 and 2
		wantM0   []float32    // matrix first moment after step 1
		wantNorm float64
	}{
		// ‖g‖ = √(0.25 + 0.0625 + 1 + 4) = √5.3125.
		{"no clip", 0, [2][]float32{{0.85, -1.8}, {0.7075, -1.61}}, [2][]float32{{3.1, 3.9}, {3.2, 3.8}}, []float32{0.05, -0.025}, math.Sqrt(5.3125)},
		// Clipped to norm 1: the moments shrink by 1/‖g‖, the sign steps do not change.
		{"clip 1", 1, [2][]float32{{0.85, -1.8}, {0.7075, -1.61}}, [2][]float32{{3.1, 3.9}, {3.2, 3.8}},
			[]float32{float32(0.05 / math.Sqrt(5.3125)), float32(-0.025 / math.Sqrt(5.3125))}, math.Sqrt(5.3125)},
	} {
		c := Config{LR: 0.1, WeightDecay: 0.5, GradClip: tc.clip}
		if err := c.fill(); err != nil {
			t.Fatal(err)
		}
		e, err := NewExec(goBackend(t), func(in []*Node) []*Node {
			p, g, m, v := in[0:2], in[2:4], in[4:6], in[6:8]
			newP, newM, newV, gn := AdamW(&c, p, g, m, v, in[8], in[9])
			return append(append(append(newP, newM...), newV...), gn)
		})
		if err != nil {
			t.Fatal(err)
		}
		p0, p1 := [][]float32{{1}, {-2}}, []float32{3, 4}
		g0, g1 := [][]float32{{0.5}, {-0.25}}, []float32{-1, 2}
		var m0, m1, v0, v1 any = [][]float32{{0}, {0}}, []float32{0, 0}, [][]float32{{0}, {0}}, []float32{0, 0}
		var pp0, pp1 any = p0, p1
		for step := 1; step <= 2; step++ {
			out, err := e.Call(pp0, pp1, g0, g1, m0, m1, v0, v1, float32(0.1), float32(step))
			if err != nil {
				t.Fatal(err)
			}
			got0 := tensors.MustCopyFlatData[float32](out[0])
			got1 := tensors.MustCopyFlatData[float32](out[1])
			for i := range got0 {
				if math.Abs(float64(got0[i]-tc.wantP0[step-1][i])) > 1e-5 || math.Abs(float64(got1[i]-tc.wantP1[step-1][i])) > 1e-5 {
					t.Errorf("%s step %d: params %v %v; want %v %v", tc.name, step, got0, got1, tc.wantP0[step-1], tc.wantP1[step-1])
				}
			}
			if step == 1 {
				gm := tensors.MustCopyFlatData[float32](out[2])
				if math.Abs(float64(gm[0]-tc.wantM0[0])) > 1e-7 || math.Abs(float64(gm[1]-tc.wantM0[1])) > 1e-7 {
					t.Errorf("%s: first moment %v; want %v", tc.name, gm, tc.wantM0)
				}
				if gn := float64(tensors.ToScalar[float32](out[6])); math.Abs(gn-tc.wantNorm) > 1e-5 {
					t.Errorf("%s: global norm %v; want %v", tc.name, gn, tc.wantNorm)
				}
			}
			pp0, pp1, m0, m1, v0, v1 = out[0], out[1], out[2], out[3], out[4], out[5]
		}
		e.Finalize()
	}
}

func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		s    Schedule
		step int
		want float64
	}{
		{Schedule{Base: 1, Warmup: 4, Total: 10, Kind: "constant"}, 1, 0.25},
		{Schedule{Base: 1, Warmup: 4, Total: 10, Kind: "constant"}, 4, 1},
		{Schedule{Base: 1, Warmup: 4, Total: 10, Kind: "constant"}, 9, 1},
		{Schedule{Base: 1, Warmup: 4, Total: 10, Kind: "cosine"}, 4, 1},
		{Schedule{Base: 1, Warmup: 4, Total: 10, Kind: "cosine"}, 7, 0.5},
		{Schedule{Base: 1, Warmup: 4, Total: 10, Kind: "cosine"}, 10, 0},
		{Schedule{Base: 1, Warmup: 4, Total: 10, Kind: "cosine"}, 30, 0}, // past the end: stays at the floor
		{Schedule{Base: 2, Warmup: 0, Total: 10, Kind: "cosine", MinRatio: 0.1}, 0, 2},
		{Schedule{Base: 2, Warmup: 0, Total: 10, Kind: "cosine", MinRatio: 0.1}, 5, 0.2 + 1.8*0.5},
		{Schedule{Base: 2, Warmup: 0, Total: 10, Kind: "cosine", MinRatio: 0.1}, 10, 0.2},
	} {
		if got := tc.s.At(tc.step); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%+v at step %d = %v; want %v", tc.s, tc.step, got, tc.want)
		}
	}
	if got := LR(1, 7, 4, 10, "cosine"); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("LR(step 7, cosine) = %v; want 0.5", got)
	}
}
