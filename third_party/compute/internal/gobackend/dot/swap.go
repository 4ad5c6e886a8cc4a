// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package dot

// Operand swap (agentrl patch, see PATCHES.md at the module root). The matrix kernels take the left
// operand as [batch, cross, contracting] and the right one as [batch, contracting, cross] or
// [batch, cross, contracting]; any other layout is transposed first. A gradient contracting over
// the rows of both operands (GoMLX's VJP of DotGeneral puts the incoming gradient on the left) then
// transposes the left one even when it is by far the larger: attention's key gradient transposes
// the [heads, queries, keys] score gradient where the [heads, queries, head_dim] queries would do.
// Computing the transposed product (rhs · lhs) and transposing its output moves fewer elements
// when the left operand is larger than the right one and the output together.

import (
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// sideOrder reports whether an operand's axes are already batch, then the given middle group, then
// the given last group, each in order.
func sideOrder(rank int, batch, middle, last []int) bool {
	perm := make([]int, 0, rank)
	perm = append(perm, batch...)
	perm = append(perm, middle...)
	perm = append(perm, last...)
	for i, p := range perm {
		if p != i {
			return false
		}
	}
	return len(perm) == rank
}

// crossAxesOf lists the axes of an operand of the given rank that are neither batch nor contracting.
func crossAxesOf(rank int, contracting, batch []int) []int {
	var cross []int
	for axis := range rank {
		if !slices.Contains(contracting, axis) && !slices.Contains(batch, axis) {
			cross = append(cross, axis)
		}
	}
	return cross
}

// transposeCost is how many elements the layout normalization transposes for lhs · rhs: lhs unless
// it is [batch, cross, contracting], rhs unless it is [batch, contracting, cross] or [batch, cross,
// contracting] (reshapeToSupportedLayout keeps either).
func transposeCost(lhs shapes.Shape, lhsC, lhsB []int, rhs shapes.Shape, rhsC, rhsB []int) int {
	lhsCross, rhsCross := crossAxesOf(lhs.Rank(), lhsC, lhsB), crossAxesOf(rhs.Rank(), rhsC, rhsB)
	cost := 0
	if !sideOrder(lhs.Rank(), lhsB, lhsCross, lhsC) {
		cost += lhs.Size()
	}
	if !sideOrder(rhs.Rank(), rhsB, rhsC, rhsCross) && !sideOrder(rhs.Rank(), rhsB, rhsCross, rhsC) {
		cost += rhs.Size()
	}
	return cost
}

// swapOperands reports whether rhs · lhs, transposed, moves fewer elements than lhs · rhs.
func swapOperands(lhs shapes.Shape, lhsC, lhsB []int, rhs shapes.Shape, rhsC, rhsB []int, output shapes.Shape) bool {
	if lhs.IsDynamic() || rhs.IsDynamic() || output.IsDynamic() {
		return false
	}
	straight := transposeCost(lhs, lhsC, lhsB, rhs, rhsC, rhsB)
	if straight == 0 {
		return false
	}
	swapped := transposeCost(rhs, rhsC, rhsB, lhs, lhsC, lhsB)
	if len(crossAxesOf(lhs.Rank(), lhsC, lhsB)) > 0 && len(crossAxesOf(rhs.Rank(), rhsC, rhsB)) > 0 {
		swapped += output.Size()
	}
	return swapped < straight
}

// swappedDotGeneral computes lhs · rhs as rhs · lhs, whose output [batch, rhsCross, lhsCross] is
// transposed to [batch, lhsCross, rhsCross].
func swappedDotGeneral(f *gobackend.Function, lhs *gobackend.Node, lhsC, lhsB []int,
	rhs *gobackend.Node, rhsC, rhsB []int, config compute.DotGeneralConfig) (compute.Value, error) {
	out, err := DotGeneral(f, rhs, rhsC, rhsB, lhs, lhsC, lhsB, config)
	if err != nil {
		return nil, err
	}
	nb := len(lhsB)
	nl := len(crossAxesOf(lhs.Shape.Rank(), lhsC, lhsB))
	nr := len(crossAxesOf(rhs.Shape.Rank(), rhsC, rhsB))
	if nl == 0 || nr == 0 {
		return out, nil
	}
	perm := make([]int, 0, nb+nl+nr)
	for i := range nb {
		perm = append(perm, i)
	}
	for i := range nl {
		perm = append(perm, nb+nr+i)
	}
	for i := range nr {
		perm = append(perm, nb+i)
	}
	return f.Transpose(out, perm...)
}
