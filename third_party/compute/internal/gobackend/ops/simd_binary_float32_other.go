//go:build !(amd64 && goexperiment.simd)

package ops

// haveSIMDFloat32 is false where the vector loops are not built: execBinaryFloat32 runs the
// generic functions.
const haveSIMDFloat32 = false

func binaryVectorVector(op binaryOp, a, b, o []float32) {
	for i := range o {
		o[i] = binaryScalar(op, a[i], b[i])
	}
}

func binaryVectorScalar(op binaryOp, a []float32, s float32, o []float32) {
	for i := range o {
		o[i] = binaryScalar(op, a[i], s)
	}
}

func binaryScalarVector(op binaryOp, s float32, b, o []float32) {
	for i := range o {
		o[i] = binaryScalar(op, s, b[i])
	}
}

// rowMaxVector is not built here: the caller runs its scalar loop.
func rowMaxVector(row []float32, lowest float32) (float32, bool) { return 0, false }
