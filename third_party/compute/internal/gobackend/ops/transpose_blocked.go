// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package ops

// A blocked transpose (agentrl patch, see PATCHES.md at the module root). The element-by-element
// copy through TransposeIterator cost about 20 ns an element on a 2-core AMD EPYC and was a fifth
// of a training step, where every gradient of a matrix product transposes one activation-sized
// operand into the layout the matrix kernels take. transposeFlat first reduces the permutation
// (size-1 axes dropped, operand axes that stay adjacent and in order merged), then copies either
// contiguous runs (when the innermost axis does not move) or tiles of the 2-D transpose of the
// operand's innermost axis against the output's innermost axis, so that both the reads and the
// writes of a tile stay in a few cache lines.

// transposeTile is the side of the square tiles of the 2-D transpose (32 was the fastest of 8, 16
// and 32 on activation shapes such as [2048, 128] and [256, 392]).
const transposeTile = 32

// transposePlan is a transpose reduced to its essential axes.
type transposePlan struct {
	dims []int // operand dimensions, reduced
	perm []int // output axis i is operand axis perm[i]
	size int
}

// newTransposePlan reduces a transpose of an operand of the given dimensions.
func newTransposePlan(dimensions, permutations []int) transposePlan {
	rank := len(dimensions)
	size := 1
	for _, d := range dimensions {
		size *= d
	}
	// Drop axes of size 1 (they move nothing) and renumber the rest.
	newIdx := make([]int, rank)
	var dims []int
	for axis, d := range dimensions {
		newIdx[axis] = -1
		if d != 1 {
			newIdx[axis] = len(dims)
			dims = append(dims, d)
		}
	}
	var perm []int
	for _, p := range permutations {
		if newIdx[p] >= 0 {
			perm = append(perm, newIdx[p])
		}
	}
	// Merge operand axes a, a+1 that are also consecutive in the output.
	for {
		merged := false
		for i := 0; i+1 < len(perm); i++ {
			a := perm[i]
			if perm[i+1] != a+1 {
				continue
			}
			dims[a] *= dims[a+1]
			dims = append(dims[:a+1], dims[a+2:]...)
			perm = append(perm[:i+1], perm[i+2:]...)
			for j := range perm {
				if perm[j] > a {
					perm[j]--
				}
			}
			merged = true
			break
		}
		if !merged {
			break
		}
	}
	return transposePlan{dims: dims, perm: perm, size: size}
}

// transposeFlat writes the transpose of in (row-major, the plan's operand) into out.
func transposeFlat[T any](in, out []T, plan *transposePlan) {
	rank := len(plan.dims)
	if plan.size == 0 {
		return
	}
	if rank <= 1 {
		copy(out[:plan.size], in[:plan.size])
		return
	}
	dims, perm := plan.dims, plan.perm
	inStrides := make([]int, rank)  // per operand axis
	outStrides := make([]int, rank) // per operand axis: its stride in the output
	stride := 1
	for axis := rank - 1; axis >= 0; axis-- {
		inStrides[axis] = stride
		stride *= dims[axis]
	}
	stride = 1
	for i := rank - 1; i >= 0; i-- {
		outStrides[perm[i]] = stride
		stride *= dims[perm[i]]
	}

	a := rank - 1     // innermost in the operand: contiguous reads
	b := perm[rank-1] // innermost in the output: contiguous writes
	// The outer axes: every operand axis but a and b, iterated with an odometer.
	var outer []int
	for axis := 0; axis < rank; axis++ {
		if axis != a && axis != b {
			outer = append(outer, axis)
		}
	}
	idx := make([]int, len(outer))
	inOff, outOff := 0, 0
	for {
		if a == b {
			// The innermost axis does not move: copy runs of dims[a].
			n := dims[a]
			copy(out[outOff:outOff+n], in[inOff:inOff+n])
		} else {
			transposeTiles(in[inOff:], out[outOff:], dims[b], dims[a], inStrides[b], outStrides[a])
		}
		// Next outer index.
		k := len(outer) - 1
		for ; k >= 0; k-- {
			axis := outer[k]
			idx[k]++
			inOff += inStrides[axis]
			outOff += outStrides[axis]
			if idx[k] < dims[axis] {
				break
			}
			inOff -= inStrides[axis] * dims[axis]
			outOff -= outStrides[axis] * dims[axis]
			idx[k] = 0
		}
		if k < 0 {
			return
		}
	}
}

// transposeTiles writes out[c·outRow + r] = in[r·inRow + c] for r < rows, c < cols, a square tile
// at a time: the tile's rows are read contiguously into a buffer laid out transposed, whose rows are
// then copied out contiguously (about 1 ns an element for float32 on the 2-core EPYC, against
// 1-4 ns writing the output at its stride directly).
func transposeTiles[T any](in, out []T, rows, cols, inRow, outRow int) {
	var buf [transposeTile * transposeTile]T
	for r0 := 0; r0 < rows; r0 += transposeTile {
		r1 := min(r0+transposeTile, rows)
		nr := r1 - r0
		for c0 := 0; c0 < cols; c0 += transposeTile {
			c1 := min(c0+transposeTile, cols)
			if transposeTile4(in[r0*inRow+c0:], out[c0*outRow+r0:], nr, c1-c0, inRow, outRow) {
				continue // 4-byte elements with AVX2: 8 × 8 blocks in registers (patch 17)
			}
			for r := range nr {
				src := in[(r0+r)*inRow+c0 : (r0+r)*inRow+c1]
				for c, v := range src {
					buf[c*transposeTile+r] = v
				}
			}
			for c := range c1 - c0 {
				o := (c0+c)*outRow + r0
				copy(out[o:o+nr], buf[c*transposeTile:c*transposeTile+nr])
			}
		}
	}
}
