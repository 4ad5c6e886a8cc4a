// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package gobackend

import (
	"iter"

	"github.com/gomlx/compute/internal/exceptions"
	"github.com/gomlx/compute/shapes"
)

// BroadcastRun is a run of N consecutive output elements of a broadcast binary op, from TgtOff,
// reading the operands from LHSOff and RHSOff (agentrl patch, see PATCHES.md at the module root).
type BroadcastRun struct{ LHSOff, RHSOff, TgtOff, N int }

// BroadcastRuns splits a broadcast binary op (operands of the target's rank, each axis either the
// target's size or broadcast) into runs over the innermost axes that share one broadcast pattern:
// within a run each operand advances lhsStep / rhsStep (1, or 0 for a broadcast operand) per output
// element. An op loops over each run with its own inline arithmetic instead of paying an iterator
// step per element, which made [B, T, V] − [B, T, 1] and the like 5-10 times slower than an
// element-wise op of equal shapes.
func BroadcastRuns(lhsShape, rhsShape, tgtShape shapes.Shape) (lhsStep, rhsStep int, runs iter.Seq[BroadcastRun]) {
	rank := tgtShape.Rank()
	if lhsShape.Rank() != rank || rhsShape.Rank() != rank {
		exceptions.Panicf("BroadcastRuns: rank mismatch lhsShape=%s, rhsShape=%s, tgtShape=%s", lhsShape, rhsShape, tgtShape)
	}
	// Merge axes into groups sharing (lhs broadcast, rhs broadcast), dropping target axes of size 1.
	type group struct {
		dim        int
		lhsB, rhsB bool
	}
	var groups []group
	for axis := range rank {
		d := tgtShape.Dimensions[axis]
		if d == 1 {
			continue
		}
		lb, rb := lhsShape.Dimensions[axis] != d, rhsShape.Dimensions[axis] != d
		if n := len(groups); n > 0 && groups[n-1].lhsB == lb && groups[n-1].rhsB == rb {
			groups[n-1].dim *= d
			continue
		}
		groups = append(groups, group{dim: d, lhsB: lb, rhsB: rb})
	}
	if len(groups) == 0 {
		groups = append(groups, group{dim: 1})
	}
	inner := groups[len(groups)-1]
	outer := groups[:len(groups)-1]
	step := func(b bool) int {
		if b {
			return 0
		}
		return 1
	}
	lhsStep, rhsStep = step(inner.lhsB), step(inner.rhsB)
	// Strides of each outer group in each operand (0 where broadcast) and in the target.
	n := len(outer)
	lhsStrides, rhsStrides, tgtStrides := make([]int, n), make([]int, n), make([]int, n)
	// An operand's stride past the inner group: its size there, 1 where it is broadcast.
	ls, rs, ts := 1, 1, inner.dim
	if !inner.lhsB {
		ls = inner.dim
	}
	if !inner.rhsB {
		rs = inner.dim
	}
	for i := n - 1; i >= 0; i-- {
		g := outer[i]
		tgtStrides[i] = ts
		ts *= g.dim
		if !g.lhsB {
			lhsStrides[i] = ls
			ls *= g.dim
		}
		if !g.rhsB {
			rhsStrides[i] = rs
			rs *= g.dim
		}
	}
	runs = func(yield func(BroadcastRun) bool) {
		idx := make([]int, n)
		r := BroadcastRun{N: inner.dim}
		for {
			if !yield(r) {
				return
			}
			k := n - 1
			for ; k >= 0; k-- {
				idx[k]++
				r.LHSOff += lhsStrides[k]
				r.RHSOff += rhsStrides[k]
				r.TgtOff += tgtStrides[k]
				if idx[k] < outer[k].dim {
					break
				}
				r.LHSOff -= lhsStrides[k] * outer[k].dim
				r.RHSOff -= rhsStrides[k] * outer[k].dim
				r.TgtOff -= tgtStrides[k] * outer[k].dim
				idx[k] = 0
			}
			if k < 0 {
				return
			}
		}
	}
	return lhsStep, rhsStep, runs
}
