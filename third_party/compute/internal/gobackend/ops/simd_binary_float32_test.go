package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// TestSIMDBinaryFloat32 holds the float32 vector loops (agentrl patch 7) bit for bit equal to the
// generic functions on equal shapes (lengths around the 16-element unrolling), scalar operands
// (rank 0, or one element), and random broadcasts, with NaN, infinities, signed zeros and subnormals among
// the operands.
func TestSIMDBinaryFloat32(t *testing.T) {
	if !haveSIMDFloat32 {
		t.Skip("the vector loops are not built or the CPU lacks AVX2: execBinaryFloat32 runs the generic functions")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		1e-42, -3e-39, math.MaxFloat32, 1}
	value := func() float32 {
		if rng.IntN(8) == 0 {
			return special[rng.IntN(len(special))]
		}
		return float32(rng.NormFloat64())
	}
	ops := []struct {
		name    string
		op      binaryOp
		generic func(lhs, rhs, out []float32, ls, rs, os shapes.Shape)
	}{
		{"add", binaryAdd, execAddNumericGeneric[float32]},
		{"sub", binarySub, execSubNumericGeneric[float32]},
		{"mul", binaryMul, execMulNumericGeneric[float32]},
		{"div", binaryDiv, execDivNumericGeneric[float32]},
	}
	type case_ struct{ l, r, t []int }
	var cases []case_
	for _, n := range []int{1, 7, 8, 15, 16, 17, 31, 33, 100} {
		cases = append(cases, case_{[]int{n}, []int{n}, []int{n}}, case_{[]int{2, n}, []int{1, 1}, []int{2, n}},
			case_{[]int{2, n}, []int{}, []int{2, n}}, case_{[]int{}, []int{n, 1}, []int{n, 1}})
	}
	for trial := range 200 {
		rank := 1 + trial%4
		tgt, ld, rd := make([]int, rank), make([]int, rank), make([]int, rank)
		for i := range tgt {
			tgt[i] = 1 + rng.IntN(20)
			ld[i], rd[i] = tgt[i], tgt[i]
			if rng.IntN(3) == 0 {
				ld[i] = 1
			}
			if rng.IntN(3) == 0 {
				rd[i] = 1
			}
		}
		cases = append(cases, case_{ld, rd, tgt})
	}
	for _, op := range ops {
		for _, c := range cases {
			if len(c.l) < len(c.t) && (op.op == binaryAdd || op.op == binaryMul) {
				continue // a scalar left operand reaches only Sub and Div (execAdd and execMul swap)
			}
			ls, rs, ts := shapes.Make(dtypes.Float32, c.l...), shapes.Make(dtypes.Float32, c.r...), shapes.Make(dtypes.Float32, c.t...)
			lhs, rhs := make([]float32, ls.Size()), make([]float32, rs.Size())
			for i := range lhs {
				lhs[i] = value()
			}
			for i := range rhs {
				rhs[i] = value()
			}
			got, want := make([]float32, ts.Size()), make([]float32, ts.Size())
			op.generic(lhs, rhs, want, ls, rs, ts)
			execBinaryFloat32(op.op, op.generic, lhs, rhs, got, ls, rs, ts)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%s %v %v -> %v: element %d = %g, generic %g", op.name, c.l, c.r, c.t, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkBinaryFloat32 times a same-shape float32 Mul of 512K elements by the generic loop and
// by the vector one.
func BenchmarkBinaryFloat32(b *testing.B) {
	s := shapes.Make(dtypes.Float32, 512, 1024)
	lhs, rhs, out := make([]float32, s.Size()), make([]float32, s.Size()), make([]float32, s.Size())
	for i := range lhs {
		lhs[i], rhs[i] = float32(i), 1.5
	}
	b.Run("generic", func(b *testing.B) {
		for b.Loop() {
			execMulNumericGeneric(lhs, rhs, out, s, s, s)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*s.Size()), "ns/elem")
	})
	b.Run("simd", func(b *testing.B) {
		for b.Loop() {
			execBinaryFloat32(binaryMul, execMulNumericGeneric[float32], lhs, rhs, out, s, s, s)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*s.Size()), "ns/elem")
	})
}

// TestRowMaxVector (agentrl patch 28) holds ReduceMax's vector row loop to the scalar one bit for
// bit: rows of every length around the 32-element unrolling, of normal values, of values with NaN,
// infinities, signed zeros and subnormals, all zeros of either sign, all −∞, and a NaN only in the
// tail. Where rowMaxVector declines (NaN, a zero maximum) the caller's scalar loop runs; where it
// answers, the answer must be the scalar loop's.
func TestRowMaxVector(t *testing.T) {
	if !haveSIMDFloat32 {
		t.Skip("the vector loops are not built or the CPU lacks AVX2")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	nan, negZero := float32(math.NaN()), float32(math.Copysign(0, -1))
	special := []float32{nan, float32(math.Inf(1)), float32(math.Inf(-1)), 0, negZero, 1e-42, -3e-39, math.MaxFloat32, -math.MaxFloat32}
	lowest := dtypes.Float32.LowestValue().(float32)
	scalar := func(row []float32) float32 {
		acc := lowest
		for _, v := range row {
			acc = max(acc, v)
		}
		return acc
	}
	fill := func(n int, f func(i int) float32) []float32 {
		row := make([]float32, n)
		for i := range row {
			row[i] = f(i)
		}
		return row
	}
	var rows [][]float32
	for _, n := range []int{0, 1, 7, 31, 32, 33, 63, 64, 65, 100, 1000} {
		rows = append(rows,
			fill(n, func(int) float32 { return float32(rng.NormFloat64()) }),
			fill(n, func(int) float32 { return -float32(rng.ExpFloat64()) }),
			fill(n, func(int) float32 {
				if rng.IntN(6) == 0 {
					return special[rng.IntN(len(special))]
				}
				return float32(rng.NormFloat64())
			}),
			fill(n, func(i int) float32 { return []float32{0, negZero}[rng.IntN(2)] }),
			fill(n, func(int) float32 { return float32(math.Inf(-1)) }),
			fill(n, func(i int) float32 {
				if i == n-1 && n%32 != 0 {
					return nan
				}
				return -1
			}))
	}
	answered := 0
	for k, row := range rows {
		want := scalar(row)
		got, ok := rowMaxVector(row, lowest)
		if !ok {
			if want == want && want != 0 {
				t.Errorf("row %d (%d values): declined, but the maximum %v is neither NaN nor zero", k, len(row), want)
			}
			continue
		}
		answered++
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("row %d (%d values): %v (%#x); the scalar loop gives %v (%#x)", k, len(row), got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	if answered < len(rows)/2 {
		t.Errorf("the vector loop answered %d rows of %d", answered, len(rows))
	}
}
