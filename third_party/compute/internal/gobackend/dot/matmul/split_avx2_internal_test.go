// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"fmt"
	"math"
	"runtime"
	"simd/archsimd"
	"testing"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot"
)

// TestLargeSplitBitIdentical (agentrl patch 18): the packed AVX2 float32 product gives the same
// bits on one worker as split among two or four (the parts are the output's rows or columns,
// each element summed in the same order), on the shapes patch 18 now splits.
func TestLargeSplitBitIdentical(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // four workers even on a 2-core machine
	backends := map[int]*gobackend.Backend{}
	for _, w := range []int{1, 2, 4} {
		b, err := gobackend.New(fmt.Sprintf("parallelism=%d", w))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Finalize()
		backends[w] = b.(*gobackend.Backend)
	}
	for _, s := range []struct{ m, n, k int }{{128, 256, 300}, {128, 128, 257}, {64, 392, 256}, {16, 8, 40}, {37, 150, 129}} {
		lhs, rhs := make([]float32, s.m*s.k), make([]float32, s.k*s.n)
		for i := range lhs {
			lhs[i] = float32(math.Sin(float64(i)*0.37)) * 3
		}
		for i := range rhs {
			rhs[i] = float32(math.Cos(float64(i) * 0.11))
		}
		var one []float32
		for _, w := range []int{1, 2, 4} {
			out := make([]float32, s.m*s.n)
			avx2LargeFloat32(backends[w], dot.LayoutNonTransposed, lhs, rhs, 1, s.m, s.n, s.k, out)
			if w == 1 {
				one = out
				for i := 0; i < s.m; i += 7 { // against float64 sums, as a sanity check
					for j := 0; j < s.n; j += 5 {
						var want float64
						for c := range s.k {
							want += float64(lhs[i*s.k+c]) * float64(rhs[c*s.n+j])
						}
						if d := math.Abs(float64(out[i*s.n+j]) - want); d > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("%v: out[%d][%d] = %v, float64 sum %v", s, i, j, out[i*s.n+j], want)
						}
					}
				}
				continue
			}
			for i := range out {
				if math.Float32bits(out[i]) != math.Float32bits(one[i]) {
					t.Fatalf("%v, %d workers: element %d = %v; one worker gives %v", s, w, i, out[i], one[i])
				}
			}
		}
	}
}
