// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAVX512AsmKernel: the AVX-512 assembly kernel (agentrl patch 15) against GoMLX's Go AVX-512
// kernel and float64 sums (checkAsmKernel). It needs an AVX-512 CPU; scripts/avx512-emu.sh runs
// this test under an emulated one.
func TestAVX512AsmKernel(t *testing.T) {
	if !avx512AsmKernel {
		t.Skip("no AVX-512F on this CPU (scripts/avx512-emu.sh runs this test under an emulated one)")
	}
	checkAsmKernel(t, 7, 32, &avx512AsmKernel, avx512LargeKernelFloat32)
}

// TestAVX512SmallTransposed: the AVX-512 set's small transposed float32 product (through the AVX2
// assembly kernel since patch 15) against float64 sums.
func TestAVX512SmallTransposed(t *testing.T) {
	if !avx512AsmKernel {
		t.Skip("no AVX-512F on this CPU (scripts/avx512-emu.sh runs this test under an emulated one)")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tt := range []struct{ batch, rows, cols, k int }{{1, 16, 384, 128}, {3, 5, 7, 37}, {2, 1, 3, 8}} {
		lhs := make([]float32, tt.batch*tt.rows*tt.k)
		rhs := make([]float32, tt.batch*tt.cols*tt.k)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		got := make([]float32, tt.batch*tt.rows*tt.cols)
		avx512SmallFloat32Transposed(lhs, rhs, 0, tt.batch, tt.rows, tt.cols, tt.k, got)
		for b := range tt.batch {
			for r := range tt.rows {
				for c := range tt.cols {
					var sum float64
					for k := range tt.k {
						sum += float64(lhs[(b*tt.rows+r)*tt.k+k]) * float64(rhs[(b*tt.cols+c)*tt.k+k])
					}
					if g := got[(b*tt.rows+r)*tt.cols+c]; math.Abs(float64(g)-sum) > 1e-5*float64(tt.k) {
						t.Fatalf("%+v: (%d, %d, %d) = %g, float64 sum %g", tt, b, r, c, g, sum)
					}
				}
			}
		}
	}
}

// BenchmarkAVX512Kernel: one 24 × 512 × 128 panel product (the AVX-512 float32 cache parameters).
func BenchmarkAVX512Kernel(b *testing.B) {
	if !avx512AsmKernel {
		b.Skip("no AVX-512F on this CPU")
	}
	benchmarkAsmKernel(b, AVX512ParamsFloat32, &avx512AsmKernel, avx512LargeKernelFloat32)
}
