//go:build amd64 && goexperiment.simd

package matmul

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
)

// TestAVX2HalfSmall (agentrl patch 12): the AVX2 small kernels on bfloat16 and float16 operands,
// both layouts, against float64 products of the same rounded values, for contracting lengths
// below, at and well above the 16 values a vector load takes, within float32 accumulation error.
// Before the patch the transposed kernels used 8 of every 16 (errors of 5 to 15 on these shapes).
func TestAVX2HalfSmall(t *testing.T) {
	if !avx2AsmKernel {
		t.Skip("no AVX2+FMA on this CPU")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][3]int{{4, 16, 8}, {5, 17, 9}, {16, 32, 32}, {32, 96, 48}, {64, 256, 256}} {
		m, n, k := sh[0], sh[1], sh[2]
		lf, rf := make([]float32, m*k), make([]float32, k*n) // rf is [k, n]
		for i := range lf {
			lf[i] = rng.Float32()*2 - 1
		}
		for i := range rf {
			rf[i] = rng.Float32()*2 - 1
		}
		for _, half := range []string{"bfloat16", "float16"} {
			round := func(x float32) float32 { return bfloat16.FromFloat32(x).Float32() }
			if half == "float16" {
				round = func(x float32) float32 { return float16.FromFloat32(x).Float32() }
			}
			want, scale := make([]float64, m*n), make([]float64, m*n)
			for r := range m {
				for c := range n {
					for kk := range k {
						p := float64(round(lf[r*k+kk])) * float64(round(rf[kk*n+c]))
						want[r*n+c] += p
						scale[r*n+c] += math.Abs(p)
					}
				}
			}
			got := map[string][]float32{"non-transposed": make([]float32, m*n), "transposed": make([]float32, m*n)}
			switch half {
			case "bfloat16":
				l, rNT, rT := make([]bfloat16.BFloat16, m*k), make([]bfloat16.BFloat16, k*n), make([]bfloat16.BFloat16, n*k)
				for i, x := range lf {
					l[i] = bfloat16.FromFloat32(x)
				}
				for i, x := range rf {
					rNT[i] = bfloat16.FromFloat32(x)
					rT[(i%n)*k+i/n] = rNT[i]
				}
				avx2SmallBFloat16(l, rNT, 0, 1, m, n, k, got["non-transposed"])
				avx2SmallBFloat16Transposed(l, rT, 0, 1, m, n, k, got["transposed"])
			default:
				l, rNT, rT := make([]float16.Float16, m*k), make([]float16.Float16, k*n), make([]float16.Float16, n*k)
				for i, x := range lf {
					l[i] = float16.FromFloat32(x)
				}
				for i, x := range rf {
					rNT[i] = float16.FromFloat32(x)
					rT[(i%n)*k+i/n] = rNT[i]
				}
				avx2SmallFloat16(l, rNT, 0, 1, m, n, k, got["non-transposed"])
				avx2SmallFloat16Transposed(l, rT, 0, 1, m, n, k, got["transposed"])
			}
			for layout, out := range got {
				for i := range out {
					// float32 accumulation: within k float32 steps of the terms' magnitude
					if d := math.Abs(float64(out[i]) - want[i]); d > float64(k)*0x1p-24*scale[i]+1e-7 {
						t.Fatalf("%s %s %v: element %d = %g, want %g", half, layout, sh, i, out[i], want[i])
					}
				}
			}
		}
	}
}
