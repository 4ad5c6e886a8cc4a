package ops

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/fastmath"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestParallelElementwiseBitIdentical holds the large float32 passes split across threads (agentrl
// patch 26) bit for bit equal to the same passes on one thread: equal shapes, scalar operands,
// broadcast runs, Exp, and ReduceMax and ReduceSum over the last axis (against the generic
// reduction loops), at sizes around the split threshold, with NaN, infinities and signed zeros.
func TestParallelElementwiseBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))}
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 4)
			if rng.IntN(1000) == 0 {
				x[i] = special[rng.IntN(len(special))]
			}
		}
		return x
	}
	makeBuffer := func(_ *testing.T, s shapes.Shape, flat []float32) *gobackend.Buffer {
		return &gobackend.Buffer{RawShape: s, Flat: flat, InUse: true}
	}
	same := func(t *testing.T, what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("%s: element %d is %v on several threads, %v on one", what, i, got[i], want[i])
			}
		}
	}
	// run computes fn on GOMAXPROCS threads and on one.
	run := func(fn func() []float32) (parallel, serial []float32) {
		prev := runtime.GOMAXPROCS(4)
		parallel = fn()
		runtime.GOMAXPROCS(1)
		serial = fn()
		runtime.GOMAXPROCS(prev)
		return parallel, serial
	}
	rows, vocab := 9, parallelElementsFrom/8+37 // a [rows, vocab] tensor just past the threshold
	for _, n := range []int{parallelElementsFrom - 1, parallelElementsFrom, parallelElementsFrom + 63, 3*parallelElementsFrom + 5} {
		a, b := fill(n), fill(n)
		for _, op := range []binaryOp{binaryAdd, binarySub, binaryMul, binaryDiv} {
			s := shapes.Make(dtypes.Float32, n)
			scalar := shapes.Make(dtypes.Float32)
			par, ser := run(func() []float32 {
				o := make([]float32, n)
				execBinaryFloat32(op, execAddNumericGeneric[float32], a, b, o, s, s, s)
				return o
			})
			same(t, "vector op vector", par, ser)
			par, ser = run(func() []float32 {
				o := make([]float32, n)
				execBinaryFloat32(op, execAddNumericGeneric[float32], a, b[:1], o, s, scalar, s)
				return o
			})
			same(t, "vector op scalar", par, ser)
		}
		if fastmath.HaveVector {
			par, ser := run(func() []float32 {
				o := make([]float32, n)
				splitLarge(n, func(lo, hi int) { fastmath.ExpSlice32(a[lo:hi], o[lo:hi]) })
				return o
			})
			same(t, "exp", par, ser)
		}
	}
	logits, perRow := fill(rows*vocab), fill(rows)
	ls, rs := shapes.Make(dtypes.Float32, rows, vocab), shapes.Make(dtypes.Float32, rows, 1)
	for _, op := range []binaryOp{binarySub, binaryMul} {
		par, ser := run(func() []float32 {
			o := make([]float32, rows*vocab)
			execBinaryFloat32(op, execSubNumericGeneric[float32], logits, perRow, o, ls, rs, ls)
			return o
		})
		same(t, "broadcast runs", par, ser)
	}
	for _, op := range []compute.OpType{compute.OpTypeReduceMax, compute.OpTypeReduceSum} {
		in := makeBuffer(t, ls, logits)
		out := makeBuffer(t, shapes.Make(dtypes.Float32, rows), make([]float32, rows))
		want := makeBuffer(t, shapes.Make(dtypes.Float32, rows), make([]float32, rows))
		prev := runtime.GOMAXPROCS(4)
		if !reduceLastAxisFloat32(op, in, out, []int{1}) {
			t.Fatalf("%s over the last axis of %s took the generic path", op, ls)
		}
		runtime.GOMAXPROCS(prev)
		it := NewReduceOutputIterator(ls.Dimensions, []int{1})
		if op == compute.OpTypeReduceMax {
			_ = execReduceMaxGeneric[float32](in, want, it, dtypes.Float32)
		} else {
			_ = execReduceSumGeneric[float32](in, want, it, dtypes.Float32)
		}
		same(t, op.String(), out.Flat.([]float32), want.Flat.([]float32))
	}
	// Not the last axis, or too small: the generic path.
	small := makeBuffer(t, shapes.Make(dtypes.Float32, 2, 3), fill(6))
	if reduceLastAxisFloat32(compute.OpTypeReduceSum, small, makeBuffer(t, shapes.Make(dtypes.Float32, 2), make([]float32, 2)), []int{1}) ||
		reduceLastAxisFloat32(compute.OpTypeReduceSum, makeBuffer(t, ls, logits), makeBuffer(t, shapes.Make(dtypes.Float32, vocab), make([]float32, vocab)), []int{0}) {
		t.Error("a small operand or a leading axis took the parallel path")
	}
}
