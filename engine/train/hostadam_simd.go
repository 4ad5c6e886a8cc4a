//go:build amd64 && goexperiment.simd

package train

import "simd/archsimd"

// haveAVX2: adamwBlock runs eight values at a time.
var haveAVX2 = archsimd.X86.AVX2()

// adamwBlock is adamwScalar eight values at a time with AVX2: the same float32 operations in the
// same order, each correctly rounded per lane (a float32 square root equals the float64 one
// rounded to float32), so the results are bit-identical to it.
func adamwBlock(pp, gg, mm, vv []float32, k *adamConsts, decay bool) {
	if !haveAVX2 {
		adamwScalar(pp, gg, mm, vv, k, decay)
		return
	}
	n := len(pp)
	gg, mm, vv = gg[:n], mm[:n], vv[:n]
	scale, b1, b2 := archsimd.BroadcastFloat32x8(k.scale), archsimd.BroadcastFloat32x8(k.b1), archsimd.BroadcastFloat32x8(k.b2)
	ob1, ob2 := archsimd.BroadcastFloat32x8(k.ob1), archsimd.BroadcastFloat32x8(k.ob2)
	bc1, bc2 := archsimd.BroadcastFloat32x8(k.bc1), archsimd.BroadcastFloat32x8(k.bc2)
	eps, wd, lr := archsimd.BroadcastFloat32x8(k.eps), archsimd.BroadcastFloat32x8(k.wd), archsimd.BroadcastFloat32x8(k.lr)
	i := 0
	for ; i+8 <= n; i += 8 {
		g := archsimd.LoadFloat32x8((*[8]float32)(gg[i:])).Mul(scale)
		m := archsimd.LoadFloat32x8((*[8]float32)(mm[i:])).Mul(b1).Add(g.Mul(ob1))
		v := archsimd.LoadFloat32x8((*[8]float32)(vv[i:])).Mul(b2).Add(g.Mul(g).Mul(ob2))
		upd := m.Div(bc1).Div(v.Div(bc2).Sqrt().Add(eps))
		p := archsimd.LoadFloat32x8((*[8]float32)(pp[i:]))
		if decay {
			upd = upd.Add(p.Mul(wd))
		}
		p.Sub(lr.Mul(upd)).Store((*[8]float32)(pp[i:]))
		m.Store((*[8]float32)(mm[i:]))
		v.Store((*[8]float32)(vv[i:]))
	}
	archsimd.ClearAVXUpperBits() // before the scalar tail and the caller's scalar code
	adamwScalar(pp[i:], gg[i:], mm[i:], vv[i:], k, decay)
}
