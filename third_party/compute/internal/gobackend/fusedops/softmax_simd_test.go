package fusedops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/fastmath"
	"github.com/gomlx/compute/shapes"
)

// TestSoftmaxLastAxisFloat32 holds the vector softmax (agentrl patch 8) to the scalar loop within
// float32 rounding (2e-6 relative, plus 1e-9 absolute for the smallest probabilities) on rows
// shorter than, equal to and longer than a vector, with masked (−∞) and large entries; each row
// sums to 1.
func TestSoftmaxLastAxisFloat32(t *testing.T) {
	if !fastmath.HaveVector {
		t.Skip("no vector softmax on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, axis := range []int{1, 3, 8, 9, 16, 31, 256, 392} {
		rows := 5
		in := make([]float32, rows*axis)
		for i := range in {
			in[i] = float32(rng.NormFloat64() * 4)
			if rng.IntN(10) == 0 && i%axis != 0 {
				in[i] = float32(math.Inf(-1))
			}
			if rng.IntN(50) == 0 {
				in[i] = 80
			}
		}
		got, want := make([]float32, len(in)), make([]float32, len(in))
		if !softmaxLastAxisFloat32(in, got, axis) {
			t.Fatal("softmaxLastAxisFloat32 declined with the vector functions present")
		}
		fusedSoftmax(in, want, 1, shapes.Make(dtypes.Float32, rows, axis), fastmath.Exp32)
		for r := range rows {
			var sum float64
			for i := r * axis; i < (r+1)*axis; i++ {
				if d := math.Abs(float64(got[i] - want[i])); d > 2e-6*float64(want[i])+1e-9 {
					t.Fatalf("axis %d, row %d, element %d: %g, scalar loop %g", axis, r, i-r*axis, got[i], want[i])
				}
				sum += float64(got[i])
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("axis %d, row %d sums to %g", axis, r, sum)
			}
		}
	}
}

// BenchmarkSoftmaxFloat32 times attention-score rows ([1024, 256]) by the scalar loop and by the
// vector one.
func BenchmarkSoftmaxFloat32(b *testing.B) {
	const rows, axis = 1024, 256
	in, out := make([]float32, rows*axis), make([]float32, rows*axis)
	for i := range in {
		in[i] = float32(i%37) * 0.1
	}
	shape := shapes.Make(dtypes.Float32, rows, axis)
	b.Run("scalar", func(b *testing.B) {
		for b.Loop() {
			fusedSoftmax(in, out, 1, shape, fastmath.Exp32)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/elem")
	})
	b.Run("vector", func(b *testing.B) {
		for b.Loop() {
			softmaxLastAxisFloat32(in, out, axis)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/elem")
	})
}
