// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot"
)

// TestPanelToOutputBitIdentical (agentrl patch 23): with the assembly kernels writing whole blocks
// straight into the output (added to it after the first contracting panel), the packed products
// give the same bits as the Go kernels, whose every block goes through the packed output and the
// apply pass — on shapes with several contracting panels, ragged rows and columns, both layouts,
// one and two workers.
func TestPanelToOutputBitIdentical(t *testing.T) {
	type variant struct {
		name  string
		asm   *bool
		large func(*gobackend.Backend, dot.Layout, []float32, []float32, int, int, int, int, []float32)
	}
	var variants []variant
	if avx2AsmKernel {
		variants = append(variants, variant{"avx2", &avx2AsmKernel, avx2LargeFloat32})
	}
	if avx512AsmKernel {
		variants = append(variants, variant{"avx512", &avx512AsmKernel, avx512LargeFloat32})
	}
	if len(variants) == 0 {
		t.Skip("no assembly kernel on this CPU")
	}
	shapes := []struct{ m, n, k int }{{64, 512, 384}, {37, 150, 129}, {24, 33, 300}, {5, 1030, 257}, {100, 64, 128}, {3, 7, 5}}
	for _, w := range []int{1, 2} {
		b, err := gobackend.New(fmt.Sprintf("parallelism=%d", w))
		if err != nil {
			t.Fatal(err)
		}
		be := b.(*gobackend.Backend)
		for _, v := range variants {
			for _, s := range shapes {
				for _, layout := range []dot.Layout{dot.LayoutNonTransposed, dot.LayoutTransposed} {
					lhs, rhs := make([]float32, s.m*s.k), make([]float32, s.k*s.n)
					for i := range lhs {
						lhs[i] = float32(math.Sin(float64(i)*0.37)) * 3
					}
					for i := range rhs {
						rhs[i] = float32(math.Cos(float64(i) * 0.11))
					}
					run := func(asm bool) []float32 {
						saved := *v.asm
						*v.asm = asm
						defer func() { *v.asm = saved }()
						out := make([]float32, s.m*s.n)
						for i := range out {
							out[i] = float32(math.NaN()) // every element must be written
						}
						v.large(be, layout, lhs, rhs, 1, s.m, s.n, s.k, out)
						return out
					}
					want, got := run(false), run(true)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							b.Finalize()
							t.Fatalf("%s, %d workers, %v %v: element %d (row %d, col %d) = %v; through the packed output %v",
								v.name, w, s, layout, i, i/s.n, i%s.n, got[i], want[i])
						}
					}
				}
			}
		}
		b.Finalize()
	}
}

// BenchmarkLargeFloat32 times the packed float32 product (the AVX2 and, where the CPU has it,
// AVX-512 assembly kernels) on one and two workers at the shapes of a Qwen3-0.6B-width training
// step: square, a layer's projection, a vocabulary chunk of 32 and of 256 positions.
func BenchmarkLargeFloat32(b *testing.B) {
	type variant struct {
		name  string
		on    bool
		large func(*gobackend.Backend, dot.Layout, []float32, []float32, int, int, int, int, []float32)
	}
	variants := []variant{{"avx2", avx2AsmKernel, avx2LargeFloat32}, {"avx512", avx512AsmKernel, avx512LargeFloat32}}
	for _, w := range []int{1, 2} {
		be, err := gobackend.New(fmt.Sprintf("parallelism=%d", w))
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range variants {
			if !v.on {
				continue
			}
			for _, s := range []struct{ m, n, k int }{{1024, 1024, 1024}, {512, 3072, 1024}, {32, 8192, 1024}, {256, 8192, 1024}} {
				lhs, rhs, out := make([]float32, s.m*s.k), make([]float32, s.k*s.n), make([]float32, s.m*s.n)
				for i := range lhs {
					lhs[i] = float32(i%7) * 0.1
				}
				for i := range rhs {
					rhs[i] = float32(i%5) * 0.1
				}
				b.Run(fmt.Sprintf("%s/workers=%d/%dx%dx%d", v.name, w, s.m, s.n, s.k), func(b *testing.B) {
					for range b.N {
						v.large(be.(*gobackend.Backend), dot.LayoutNonTransposed, lhs, rhs, 1, s.m, s.n, s.k, out)
					}
					b.ReportMetric(float64(2*s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
		be.Finalize()
	}
}
