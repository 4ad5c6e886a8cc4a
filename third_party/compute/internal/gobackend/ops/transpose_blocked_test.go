// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package ops

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// transposeReference is the element-by-element transpose the blocked one replaced.
func transposeReference[T any](in []T, dims, perm []int) []T {
	out := make([]T, len(in))
	it := NewTransposeIterator(shapes.Make(dtypes.Float32, dims...), perm)
	for _, v := range in {
		out[it.Next()] = v
	}
	return out
}

// TestTransposeBlocked holds the blocked transpose equal to the element-by-element one on
// random shapes (sizes around the tile, axes of size 1, ranks 1 to 5) and every permutation.
func TestTransposeBlocked(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 2, 3, 7, 15, 16, 17, 33}
	for rank := 1; rank <= 5; rank++ {
		for trial := range 12 {
			dims := make([]int, rank)
			for i := range dims {
				dims[i] = sizes[rng.IntN(len(sizes))]
				if rank >= 4 {
					dims[i] = min(dims[i], 7)
				}
			}
			size := 1
			for _, d := range dims {
				size *= d
			}
			in := make([]float32, size)
			for i := range in {
				in[i] = float32(i)
			}
			for _, perm := range permutations(rank) {
				if rank == 5 && trial%3 != 0 {
					continue
				}
				it := NewTransposeIterator(shapes.Make(dtypes.Float32, dims...), perm)
				out := make([]float32, size)
				transposeFlat(in, out, &it.plan)
				if want := transposeReference(in, dims, perm); !slices.Equal(out, want) {
					t.Fatalf("dims %v perm %v (plan %v %v): got %v, want %v", dims, perm, it.plan.dims, it.plan.perm, out, want)
				}
				// 16-bit and 1-byte element types take the same code.
				in16, out16 := make([]uint16, size), make([]uint16, size)
				for i := range in16 {
					in16[i] = uint16(i)
				}
				transposeFlat(in16, out16, &it.plan)
				if want := transposeReference(in16, dims, perm); !slices.Equal(out16, want) {
					t.Fatalf("uint16 dims %v perm %v: got %v, want %v", dims, perm, out16, want)
				}
			}
		}
	}
}

func TestTransposePlanMerges(t *testing.T) {
	for _, c := range []struct {
		dims, perm, wantDims, wantPerm []int
	}{
		{[]int{2, 3, 4}, []int{0, 1, 2}, []int{24}, []int{0}},
		{[]int{2, 3, 4}, []int{2, 0, 1}, []int{6, 4}, []int{1, 0}},
		{[]int{8, 1, 5, 6}, []int{0, 2, 1, 3}, []int{8, 5, 6}, []int{0, 1, 2}[:1:1]},
		{[]int{4, 5, 6, 7}, []int{0, 2, 1, 3}, []int{4, 5, 6, 7}, []int{0, 2, 1, 3}},
	} {
		p := newTransposePlan(c.dims, c.perm)
		if c.wantPerm[0] == 0 && len(c.wantPerm) == 1 && len(c.wantDims) == 3 {
			// [8,1,5,6] with the size-1 axis moved: nothing moves, one run of 240.
			c.wantDims, c.wantPerm = []int{240}, []int{0}
		}
		if !slices.Equal(p.dims, c.wantDims) || !slices.Equal(p.perm, c.wantPerm) {
			t.Errorf("plan(%v, %v) = %v %v, want %v %v", c.dims, c.perm, p.dims, p.perm, c.wantDims, c.wantPerm)
		}
	}
}

func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var all [][]int
	for _, p := range permutations(n - 1) {
		for pos := 0; pos <= len(p); pos++ {
			q := slices.Insert(slices.Clone(p), pos, n-1)
			all = append(all, q)
		}
	}
	return all
}

// BenchmarkTranspose times an activation-sized transpose of the kind a linear layer's gradient
// makes ([B·T, out] → [out, B·T]) and attention's head-first layout, blocked against the
// element-by-element copy.
func BenchmarkTranspose(b *testing.B) {
	for _, c := range []struct {
		dims, perm []int
	}{
		{[]int{2048, 512}, []int{1, 0}},
		{[]int{8, 256, 4, 64}, []int{0, 2, 1, 3}},
	} {
		size := 1
		for _, d := range c.dims {
			size *= d
		}
		in, out := make([]float32, size), make([]float32, size)
		b.Run(fmt.Sprintf("blocked/%v", c.dims), func(b *testing.B) {
			for range b.N {
				it := NewTransposeIterator(shapes.Make(dtypes.Float32, c.dims...), c.perm)
				transposeFlat(in, out, &it.plan)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/elem")
		})
		b.Run(fmt.Sprintf("iterator/%v", c.dims), func(b *testing.B) {
			for range b.N {
				it := NewTransposeIterator(shapes.Make(dtypes.Float32, c.dims...), c.perm)
				for _, v := range in {
					out[it.Next()] = v
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/elem")
		})
	}
}

// TestTransposeTile4 holds the AVX2 8 × 8 block transpose of 4-byte elements (patch 17) equal to
// the element-by-element one on shapes of several tiles with row and column tails (the
// projections' [B·T, out] → [out, B·T], the vocabulary's 392), for float32 and int32, and checks
// that the AVX2 path is taken where it is built.
func TestTransposeTile4(t *testing.T) {
	for _, c := range []struct{ dims, perm []int }{
		{[]int{2048, 128}, []int{1, 0}},
		{[]int{256, 392}, []int{1, 0}},
		{[]int{67, 130}, []int{1, 0}},
		{[]int{9, 8}, []int{1, 0}},
		{[]int{3, 40, 72}, []int{0, 2, 1}},
		{[]int{5, 24, 3, 41}, []int{3, 1, 0, 2}},
	} {
		size := 1
		for _, d := range c.dims {
			size *= d
		}
		in := make([]float32, size)
		in32 := make([]int32, size)
		for i := range in {
			in[i], in32[i] = float32(i)+0.5, int32(i)*3-7
		}
		it := NewTransposeIterator(shapes.Make(dtypes.Float32, c.dims...), c.perm)
		out, out32 := make([]float32, size), make([]int32, size)
		transposeFlat(in, out, &it.plan)
		transposeFlat(in32, out32, &it.plan)
		if want := transposeReference(in, c.dims, c.perm); !slices.Equal(out, want) {
			t.Errorf("float32 dims %v perm %v: the blocked transpose differs from the reference", c.dims, c.perm)
		}
		if want := transposeReference(in32, c.dims, c.perm); !slices.Equal(out32, want) {
			t.Errorf("int32 dims %v perm %v: the blocked transpose differs from the reference", c.dims, c.perm)
		}
	}
	if got := transposeTile4(make([]float32, 64), make([]float32, 64), 8, 8, 8, 8); got != haveSIMDFloat32 {
		t.Errorf("transposeTile4 taken: %v; want %v (the AVX2 float32 paths are on: %v)", got, haveSIMDFloat32, haveSIMDFloat32)
	}
}
