// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package ops

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestBroadcastRuns holds the run-based broadcast of the binary ops (agentrl patch) equal to the
// element-by-element ZipIterator on random shapes where each axis of each operand is either the
// target's or broadcast.
func TestBroadcastRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	type binop struct {
		name string
		fn   func(lhs, rhs, out []float32, ls, rs, os shapes.Shape)
		ref  func(a, b float32) float32
	}
	for _, op := range []binop{
		{"add", execAddNumericGeneric[float32], func(a, b float32) float32 { return a + b }},
		{"sub", execSubNumericGeneric[float32], func(a, b float32) float32 { return a - b }},
		{"mul", execMulNumericGeneric[float32], func(a, b float32) float32 { return a * b }},
		{"div", execDivNumericGeneric[float32], func(a, b float32) float32 { return a / b }},
		{"max", execMaxNumericGeneric[float32], func(a, b float32) float32 { return max(a, b) }},
		{"min", execMinNumericGeneric[float32], func(a, b float32) float32 { return min(a, b) }},
	} {
		for trial := range 300 {
			rank := 1 + trial%5
			tgt, ld, rd := make([]int, rank), make([]int, rank), make([]int, rank)
			for i := range tgt {
				tgt[i] = 1 + rng.IntN(5)
				ld[i], rd[i] = tgt[i], tgt[i]
				if rng.IntN(3) == 0 {
					ld[i] = 1
				}
				if rng.IntN(3) == 0 {
					rd[i] = 1
				}
			}
			ls, rs, ts := shapes.Make(dtypes.Float32, ld...), shapes.Make(dtypes.Float32, rd...), shapes.Make(dtypes.Float32, tgt...)
			if ls.Equal(rs) || rs.Size() == 1 || ls.Size() == 1 {
				continue // the ops' own fast paths (a one-element operand is taken as a scalar)
			}
			lhs, rhs := make([]float32, ls.Size()), make([]float32, rs.Size())
			for i := range lhs {
				lhs[i] = float32(rng.NormFloat64())
			}
			for i := range rhs {
				rhs[i] = float32(rng.NormFloat64()) + 3
			}
			got, want := make([]float32, ts.Size()), make([]float32, ts.Size())
			op.fn(lhs, rhs, got, ls, rs, ts)
			for idx := range gobackend.NewZippedBroadcastIterator(ls, rs, ts).IterFlatIndices() {
				want[idx.TgtFlatIdx] = op.ref(lhs[idx.LHSFlatIdx], rhs[idx.RHSFlatIdx])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s %v %v -> %v: got %v, want %v", op.name, ld, rd, tgt, got, want)
			}
		}
	}
}

// BenchmarkBroadcastSub times [8, 32, 392] − [8, 32, 1] (a log-softmax's shift) by runs against
// the element-by-element iterator.
func BenchmarkBroadcastSub(b *testing.B) {
	ls, rs := shapes.Make(dtypes.Float32, 8, 32, 392), shapes.Make(dtypes.Float32, 8, 32, 1)
	lhs, rhs, out := make([]float32, ls.Size()), make([]float32, rs.Size()), make([]float32, ls.Size())
	b.Run("runs", func(b *testing.B) {
		for range b.N {
			execSubNumericGeneric(lhs, rhs, out, ls, rs, ls)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ls.Size()), "ns/elem")
	})
	b.Run("iterator", func(b *testing.B) {
		for range b.N {
			for idx := range gobackend.NewZippedBroadcastIterator(ls, rs, ls).IterFlatIndices() {
				out[idx.TgtFlatIdx] = lhs[idx.LHSFlatIdx] - rhs[idx.RHSFlatIdx]
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ls.Size()), "ns/elem")
	})
}
