package model

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// TestSoftmaxClosedFormGradient: a differentiated net's softmax gives exactly the fused softmax's
// values, and a gradient equal to GoMLX's own (autodiff of the unfused softmax) — over rows with
// masked (−1e30) entries, one fully masked row, and large logits; with the fused op (the closed
// form is its alternate VJP graph, never computed forward) and without it (GOMLX_FUSION=false, as
// on a backend without a fused softmax: the alternate graph is the value).
func TestSoftmaxClosedFormGradient(t *testing.T) {
	for _, fusion := range []string{"true", "false"} {
		t.Run("fusion="+fusion, func(t *testing.T) {
			t.Setenv(FusionEnv, fusion)
			testSoftmaxClosedForm(t)
		})
	}
}

func testSoftmaxClosedForm(t *testing.T) {
	const rows, cols = 4, 7
	rng := rand.New(rand.NewPCG(3, 4))
	x, w := make([]float32, rows*cols), make([]float32, rows*cols)
	for i := range x {
		x[i], w[i] = float32(rng.NormFloat64()*3), float32(rng.NormFloat64())
	}
	x[2], x[5], x[cols+1] = -1e30, -1e30, 40 // masked entries, a dominant one
	for j := 0; j < cols; j++ {
		x[3*cols+j] = -1e30 // a row with nothing visible (a padding query)
	}
	b := goBackend(t)
	e, err := NewExec(b, func(xn, wn *Node) []*Node {
		var outs []*Node
		for _, diff := range []bool{true, false} {
			n := &Net{Differentiated: diff, g: xn.Graph()}
			p := n.softmax(xn)
			outs = append(outs, p, Gradient(ReduceAllSum(Mul(p, wn)), xn)[0])
		}
		return outs
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	out, err := e.Call([][]float32{x[:cols], x[cols : 2*cols], x[2*cols : 3*cols], x[3*cols:]},
		[][]float32{w[:cols], w[cols : 2*cols], w[2*cols : 3*cols], w[3*cols:]})
	if err != nil {
		t.Fatal(err)
	}
	got, want := out[0].Value().([][]float32), out[2].Value().([][]float32)
	gotG, wantG := out[1].Value().([][]float32), out[3].Value().([][]float32)
	for i := range got {
		for j := range got[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Errorf("softmax[%d][%d] = %v; the fused softmax gives %v", i, j, got[i][j], want[i][j])
			}
			if d := math.Abs(float64(gotG[i][j] - wantG[i][j])); d > 1e-6*(1+math.Abs(float64(wantG[i][j]))) {
				t.Errorf("gradient[%d][%d] = %v; GoMLX's autodiff gives %v", i, j, gotG[i][j], wantG[i][j])
			}
		}
	}
	if gotG[0][2] != 0 || gotG[0][5] != 0 {
		t.Errorf("masked entries got gradient %v, %v; want 0", gotG[0][2], gotG[0][5])
	}
}
