package ops

import (
	"runtime"
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/vectorstate"
)

// agentrl patch 26 (PATCHES.md): float32 element-wise passes over large tensors (Add, Sub, Mul,
// Div, Exp, and ReduceMax and ReduceSum over the last axis) split across the CPU's threads. The executor runs a large model's ops one at a time
// (ops in order), and these loops ran on one thread while the others waited: at Qwen3's 151,936
// words a training step makes about twenty passes over each chunk's [tokens, vocabulary] logits,
// a sixth of a 4-layer 0.6B-width update. Each element is computed by the same loop as before, so
// results are bit-identical; only which thread computes which contiguous range changes. Patch 28:
// ReduceMax's rows through rowMaxVector, bit-identical to the scalar loop.

// parallelElementsFrom is the smallest pass split across threads: 1M float32 (4 MiB), far above
// what a goroutine's start costs (a pass of this size takes about 100 µs on one thread).
const parallelElementsFrom = 1 << 20

// splitLarge calls fn over [0, n) in contiguous ranges, one per thread, when n is at least
// parallelElementsFrom (see splitRange); else fn(0, n).
func splitLarge(n int, fn func(lo, hi int)) {
	if n < parallelElementsFrom {
		fn(0, n)
		return
	}
	splitRange(n, 64, fn)
}

// splitRange calls fn over [0, n) in contiguous ranges, one per thread (GOMAXPROCS), each but
// the last a multiple of align, the first on this goroutine; it returns when every range is done.
func splitRange(n, align int, fn func(lo, hi int)) {
	parts := runtime.GOMAXPROCS(0)
	if parts < 2 || n < 2*align {
		fn(0, n)
		return
	}
	size := (n/parts + align - 1) / align * align
	var wg sync.WaitGroup
	for lo := size; lo < n; lo += size {
		hi := min(lo+size, n)
		wg.Go(func() {
			fn(lo, hi)
			vectorstate.Clear() // the goroutine's SIMD state, as the workers pool does (patch 13)
		})
	}
	fn(0, min(size, n))
	wg.Wait()
}

// reduceLastAxisFloat32 computes a float32 ReduceMax or ReduceSum over the last axis alone (a
// softmax's maximum and normaliser over the vocabulary) of a large operand, its rows split across
// threads, and reports whether it did. Each row is reduced in order from the first element, as
// the generic loops do (the sum starting from 0, the maximum from the lowest float32), so the
// results are bit-identical to theirs.
func reduceLastAxisFloat32(op compute.OpType, operand, output *gobackend.Buffer, axes []int) bool {
	shape := operand.RawShape
	if shape.DType != dtypes.Float32 || len(axes) != 1 || shape.Rank() == 0 || axes[0] != shape.Rank()-1 ||
		(op != compute.OpTypeReduceMax && op != compute.OpTypeReduceSum) {
		return false
	}
	in, out := operand.Flat.([]float32), output.Flat.([]float32)
	n := shape.Dimensions[shape.Rank()-1]
	if len(in) < parallelElementsFrom || n == 0 || len(out)*n != len(in) {
		return false
	}
	splitRange(len(out), 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := in[r*n : (r+1)*n]
			if op == compute.OpTypeReduceMax {
				acc := dtypes.Float32.LowestValue().(float32)
				if haveSIMDFloat32 {
					if m, ok := rowMaxVector(row, acc); ok {
						out[r] = m
						continue
					}
				}
				for _, v := range row {
					acc = max(acc, v)
				}
				out[r] = acc
			} else {
				var acc float32
				for _, v := range row {
					acc += v
				}
				out[r] = acc
			}
		}
	})
	return true
}
