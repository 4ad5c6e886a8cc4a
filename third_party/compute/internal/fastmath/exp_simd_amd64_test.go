//go:build amd64 && goexperiment.simd

package fastmath

import (
	"math"
	"simd/archsimd"
	"testing"
)

// TestExp32x8Clamps: the softmax's vector exp keeps Exp32's clamps (the largest finite Cephes value
// above ≈127·ln 2, 0 below −127·ln 2) and NaN, and is within one float32 step of Exp32 between.
func TestExp32x8Clamps(t *testing.T) {
	if !HaveVector {
		t.Skip("no AVX2, or GOMLX_SIMD_AVX2 off")
	}
	in := [8]float32{90, 1e30, float32(math.Inf(1)), -90, float32(math.Inf(-1)), float32(math.NaN()), 12.5, -40.25}
	var out [8]float32
	Exp32x8(archsimd.LoadFloat32x8(&in)).Store(&out)
	for i, x := range in {
		want := Exp32(x)
		switch {
		case x != x:
			if out[i] == out[i] {
				t.Errorf("Exp32x8(NaN) = %g", out[i])
			}
		case math.Abs(float64(x)) > 88.1:
			if out[i] != want {
				t.Errorf("Exp32x8(%g) = %g; want Exp32's clamp %g", x, out[i], want)
			}
		default:
			if u := math.Float32bits(out[i]) - math.Float32bits(want); u+1 > 2 {
				t.Errorf("Exp32x8(%g) = %g; Exp32 %g", x, out[i], want)
			}
		}
	}
}
