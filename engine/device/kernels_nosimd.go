//go:build !(goexperiment.simd && amd64)

package device

// simdBuild reports whether this binary carries the Go backend's SIMD kernels.
const simdBuild = false

// simdKernelSets is empty: without GOEXPERIMENT=simd the Go backend has only its portable kernels.
func simdKernelSets() []KernelSet { return nil }
