// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package ops

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestReduceSumRuns holds the run-based ReduceSum (agentrl patch) bit-identical to adding each
// operand element into the output element ReduceOutputIterator names, on random shapes of rank
// 1-5 and random sets of reduced axes.
func TestReduceSumRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 500 {
		rank := 1 + trial%5
		dims := make([]int, rank)
		size := 1
		for i := range dims {
			dims[i] = 1 + rng.IntN(6)
			size *= dims[i]
		}
		var axes []int
		for a := range rank {
			if rng.IntN(2) == 0 {
				axes = append(axes, a)
			}
		}
		if len(axes) == 0 {
			axes = []int{rng.IntN(rank)}
		}
		outSize := 1
		for a, d := range dims {
			if !slices.Contains(axes, a) {
				outSize *= d
			}
		}
		in := make([]float32, size)
		for i := range in {
			in[i] = float32(rng.NormFloat64()) * 1e3
		}
		want, got := make([]float32, outSize), make([]float32, outSize)
		it := NewReduceOutputIterator(dims, axes)
		for _, v := range in {
			want[it.Next()] += v
		}
		reduceSumRuns(in, got, NewReduceOutputIterator(dims, axes))
		if !slices.Equal(got, want) {
			t.Fatalf("dims %v axes %v: got %v, want %v", dims, axes, got, want)
		}
	}
}
