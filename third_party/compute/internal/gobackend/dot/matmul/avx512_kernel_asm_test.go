// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAVX512AsmKernel: the AVX-512 assembly kernel (agentrl patch 15) gives bit for bit what the
// Go AVX-512 kernel gives on the same packed panels, for contracting lengths even and odd and
// partial blocks at the panel's edges, and writes nothing outside the active blocks. It needs an
// AVX-512 CPU; scripts/avx512-emu.sh runs this package's tests under an emulated one.
func TestAVX512AsmKernel(t *testing.T) {
	if !avx512AsmKernel {
		t.Skip("no AVX-512F on this CPU (scripts/avx512-emu.sh runs this test under an emulated one)")
	}
	rng := rand.New(rand.NewPCG(7, 8))
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
		roundCols := (tt.cols + 31) / 32 * 32
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
		avx512AsmKernel = false
		avx512LargeKernelFloat32(lhs, rhs, want, tt.panelRows, tt.panelCols, tt.k, tt.rows, tt.cols)
		avx512AsmKernel = true
		avx512LargeKernelFloat32(lhs, rhs, got, tt.panelRows, tt.panelCols, tt.k, tt.rows, tt.cols)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("panel %dx%d, k=%d, active %dx%d: element (%d, %d) = %g, Go kernel %g",
					tt.panelRows, tt.panelCols, tt.k, tt.rows, tt.cols, i/tt.panelCols, i%tt.panelCols, got[i], want[i])
			}
		}
		// And against float64 sums, so that the Go kernel is not the only witness.
		for r := range tt.rows {
			for c := range tt.cols {
				var sum float64
				for k := range tt.k {
					sum += float64(lhs[(r/4*4)*tt.k+k*4+r%4]) * float64(rhs[(c/32*32)*tt.k+k*32+c%32])
				}
				if d := math.Abs(float64(got[r*tt.panelCols+c]) - sum); d > 1e-5*float64(tt.k) {
					t.Fatalf("panel %dx%d, k=%d: element (%d, %d) = %g, float64 sum %g", tt.panelRows, tt.panelCols, tt.k, r, c, got[r*tt.panelCols+c], sum)
				}
			}
		}
	}
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

// BenchmarkAVX512Kernel: one 24 × 512 × 128 panel product (the AVX-512 float32 cache parameters),
// by the Go kernel and by the assembly one, in GFLOP/s of one core.
func BenchmarkAVX512Kernel(b *testing.B) {
	if !avx512AsmKernel {
		b.Skip("no AVX-512F on this CPU")
	}
	p := AVX512ParamsFloat32
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
	for _, asm := range []bool{false, true} {
		name := "go"
		if asm {
			name = "asm"
		}
		b.Run(name, func(b *testing.B) {
			avx512AsmKernel = asm
			defer func() { avx512AsmKernel = true }()
			for b.Loop() {
				avx512LargeKernelFloat32(lhs, rhs, out, mc, nc, kc, mc, nc)
			}
			b.ReportMetric(float64(2*mc*nc*kc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
