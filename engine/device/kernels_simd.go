//go:build goexperiment.simd && amd64

package device

import "simd/archsimd"

// simdBuild reports whether this binary carries the Go backend's SIMD kernels.
const simdBuild = true

// simdKernelSets lists the SIMD kernel sets this CPU runs, as the backend decides at start-up.
func simdKernelSets() []KernelSet {
	var s []KernelSet
	if archsimd.X86.AVX512() {
		s = append(s, AVX512, AVX512GEMM)
	}
	if archsimd.X86.AVX2() {
		s = append(s, AVX2)
	}
	return s
}
