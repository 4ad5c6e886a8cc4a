//go:build amd64 && goexperiment.simd

package fastmath

import (
	"math"
	"simd/archsimd"

	"github.com/gomlx/compute/support/envutil"
)

// agentrl patch 8 (third_party/compute/PATCHES.md): Exp32, eight lanes at a time.

// HaveVector reports whether the vector functions of this file run: the CPU has AVX2 and
// GOMLX_SIMD_AVX2 does not turn AVX2 code off (as it does the AVX2 matrix kernels); where they do
// not, ExpSlice32 and LogisticSlice32 loop over Exp32.
var HaveVector = archsimd.X86.AVX2() && envutil.MustReadBool(envutil.SIMD_AVX2_Env, true)

// Exp32x8 is Exp32 on eight lanes: the same Cephes reduction and polynomial, unfused, with the
// same clamps (above ≈127·ln 2 the largest finite Cephes value, below −127·ln 2 zero) and NaN
// kept. The reduction's n = round(x·log₂e) is taken in float32 where Exp32 takes it in float64,
// so the two can differ in the last bit where x·log₂e lies within float32 rounding of a half.
func Exp32x8(x archsimd.Float32x8) archsimd.Float32x8 {
	const (
		maxNumF = 1.7014117331926442990585209174225846272e38
		maxLogF = 88.02969187150841
		minLogF = -88.02969187150841
	)
	hi := archsimd.BroadcastFloat32x8(maxLogF)
	lo := archsimd.BroadcastFloat32x8(minLogF)
	p, z := exp32Reduced(x.Min(hi).Max(lo))
	scale := z.ConvertToInt32().Add(archsimd.BroadcastInt32x8(127)).ShiftAllLeft(23).AsFloat32x8()
	r := scale.Mul(p)
	r = archsimd.BroadcastFloat32x8(maxNumF).Merge(r, x.Greater(hi))
	// Zero below the range by masking, not by merging with a broadcast 0: Go builds that
	// constant with a legacy-SSE XORPS, whose write to the low half of a register carries a
	// false dependency on its upper half, which chained successive calls into one dependency
	// chain (13 times slower on a 2-core AMD EPYC).
	r = r.Masked(x.GreaterEqual(lo))
	return x.Merge(r, x.IsNaN())
}

// ExpIEEE32x8 is exp on eight lanes with IEEE ends, as float32(math.Exp(x)) has them: +Inf
// above the largest float32 (where Exp32x8 clamps to 1.7e38) and subnormal results from −87 down
// to −104 (where Exp32x8 gives 0). The same reduction and polynomial as Exp32x8, with 2ⁿ applied
// as two powers of two (n from −150 to 129) so that neither overflows its exponent and a
// subnormal result is rounded once. The float32 Exp op takes it; the softmax keeps Exp32x8, as its
// scalar loop kept Exp32.
func ExpIEEE32x8(x archsimd.Float32x8) archsimd.Float32x8 {
	xc := x.Min(archsimd.BroadcastFloat32x8(89)).Max(archsimd.BroadcastFloat32x8(-104))
	p, z := exp32Reduced(xc)
	n := z.ConvertToInt32()
	n1 := n.ShiftAllRight(1)
	n2 := n.Sub(n1)
	bias := archsimd.BroadcastInt32x8(127)
	s1 := n1.Add(bias).ShiftAllLeft(23).AsFloat32x8()
	s2 := n2.Add(bias).ShiftAllLeft(23).AsFloat32x8()
	return x.Merge(p.Mul(s1).Mul(s2), x.IsNaN())
}

// exp32Reduced is Exp32's reduction and polynomial on eight lanes: e^x = p·2^z, z integral.
func exp32Reduced(x archsimd.Float32x8) (p, z archsimd.Float32x8) {
	const (
		log2E = 1.44269504088896341
		ln2Hi = 0.693359375
		ln2Lo = -2.12194440e-4
		p7    = 1.9875691500e-4
		p6    = 1.3981999507e-3
		p5    = 8.3334519073e-3
		p4    = 4.1665795894e-2
		p3    = 1.6666665459e-1
		p2    = 5.0000001201e-1
	)
	z = x.Mul(archsimd.BroadcastFloat32x8(log2E)).Add(archsimd.BroadcastFloat32x8(0.5)).Floor()
	g := x.Sub(z.Mul(archsimd.BroadcastFloat32x8(ln2Hi))).Sub(z.Mul(archsimd.BroadcastFloat32x8(ln2Lo)))
	p = archsimd.BroadcastFloat32x8(p7).Mul(g).Add(archsimd.BroadcastFloat32x8(p6))
	p = p.Mul(g).Add(archsimd.BroadcastFloat32x8(p5))
	p = p.Mul(g).Add(archsimd.BroadcastFloat32x8(p4))
	p = p.Mul(g).Add(archsimd.BroadcastFloat32x8(p3))
	p = p.Mul(g).Add(archsimd.BroadcastFloat32x8(p2))
	p = p.Mul(g.Mul(g)).Add(g).Add(archsimd.BroadcastFloat32x8(1))
	return p, z
}

// ExpSlice32 sets out[i] = exp(in[i]) for i < len(out), by ExpIEEE32x8.
func ExpSlice32(in, out []float32) {
	if !HaveVector {
		for i := range out {
			out[i] = float32(math.Exp(float64(in[i])))
		}
		return
	}
	n := len(out)
	in = in[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		ExpIEEE32x8(archsimd.LoadFloat32x8((*[8]float32)(in[i:]))).Store((*[8]float32)(out[i:]))
	}
	if i < n {
		ExpIEEE32x8(archsimd.LoadFloat32x8SlicePart(in[i:])).StoreSlicePart(out[i:])
	}
}

// zero32 is 0 as a variable: see Logistic32x8.
var zero32 float32

// Logistic32x8 is 1/(1+e^−x) on eight lanes, through e = Exp32x8(−|x|) so that it never
// overflows: 1/(1+e) where x ≥ 0, e/(1+e) below (the two forms of the Go backend's scalar
// Logistic, there in float64).
func Logistic32x8(x archsimd.Float32x8) archsimd.Float32x8 {
	negAbs := archsimd.BroadcastFloat32x8(float32(math.Copysign(0, -1))).AsInt32x8().Or(x.AsInt32x8()).AsFloat32x8()
	e := Exp32x8(negAbs)
	r := archsimd.BroadcastFloat32x8(1).Div(archsimd.BroadcastFloat32x8(1).Add(e))
	// Compared with a zero that is not a constant, which Go would build with a legacy-SSE XORPS
	// (see Exp32x8).
	return r.Merge(e.Mul(r), x.GreaterEqual(archsimd.BroadcastFloat32x8(zero32)))
}

// LogisticSlice32 sets out[i] = 1/(1+e^−in[i]) for i < len(out).
func LogisticSlice32(in, out []float32) {
	if !HaveVector {
		for i := range out {
			out[i] = logistic32(in[i])
		}
		return
	}
	n := len(out)
	in = in[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		Logistic32x8(archsimd.LoadFloat32x8((*[8]float32)(in[i:]))).Store((*[8]float32)(out[i:]))
	}
	if i < n {
		Logistic32x8(archsimd.LoadFloat32x8SlicePart(in[i:])).StoreSlicePart(out[i:])
	}
}
