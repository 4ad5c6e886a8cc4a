// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"math"
	"testing"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot"
)

// TestAVX2RouterAVX512GEMM (agentrl patch 27): the AVX2 and AVX-512 large float32 paths sum each
// element's products in the same order (contracting panels of PanelContractingSize, fused
// multiply-adds in k order), so they agree bit for bit, and the AVX2 set's router gives that
// result with avx512GEMMInAVX2 on or off: sending its large products to the AVX-512 kernels
// changes the speed, not one bit of a result. Small products stay on the AVX2 small kernel. Every
// result is within float32 error of float64 sums. Needs an AVX-512 CPU.
func TestAVX2RouterAVX512GEMM(t *testing.T) {
	if !avx512AsmKernel || !avx2AsmKernel {
		t.Skip("needs a CPU with AVX-512 and AVX2")
	}
	b, err := gobackend.New("parallelism=2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	be := b.(*gobackend.Backend)
	saved := avx512GEMMInAVX2
	defer func() { avx512GEMMInAVX2 = saved }()
	for _, s := range []struct{ m, n, k int }{{64, 512, 384}, {37, 1030, 129}, {3, 7, 5}} {
		for _, layout := range []dot.Layout{dot.LayoutNonTransposed, dot.LayoutTransposed} {
			lhs, rhs := make([]float32, s.m*s.k), make([]float32, s.k*s.n)
			for i := range lhs {
				lhs[i] = float32(math.Sin(float64(i)*0.37)) * 3
			}
			for i := range rhs {
				rhs[i] = float32(math.Cos(float64(i) * 0.11))
			}
			run := func(f func(*gobackend.Backend, dot.Layout, []float32, []float32, int, int, int, int, []float32)) []float32 {
				out := make([]float32, s.m*s.n)
				f(be, layout, lhs, rhs, 1, s.m, s.n, s.k, out)
				return out
			}
			avx2, avx512 := run(avx2LargeFloat32), run(avx512LargeFloat32)
			small := s.m*s.n*s.k < noSIMDSmallMatMulSizeThreshold
			if !small && !slicesEqualBits(avx2, avx512) {
				t.Fatalf("%v %v: the AVX2 and AVX-512 large paths differ: the mixed set would change results", s, layout)
			}
			for _, on := range []bool{false, true} {
				avx512GEMMInAVX2 = on
				got := run(avx2RouterFloat32)
				want, name := avx2, "the large paths"
				for i := range got {
					// The small kernel's sums are in another order: compared with float64 below only.
					if !small && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v %v, flag %v: element %d = %v; want %s's %v", s, layout, on, i, got[i], name, want[i])
					}
					row, col := i/s.n, i%s.n
					var ref float64
					for k := 0; k < s.k; k++ {
						r := rhs[k*s.n+col]
						if layout == dot.LayoutTransposed {
							r = rhs[col*s.k+k]
						}
						ref += float64(lhs[row*s.k+k]) * float64(r)
					}
					if d := math.Abs(float64(got[i]) - ref); d > 1e-4*float64(s.k) {
						t.Fatalf("%v %v, flag %v: element %d = %v; float64 sum %v", s, layout, on, i, got[i], ref)
					}
				}
			}
		}
	}
}

func slicesEqualBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// BenchmarkAVX2RouterAVX512GEMM times a vocabulary projection's product (512 positions × 1,024
// hidden × 8,192 words) through the AVX2 set's router with avx512GEMMInAVX2 off and on.
func BenchmarkAVX2RouterAVX512GEMM(b *testing.B) {
	if !avx512AsmKernel || !avx2AsmKernel {
		b.Skip("needs a CPU with AVX-512 and AVX2")
	}
	bk, err := gobackend.New("")
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Finalize()
	be := bk.(*gobackend.Backend)
	m, n, k := 512, 8192, 1024
	lhs, rhs, out := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	for i := range lhs {
		lhs[i] = float32(i%7) * 0.1
	}
	for i := range rhs {
		rhs[i] = float32(i%5) * 0.1
	}
	saved := avx512GEMMInAVX2
	defer func() { avx512GEMMInAVX2 = saved }()
	for _, on := range []bool{false, true} {
		name := "avx2"
		if on {
			name = "avx512-gemm"
		}
		b.Run(name, func(b *testing.B) {
			avx512GEMMInAVX2 = on
			for b.Loop() {
				avx2RouterFloat32(be, dot.LayoutTransposed, lhs, rhs, 1, m, n, k, out)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
