//go:build amd64 && goexperiment.simd

package fusedops

import (
	"math"
	"simd/archsimd"

	"github.com/gomlx/compute/internal/fastmath"
)

// negInf32 and zero32 are variables, not constants: Go builds a vector of a constant float through
// a legacy-SSE instruction (XORPS for 0, MOVSS for others), whose write keeps the register's upper
// half and so depends on its last 256-bit value (fastmath.Exp32x8 has the measurement); a
// variable is broadcast from memory.
var negInf32, zero32 = float32(math.Inf(-1)), float32(0)

// softmaxLastAxisFloat32 is fusedSoftmax over the last axis of float32 rows, eight lanes at a time
// (agentrl patch 8, PATCHES.md): the maximum (exact, as the scalar loop's), exp(x − max) by
// fastmath.Exp32x8, the sum in eight partial sums (so in another order than the scalar loop's:
// results move at float32 rounding), and the scaling by 1/sum. It reports false where the CPU lacks
// AVX2, and the caller runs the scalar loop.
func softmaxLastAxisFloat32(input, output []float32, axisSize int) bool {
	if !fastmath.HaveVector || axisSize == 0 {
		return false
	}
	for base := 0; base+axisSize <= len(input); base += axisSize {
		in, out := input[base:base+axisSize], output[base:base+axisSize]
		n := len(in)
		// Pass 1: the maximum.
		maxVec := archsimd.BroadcastFloat32x8(negInf32)
		i := 0
		for ; i+8 <= n; i += 8 {
			maxVec = maxVec.Max(archsimd.LoadFloat32x8((*[8]float32)(in[i:])))
		}
		var lanes [8]float32
		maxVec.Store(&lanes)
		archsimd.ClearAVXUpperBits() // the scalar code below writes XMM registers with legacy SSE
		maxVal := float32(math.Inf(-1))
		for _, v := range lanes {
			if v > maxVal {
				maxVal = v
			}
		}
		for ; i < n; i++ {
			if in[i] > maxVal {
				maxVal = in[i]
			}
		}
		// Pass 2: exp(x − max) and its sum (partial loads pad with zeros, which add nothing).
		shift := archsimd.BroadcastFloat32x8(maxVal)
		sumVec := archsimd.BroadcastFloat32x8(zero32)
		i = 0
		for ; i+8 <= n; i += 8 {
			e := fastmath.Exp32x8(archsimd.LoadFloat32x8((*[8]float32)(in[i:])).Sub(shift))
			e.Store((*[8]float32)(out[i:]))
			sumVec = sumVec.Add(e)
		}
		if i < n {
			fastmath.Exp32x8(archsimd.LoadFloat32x8SlicePart(in[i:]).Sub(shift)).StoreSlicePart(out[i:])
			sumVec = sumVec.Add(archsimd.LoadFloat32x8SlicePart(out[i:]))
		}
		sumVec.Store(&lanes)
		archsimd.ClearAVXUpperBits()
		var sum float32
		for _, v := range lanes {
			sum += v
		}
		// Pass 3: normalise.
		scale := archsimd.BroadcastFloat32x8(1 / sum)
		i = 0
		for ; i+8 <= n; i += 8 {
			archsimd.LoadFloat32x8((*[8]float32)(out[i:])).Mul(scale).Store((*[8]float32)(out[i:]))
		}
		if i < n {
			archsimd.LoadFloat32x8SlicePart(out[i:]).Mul(scale).StoreSlicePart(out[i:])
		}
	}
	return true
}
