// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAVX2AsmKernel: the AVX2 assembly kernel (patch 6) against the Go kernel and float64 sums
// (checkAsmKernel).
func TestAVX2AsmKernel(t *testing.T) {
	if !avx2AsmKernel {
		t.Skip("no AVX2+FMA on this CPU")
	}
	checkAsmKernel(t, 1, 16, &avx2AsmKernel, avx2LargeKernelFloat32)
}

// BenchmarkAVX2Kernel: one 24 × 512 × 128 panel product (the float32 cache parameters).
func BenchmarkAVX2Kernel(b *testing.B) {
	if !avx2AsmKernel {
		b.Skip("no AVX2+FMA on this CPU")
	}
	benchmarkAsmKernel(b, AVX2ParamsFloat32, &avx2AsmKernel, avx2LargeKernelFloat32)
}

// goKernelFloat32 is a Go panel kernel (avx2LargeKernelFloat32, avx512LargeKernelFloat32), which
// runs its assembly kernel while the flag behind it is set.
type goKernelFloat32 func(packedLHS, packedRHS, packedOutput []float32, lhsPanelRows, rhsPanelCols, contractingLen, lhsActiveRows, rhsActiveCols int)

// checkAsmKernel: with the assembly kernel on (*asm), kernel gives bit for bit what it gives
// with it off (the Go kernel: the same fused multiply-adds in the same order), for contracting
// lengths even and odd (the Go kernel does not take 0, which the panel loops never pass) and
// partial blocks at the panel's edges, writes nothing outside the active blocks, and is within
// float32 error of float64 sums (so that the Go kernel is not the only witness). kernelCols is
// the block's width: the panels are padded to it as the packing functions pad them.
func checkAsmKernel(t *testing.T, seed uint64, kernelCols int, asm *bool, kernel goKernelFloat32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	tests := []struct{ panelRows, panelCols, k, rows, cols int }{
		{24, 512, 128, 24, 512},
		{24, 512, 127, 24, 512},
		{24, 64, 1, 24, 64},
		{24, 96, 33, 7, 17},
		{8, 32, 5, 1, 1},
		{8, 64, 2, 5, 40},
	}
	for _, tt := range tests {
		roundRows := (tt.rows + 3) / 4 * 4
		roundCols := (tt.cols + kernelCols - 1) / kernelCols * kernelCols
		lhs := make([]float32, roundRows*tt.k)
		rhs := make([]float32, roundCols*tt.k)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		want := make([]float32, tt.panelRows*tt.panelCols)
		got := make([]float32, tt.panelRows*tt.panelCols)
		for i := range want {
			want[i] = float32(math.NaN()) // untouched elements stay NaN in both
			got[i] = want[i]
		}
		*asm = false
		kernel(lhs, rhs, want, tt.panelRows, tt.panelCols, tt.k, tt.rows, tt.cols)
		*asm = true
		kernel(lhs, rhs, got, tt.panelRows, tt.panelCols, tt.k, tt.rows, tt.cols)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("panel %dx%d, k=%d, active %dx%d: element (%d, %d) = %g, Go kernel %g",
					tt.panelRows, tt.panelCols, tt.k, tt.rows, tt.cols, i/tt.panelCols, i%tt.panelCols, got[i], want[i])
			}
		}
		for r := range tt.rows {
			for c := range tt.cols {
				var sum float64
				for k := range tt.k {
					sum += float64(lhs[(r/4*4)*tt.k+k*4+r%4]) * float64(rhs[(c/kernelCols*kernelCols)*tt.k+k*kernelCols+c%kernelCols])
				}
				if d := math.Abs(float64(got[r*tt.panelCols+c]) - sum); d > 1e-5*float64(tt.k) {
					t.Fatalf("panel %dx%d, k=%d: element (%d, %d) = %g, float64 sum %g", tt.panelRows, tt.panelCols, tt.k, r, c, got[r*tt.panelCols+c], sum)
				}
			}
		}
	}
}

