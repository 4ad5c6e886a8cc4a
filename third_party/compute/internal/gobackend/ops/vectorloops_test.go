// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package ops

import (
	"runtime"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/vectorstate"
	"github.com/gomlx/compute/shapes"
)

// TestVectorLoopsLeaveStateClean (agentrl patches 16 and 17): the float32 vector loops and the
// AVX2 tile transpose return with the upper vector state clean, as the CPU reports it (XINUSE),
// whatever they were handed. A broadcast op calls them once per run, with Go code between the
// calls whose legacy-SSE writes (the run's scalar operand, a struct copy) cost a stall each when
// the state is dirty: [8, 256, 4, 32] ÷ [8, 256, 4, 1] ran 4.9 ns an element on the 2-core AMD
// EPYC against 0.65 with the state cleared (BenchmarkBroadcastRuns). Lengths with an 8-wide step
// and a scalar tail, and without.
func TestVectorLoopsLeaveStateClean(t *testing.T) {
	if !haveSIMDFloat32 || !vectorstate.Effective {
		t.Skip("the vector loops are not built or are off on this CPU")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !vectorstate.MakeDirty() {
		t.Skip("this CPU cannot report XINUSE (XGETBV with ECX=1)")
	}
	if dirty, _ := vectorstate.UpperDirty(); !dirty {
		t.Skip("this CPU does not report dirty upper state after a 256-bit load")
	}
	a, b, o := make([]float32, 256), make([]float32, 256), make([]float32, 256)
	for i := range a {
		a[i], b[i] = float32(i), 1+float32(i%5)
	}
	for _, n := range []int{16, 24, 31, 40, 64} {
		for _, tc := range []struct {
			name string
			run  func()
		}{
			{"vector-vector", func() { binaryVectorVector(binaryDiv, a, b, o[:n]) }},
			{"vector-scalar", func() { binaryVectorScalar(binaryMul, a, 3, o[:n]) }},
			{"scalar-vector", func() { binaryScalarVector(binarySub, 3, b, o[:n]) }},
			// 8 × 8 blocks with row and column tails: n rows, 8 + n%8 columns (at most 150 elements).
			{"transpose", func() { transposeTile4(a, o, n/8+7, 8+n%8, 8+n%8, n/8+7) }},
		} {
			vectorstate.MakeDirty()
			tc.run()
			if dirty, _ := vectorstate.UpperDirty(); dirty {
				t.Errorf("%s, %d elements: upper vector state dirty on return", tc.name, n)
			}
		}
	}
}

// BenchmarkBroadcastRuns times broadcast float32 ops of the training step's shapes: the RMS
// norm's [8, 256, 4, 32] ÷ [8, 256, 4, 1] (runs of 32) and the log-prob head's [8, 32, 1] ×
// [8, 32, 392] (runs of 392), against the same-shape op.
func BenchmarkBroadcastRuns(b *testing.B) {
	for _, c := range []struct {
		name     string
		op       binaryOp
		generic  func(lhs, rhs, out []float32, ls, rs, os shapes.Shape)
		l, r, tg []int
	}{
		{"div-runs-32", binaryDiv, execDivNumericGeneric[float32], []int{8, 256, 4, 32}, []int{8, 256, 4, 1}, []int{8, 256, 4, 32}},
		{"mul-runs-392", binaryMul, execMulNumericGeneric[float32], []int{8, 32, 1}, []int{8, 32, 392}, []int{8, 32, 392}},
		{"div-same-shape", binaryDiv, execDivNumericGeneric[float32], []int{8, 256, 4, 32}, []int{8, 256, 4, 32}, []int{8, 256, 4, 32}},
	} {
		ls, rs, ts := shapes.Make(dtypes.Float32, c.l...), shapes.Make(dtypes.Float32, c.r...), shapes.Make(dtypes.Float32, c.tg...)
		lhs, rhs, out := make([]float32, ls.Size()), make([]float32, rs.Size()), make([]float32, ts.Size())
		for i := range lhs {
			lhs[i] = float32(i%97) + 0.5
		}
		for i := range rhs {
			rhs[i] = 1.5 + float32(i%3)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				execBinaryFloat32(c.op, c.generic, lhs, rhs, out, ls, rs, ts)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ts.Size()), "ns/elem")
		})
	}
}
