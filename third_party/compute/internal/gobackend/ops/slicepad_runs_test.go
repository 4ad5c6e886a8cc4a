// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package ops

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// multiIndex calls fn with every multi-index of dims, in row-major order.
func multiIndex(dims []int, fn func(idx []int)) {
	idx := make([]int, len(dims))
	for _, d := range dims {
		if d == 0 {
			return
		}
	}
	for {
		fn(idx)
		axis := len(dims) - 1
		for ; axis >= 0; axis-- {
			idx[axis]++
			if idx[axis] < dims[axis] {
				break
			}
			idx[axis] = 0
		}
		if axis < 0 {
			return
		}
	}
}

func flatIndex(dims, idx []int) int {
	f := 0
	for axis, d := range dims {
		f = f*d + idx[axis]
	}
	return f
}

func newTestBackend(t *testing.T) *gobackend.Backend {
	t.Helper()
	b, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b.(*gobackend.Backend)
}

// TestSliceRuns (agentrl patch 14): Slice with a unit innermost stride, copied by runs, equals the
// slice computed index by index from its definition, on random shapes of rank 1-4 with random
// starts, limits and strides (whole axes, size-1 axes and strides > 1 on the outer axes among
// them), for 32- and 16-bit elements.
func TestSliceRuns(t *testing.T) {
	backend := newTestBackend(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 400 {
		rank := 1 + trial%4
		dims := make([]int, rank)
		starts, limits, strides := make([]int, rank), make([]int, rank), make([]int, rank)
		for axis := range dims {
			dims[axis] = 1 + rng.IntN(9)
			starts[axis], limits[axis], strides[axis] = 0, dims[axis], 1
			if rng.IntN(2) == 0 { // not whole
				starts[axis] = rng.IntN(dims[axis])
				limits[axis] = starts[axis] + 1 + rng.IntN(dims[axis]-starts[axis])
			}
			if axis < rank-1 && rng.IntN(4) == 0 {
				strides[axis] = 2 + rng.IntN(2)
			}
		}
		if trial%5 == 0 {
			strides[rank-1] = 2 // the element-by-element path, checked the same way
		}
		outDims := make([]int, rank)
		for axis := range dims {
			outDims[axis] = (limits[axis] - starts[axis] + strides[axis] - 1) / strides[axis]
		}
		operand := make([]float32, shapes.Make(dtypes.Float32, dims...).Size())
		for i := range operand {
			operand[i] = float32(i)
		}
		want := make([]float32, 0, shapes.Make(dtypes.Float32, outDims...).Size())
		src := make([]int, rank)
		multiIndex(outDims, func(idx []int) {
			for axis := range idx {
				src[axis] = starts[axis] + idx[axis]*strides[axis]
			}
			want = append(want, operand[flatIndex(dims, src)])
		})
		params := &sliceNode{starts: starts, limits: limits, strides: strides}
		for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.Int16} {
			in, err := backend.GetBuffer(shapes.Make(dtype, dims...))
			if err != nil {
				t.Fatal(err)
			}
			out, err := backend.GetBuffer(shapes.Make(dtype, outDims...))
			if err != nil {
				t.Fatal(err)
			}
			var got []float32
			if dtype == dtypes.Float32 {
				copy(in.Flat.([]float32), operand)
				execSliceGeneric[float32](in, out, params)
				got = slices.Clone(out.Flat.([]float32))
			} else {
				for i, v := range operand {
					in.Flat.([]int16)[i] = int16(v)
				}
				execSliceGeneric[int16](in, out, params)
				for _, v := range out.Flat.([]int16) {
					got = append(got, float32(v))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s %v [%v:%v:%v]: got %v, want %v", dtype, dims, starts, limits, strides, got, want)
			}
		}
	}
}

// TestPadRuns (agentrl patch 14): Pad copying the innermost axis as one run equals padding
// computed from its definition (every output element the fill value, operand elements at
// start + i·(interior+1) on each axis), with and without interior padding, zero and non-zero
// fill values.
func TestPadRuns(t *testing.T) {
	backend := newTestBackend(t)
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := range 300 {
		rank := 1 + trial%4
		dims := make([]int, rank)
		config := make([]compute.PadAxis, rank)
		outDims := make([]int, rank)
		for axis := range dims {
			dims[axis] = 1 + rng.IntN(6)
			if rng.IntN(3) > 0 {
				config[axis] = compute.PadAxis{Start: rng.IntN(3), End: rng.IntN(3)}
				if rng.IntN(4) == 0 {
					config[axis].Interior = 1 + rng.IntN(2)
				}
			}
			outDims[axis] = dims[axis] + config[axis].Start + config[axis].End + (dims[axis]-1)*config[axis].Interior
		}
		fill := float32(0)
		if trial%2 == 1 {
			fill = -1
		}
		in, err := backend.GetBuffer(shapes.Make(dtypes.Float32, dims...))
		if err != nil {
			t.Fatal(err)
		}
		for i := range in.Flat.([]float32) {
			in.Flat.([]float32)[i] = float32(i + 1)
		}
		fillBuf, err := backend.GetBuffer(shapes.Make(dtypes.Float32))
		if err != nil {
			t.Fatal(err)
		}
		fillBuf.Flat.([]float32)[0] = fill
		want := make([]float32, shapes.Make(dtypes.Float32, outDims...).Size())
		for i := range want {
			want[i] = fill
		}
		dst := make([]int, rank)
		multiIndex(dims, func(idx []int) {
			for axis := range idx {
				dst[axis] = config[axis].Start + idx[axis]*(config[axis].Interior+1)
			}
			want[flatIndex(outDims, dst)] = in.Flat.([]float32)[flatIndex(dims, idx)]
		})
		out, err := padWithConcreteConfig(backend, in, fillBuf, config)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Flat.([]float32); !slices.Equal(got, want) {
			t.Fatalf("%v pad %+v fill %g: got %v, want %v", dims, config, fill, got, want)
		}
	}
}
