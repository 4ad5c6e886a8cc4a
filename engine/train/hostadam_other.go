//go:build !amd64 || !goexperiment.simd

package train

// adamwBlock is adamwScalar where there is no vector loop.
func adamwBlock(pp, gg, mm, vv []float32, k *adamConsts, decay bool) {
	adamwScalar(pp, gg, mm, vv, k, decay)
}
