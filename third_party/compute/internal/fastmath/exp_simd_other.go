//go:build !(amd64 && goexperiment.simd)

package fastmath

import "math"

// HaveVector is false where the vector functions are not built.
const HaveVector = false

// ExpSlice32 sets out[i] = exp(in[i]) for i < len(out), through float64 math.Exp.
func ExpSlice32(in, out []float32) {
	for i := range out {
		out[i] = float32(math.Exp(float64(in[i])))
	}
}

// LogisticSlice32 sets out[i] = 1/(1+e^−in[i]) for i < len(out).
func LogisticSlice32(in, out []float32) {
	for i := range out {
		out[i] = logistic32(in[i])
	}
}
