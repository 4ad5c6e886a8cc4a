//go:build !(amd64 && goexperiment.simd)

package fusedops

// softmaxLastAxisFloat32 has no vector form here: the caller runs the scalar loop.
func softmaxLastAxisFloat32(input, output []float32, axisSize int) bool { return false }
