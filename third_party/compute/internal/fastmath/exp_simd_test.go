package fastmath

import (
	"math"
	"testing"
)

// TestExpSlice32 holds the vector exp (agentrl patch 8) to the bound of Exp32's own accuracy test
// against math.Exp, within one float32 step of Exp32, and to Exp32's clamps; NaN stays NaN.
func TestExpSlice32(t *testing.T) {
	var in []float32
	for x := float32(-87); x <= 88; x += 0.00731 {
		in = append(in, x)
	}
	in = append(in, 0, float32(math.Inf(1)), float32(math.Inf(-1)), 1e30, -1e30, 90, -90, float32(math.NaN()))
	for _, n := range []int{len(in), 1, 7, 9} { // tails shorter than a vector
		out := make([]float32, n)
		ExpSlice32(in, out)
		for i, x := range in[:n] {
			got, want := out[i], Exp32(x)
			switch {
			case x != x:
				if got == got {
					t.Fatalf("exp(NaN) = %g, want NaN", got)
				}
			case x > 88.1 || x < -88.1:
				if got != want {
					t.Fatalf("exp(%g) = %g, want the clamp %g", x, got, want)
				}
			default:
				if d := math.Abs(float64(got)-math.Exp(float64(x))) / math.Exp(float64(x)); d > 1e-7 {
					t.Fatalf("exp(%g) = %g, relative error %.2g against math.Exp", x, got, d)
				}
				if u := math.Float32bits(got) - math.Float32bits(want); u+1 > 2 {
					t.Fatalf("exp(%g) = %g, Exp32 %g: more than one float32 step apart", x, got, want)
				}
			}
		}
		if n > 0 && out[0] != Exp32(in[0]) && n == 1 {
			t.Fatalf("one-element tail: exp(%g) = %g, Exp32 %g", in[0], out[0], Exp32(in[0]))
		}
	}
	if got := make([]float32, 1); true {
		ExpSlice32([]float32{0}, got)
		if got[0] != 1 {
			t.Fatalf("exp(0) = %g, want exactly 1", got[0])
		}
	}
}

// TestLogisticSlice32 holds the vector logistic to the float64 one the Go backend's scalar op
// computes, within 3e-7 relative (or 1e-38 absolute, where float64 keeps a value float32 cannot).
func TestLogisticSlice32(t *testing.T) {
	var in []float32
	for x := float32(-100); x <= 100; x += 0.0137 {
		in = append(in, x)
	}
	in = append(in, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)))
	out := make([]float32, len(in))
	LogisticSlice32(in, out)
	for i, x := range in {
		want := 1 / (1 + math.Exp(-float64(x)))
		if d := math.Abs(float64(out[i]) - want); d > 3e-7*want && d > 1e-38 {
			t.Fatalf("logistic(%g) = %g, want %g (float64)", x, out[i], want)
		}
	}
	nan := make([]float32, 1)
	LogisticSlice32([]float32{float32(math.NaN())}, nan)
	if nan[0] == nan[0] {
		t.Fatalf("logistic(NaN) = %g, want NaN", nan[0])
	}
}

func BenchmarkExpSlice32(b *testing.B) {
	in, out := make([]float32, 4096), make([]float32, 4096)
	for i := range in {
		in[i] = float32(i%200)*0.1 - 10
	}
	b.Run("Exp32", func(b *testing.B) {
		for b.Loop() {
			for i, x := range in {
				out[i] = Exp32(x)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/elem")
	})
	b.Run("ExpSlice32", func(b *testing.B) {
		for b.Loop() {
			ExpSlice32(in, out)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in)), "ns/elem")
	})
}
