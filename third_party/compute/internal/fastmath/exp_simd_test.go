package fastmath

import (
	"math"
	"testing"
)

// TestExpSlice32 holds the float32 Exp op's vector exp (agentrl patch 8) to float32(math.Exp(x)):
// within 1e-7 relative over the normal range (the bound of Exp32's own accuracy test) and within
// one float32 step of Exp32 there; finite up to ln(largest float32) and +Inf above; subnormal
// down to −104 (within one subnormal step) and 0 below; NaN stays NaN; tails shorter than a vector.
func TestExpSlice32(t *testing.T) {
	var in []float32
	for x := float32(-87); x <= 88; x += 0.00731 {
		in = append(in, x)
	}
	in = append(in, 0, 88.5, 88.72, 88.73, 90, 1e30, float32(math.Inf(1)), -87.9, -88.5, -95, -100.25, -103.9, -104.5, -1e30,
		float32(math.Inf(-1)), float32(math.NaN()))
	for _, n := range []int{len(in), 1, 7, 9} {
		out := make([]float32, n)
		ExpSlice32(in, out)
		for i, x := range in[:n] {
			got, want := out[i], float32(math.Exp(float64(x)))
			switch {
			case x != x:
				if got == got {
					t.Fatalf("exp(NaN) = %g, want NaN", got)
				}
			case math.IsInf(float64(want), 1) || want == 0:
				if got != want {
					t.Fatalf("exp(%g) = %g, want %g", x, got, want)
				}
			case x < -87.3: // subnormal results
				if d := math.Abs(float64(got) - math.Exp(float64(x))); d > math.Max(1e-7*float64(want), 0x1p-149) {
					t.Fatalf("exp(%g) = %g, want %g (subnormal: within one step)", x, got, want)
				}
			default:
				if d := math.Abs(float64(got)-math.Exp(float64(x))) / math.Exp(float64(x)); d > 1e-7 {
					t.Fatalf("exp(%g) = %g, relative error %.2g against math.Exp", x, got, d)
				}
				if x <= 88 {
					if u := math.Float32bits(got) - math.Float32bits(Exp32(x)); u+1 > 2 {
						t.Fatalf("exp(%g) = %g, Exp32 %g: more than one float32 step apart", x, got, Exp32(x))
					}
				}
			}
		}
	}
	one := make([]float32, 1)
	ExpSlice32([]float32{0}, one)
	if one[0] != 1 {
		t.Fatalf("exp(0) = %g, want exactly 1", one[0])
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
