//go:build !(amd64 && goexperiment.simd)

package fastmath

// HaveVector is false where the vector functions are not built.
const HaveVector = false

// ExpSlice32 sets out[i] = Exp32(in[i]) for i < len(out).
func ExpSlice32(in, out []float32) {
	for i := range out {
		out[i] = Exp32(in[i])
	}
}

// LogisticSlice32 sets out[i] = 1/(1+e^−in[i]) for i < len(out).
func LogisticSlice32(in, out []float32) {
	for i := range out {
		out[i] = logistic32(in[i])
	}
}
