//go:build amd64 && goexperiment.simd

package ops

import (
	"simd/archsimd"

	"github.com/gomlx/compute/support/envutil"
)

// haveSIMDFloat32: the vector loops of the float32 element-wise fast paths need AVX2, and run
// unless GOMLX_SIMD_AVX2 turns AVX2 code off (as it does the AVX2 matrix kernels).
var haveSIMDFloat32 = archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true)

func binary8(op binaryOp, x, y archsimd.Float32x8) archsimd.Float32x8 {
	switch op {
	case binaryAdd:
		return x.Add(y)
	case binarySub:
		return x.Sub(y)
	case binaryMul:
		return x.Mul(y)
	default:
		return x.Div(y)
	}
}

// binaryVectorVector: o[i] = a[i] op b[i]; a and b hold at least len(o) elements.
func binaryVectorVector(op binaryOp, a, b, o []float32) {
	n := len(o)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+16 <= n; i += 16 {
		x0 := archsimd.LoadFloat32x8((*[8]float32)(a[i:]))
		y0 := archsimd.LoadFloat32x8((*[8]float32)(b[i:]))
		x1 := archsimd.LoadFloat32x8((*[8]float32)(a[i+8:]))
		y1 := archsimd.LoadFloat32x8((*[8]float32)(b[i+8:]))
		binary8(op, x0, y0).Store((*[8]float32)(o[i:]))
		binary8(op, x1, y1).Store((*[8]float32)(o[i+8:]))
	}
	if i+8 <= n {
		binary8(op, archsimd.LoadFloat32x8((*[8]float32)(a[i:])), archsimd.LoadFloat32x8((*[8]float32)(b[i:]))).Store((*[8]float32)(o[i:]))
		i += 8
	}
	archsimd.ClearAVXUpperBits() // before the scalar tail and the caller's scalar code (see cleanExit)
	for ; i < n; i++ {
		o[i] = binaryScalar(op, a[i], b[i])
	}
}

// binaryVectorScalar: o[i] = a[i] op s.
func binaryVectorScalar(op binaryOp, a []float32, s float32, o []float32) {
	n := len(o)
	a = a[:n]
	y := archsimd.BroadcastFloat32x8(s)
	i := 0
	for ; i+16 <= n; i += 16 {
		x0 := archsimd.LoadFloat32x8((*[8]float32)(a[i:]))
		x1 := archsimd.LoadFloat32x8((*[8]float32)(a[i+8:]))
		binary8(op, x0, y).Store((*[8]float32)(o[i:]))
		binary8(op, x1, y).Store((*[8]float32)(o[i+8:]))
	}
	if i+8 <= n {
		binary8(op, archsimd.LoadFloat32x8((*[8]float32)(a[i:])), y).Store((*[8]float32)(o[i:]))
		i += 8
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		o[i] = binaryScalar(op, a[i], s)
	}
}

// binaryScalarVector: o[i] = s op b[i].
func binaryScalarVector(op binaryOp, s float32, b, o []float32) {
	n := len(o)
	b = b[:n]
	x := archsimd.BroadcastFloat32x8(s)
	i := 0
	for ; i+16 <= n; i += 16 {
		y0 := archsimd.LoadFloat32x8((*[8]float32)(b[i:]))
		y1 := archsimd.LoadFloat32x8((*[8]float32)(b[i+8:]))
		binary8(op, x, y0).Store((*[8]float32)(o[i:]))
		binary8(op, x, y1).Store((*[8]float32)(o[i+8:]))
	}
	if i+8 <= n {
		binary8(op, x, archsimd.LoadFloat32x8((*[8]float32)(b[i:]))).Store((*[8]float32)(o[i:]))
		i += 8
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		o[i] = binaryScalar(op, s, b[i])
	}
}

// rowMaxVector is the largest of lowest and row's values, 32 at a time with VMAXPS (agentrl patch
// 28), and ok. It is bit-identical to the scalar loop acc = max(acc, v) from lowest whenever ok:
// among values that are not NaN the maximum is one value, and one bit pattern unless it is zero
// (max(+0, −0) is +0 in Go, either in VMAXPS). So ok is false, and the caller runs the scalar loop,
// when a NaN was seen (Go's max returns NaN) or the maximum is zero.
func rowMaxVector(row []float32, lowest float32) (m float32, ok bool) {
	lo := archsimd.BroadcastFloat32x8(lowest)
	a0, a1, a2, a3 := lo, lo, lo, lo
	nan := archsimd.Mask32x8FromBits(0)
	n, i := len(row), 0
	for ; i+32 <= n; i += 32 {
		x0 := archsimd.LoadFloat32x8((*[8]float32)(row[i:]))
		x1 := archsimd.LoadFloat32x8((*[8]float32)(row[i+8:]))
		x2 := archsimd.LoadFloat32x8((*[8]float32)(row[i+16:]))
		x3 := archsimd.LoadFloat32x8((*[8]float32)(row[i+24:]))
		nan = nan.Or(x0.IsNaN()).Or(x1.IsNaN()).Or(x2.IsNaN()).Or(x3.IsNaN())
		a0, a1, a2, a3 = a0.Max(x0), a1.Max(x1), a2.Max(x2), a3.Max(x3)
	}
	var lanes [8]float32
	a0.Max(a1).Max(a2.Max(a3)).Store(&lanes)
	seenNaN := nan.ToBits() != 0
	archsimd.ClearAVXUpperBits() // before the scalar code
	if seenNaN {
		return 0, false
	}
	m = lowest
	for _, v := range lanes {
		m = max(m, v)
	}
	for _, v := range row[i:] {
		m = max(m, v)
	}
	return m, m == m && m != 0
}
