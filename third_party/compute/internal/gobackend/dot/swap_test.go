// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package dot_test

import (
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/support/testutil"
)

// TestDotGeneralContractingFirst (agentrl patch): products contracting the rows of both operands,
// lhs [B, M, N] · rhs [B, M, K] → [B, N, K], computed swapped (rhs · lhs, output transposed) when
// N is large against K, or with only the left operand transposed otherwise, equal a plain loop.
func TestDotGeneralContractingFirst(t *testing.T) {
	if _, ok := backend.(*gobackend.Backend); !ok {
		t.Skip("Skipping test because backend is not the Go backend")
	}
	for _, c := range []struct{ b, m, n, k int }{
		{2, 16, 12, 3}, // swapped: M·K + N·K < M·N
		{2, 16, 3, 12}, // straight, the right operand kept [B, M, K]
		{1, 5, 7, 7},
	} {
		lhs, rhs := make([][][]float32, c.b), make([][][]float32, c.b)
		want := make([][][]float32, c.b)
		for bi := range c.b {
			lhs[bi], rhs[bi], want[bi] = make([][]float32, c.m), make([][]float32, c.m), make([][]float32, c.n)
			for i := range c.m {
				lhs[bi][i], rhs[bi][i] = make([]float32, c.n), make([]float32, c.k)
				for j := range c.n {
					lhs[bi][i][j] = float32((bi+2*i+3*j)%7 - 3)
				}
				for j := range c.k {
					rhs[bi][i][j] = float32((5*bi+i+2*j)%5 - 2)
				}
			}
			for n := range c.n {
				want[bi][n] = make([]float32, c.k)
				for k := range c.k {
					for i := range c.m {
						want[bi][n][k] += lhs[bi][i][n] * rhs[bi][i][k]
					}
				}
			}
		}
		got, err := testutil.Exec1(backend, []any{lhs, rhs}, func(f compute.Function, params []compute.Value) (compute.Value, error) {
			return f.DotGeneral(params[0], []int{1}, []int{0}, params[1], []int{1}, []int{0}, compute.DotGeneralConfig{})
		})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if ok, diff := testutil.IsEqual(want, got); !ok {
			t.Errorf("%+v: %s", c, diff)
		}
		// Without batch axes: lhs [M, N] · rhs [M, K] → [N, K] (a weight gradient).
		got2, err := testutil.Exec1(backend, []any{lhs[0], rhs[0]}, func(f compute.Function, params []compute.Value) (compute.Value, error) {
			return f.DotGeneral(params[0], []int{0}, nil, params[1], []int{0}, nil, compute.DotGeneralConfig{})
		})
		if err != nil {
			t.Fatalf("%+v, no batch: %v", c, err)
		}
		if ok, diff := testutil.IsEqual(want[0], got2); !ok {
			t.Errorf("%+v, no batch: %s", c, diff)
		}
	}
}