// benchmarkAsmKernel: one panel product of the cache parameters p, by the Go kernel and by the
// assembly one, in GFLOP/s of one core.
func benchmarkAsmKernel(b *testing.B, p CacheParams, asm *bool, kernel goKernelFloat32) {
	mc, nc, kc := p.LHSPanelCrossSize, p.RHSPanelCrossSize, p.PanelContractingSize
	lhs := make([]float32, mc*kc)
	rhs := make([]float32, nc*kc)
	out := make([]float32, mc*nc)
	for i := range lhs {
		lhs[i] = float32(i%7) * 0.1
	}
	for i := range rhs {
		rhs[i] = float32(i%5) * 0.1
	}
	for _, on := range []bool{false, true} {
		name := "go"
		if on {
			name = "asm"
		}
		b.Run(name, func(b *testing.B) {
			*asm = on
			defer func() { *asm = true }()
			for b.Loop() {
				kernel(lhs, rhs, out, mc, nc, kc, mc, nc)
			}
			b.ReportMetric(float64(2*mc*nc*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestAVX2AsmDotTransposed: the small transposed kernel through avx2Dot2x4Float32 gives bit for
// bit what the Go kernel gives, for row and column counts that leave remainders, contracting
// lengths with and without a tail after the last 8-element chunk, batches, and a batch range that
// starts past 0 (the parallel split).
func TestAVX2AsmDotTransposed(t *testing.T) {
	if !avx2AsmKernel {
		t.Skip("no AVX2+FMA on this CPU")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tests := []struct{ batch, batchStart, batchCount, rows, cols, k int }{
		{1, 0, 1, 16, 384, 128},
		{3, 1, 2, 5, 7, 37},
		{2, 0, 2, 1, 3, 8},
		{4, 0, 4, 16, 33, 32},
		{1, 0, 1, 2, 4, 200},
	}
	for _, tt := range tests {
		lhs := make([]float32, tt.batch*tt.rows*tt.k)
		rhs := make([]float32, tt.batch*tt.cols*tt.k)
		for i := range lhs {
			lhs[i] = rng.Float32()*2 - 1
		}
		for i := range rhs {
			rhs[i] = rng.Float32()*2 - 1
		}
		want := make([]float32, tt.batch*tt.rows*tt.cols)
		got := make([]float32, len(want))
		for i := range want {
			want[i] = float32(math.NaN())
			got[i] = want[i]
		}
		avx2AsmKernel = false
		avx2SmallFloat32Transposed(lhs, rhs, tt.batchStart, tt.batchCount, tt.rows, tt.cols, tt.k, want)
		avx2AsmKernel = true
		avx2SmallFloat32Transposed(lhs, rhs, tt.batchStart, tt.batchCount, tt.rows, tt.cols, tt.k, got)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%+v: output %d = %g, Go kernel %g", tt, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkAVX2DotTransposed: a decode step's projection, [16, 128] × [384, 128]ᵀ, by the Go kernel
// and by the assembly one, on one core.
func BenchmarkAVX2DotTransposed(b *testing.B) {
	if !avx2AsmKernel {
		b.Skip("no AVX2+FMA on this CPU")
	}
	const rows, cols, k = 16, 384, 128
	lhs, rhs, out := make([]float32, rows*k), make([]float32, cols*k), make([]float32, rows*cols)
	for i := range lhs {
		lhs[i] = float32(i%7) * 0.1
	}
	for i := range rhs {
		rhs[i] = float32(i%5) * 0.1
	}
	for _, asm := range []bool{false, true} {
		name := "go"
		if asm {
			name = "asm"
		}
		b.Run(name, func(b *testing.B) {
			avx2AsmKernel = asm
			defer func() { avx2AsmKernel = true }()
			for b.Loop() {
				avx2SmallFloat32Transposed(lhs, rhs, 0, 1, rows, cols, k, out)
			}
			b.ReportMetric(float64(2*rows*cols*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
