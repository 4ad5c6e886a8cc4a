// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd && linux

package matmul

import (
	"fmt"
	"math"
	"runtime/debug"
	"simd/archsimd"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
)

// guarded returns n 16-bit values ending exactly where an inaccessible page begins, so that a
// kernel reading one element past them faults.
func guarded(t *testing.T, n int) []uint16 {
	t.Helper()
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&mem[page-2*n])), n)
}

// TestAVX2SmallHalfStaysInBounds (agentrl patch 19): the AVX2 small bfloat16 and float16 kernels
// read no element past the RHS. Their 8-column step loaded 16 values and used 8, so the last row
// of an RHS whose column count leaves 8 (8, 24, 40) was read 16 bytes past its end: a fault
// (SIGSEGV in `bench rollout --dtype bf16`) where the buffer ended at an unmapped page. Here the
// RHS ends at one; faults become panics (debug.SetPanicOnFault), and the products are checked
// against float64 sums of the same values.
func TestAVX2SmallHalfStaysInBounds(t *testing.T) {
	if !archsimd.X86.AVX2() {
		t.Skip("no AVX2")
	}
	for _, dt := range []string{"bf16", "f16"} {
		for _, s := range []struct{ m, n, k int }{{1, 8, 16}, {5, 24, 9}, {4, 40, 3}, {3, 8, 1}} {
			t.Run(fmt.Sprintf("%s/%dx%dx%d", dt, s.m, s.n, s.k), func(t *testing.T) {
				lhs := make([]uint16, s.m*s.k)
				rhs := guarded(t, s.k*s.n)
				lv, rv := make([]float64, len(lhs)), make([]float64, len(rhs))
				for i := range lhs {
					x := float32(math.Sin(float64(i))*2) + 0.25
					if dt == "bf16" {
						lhs[i] = uint16(bfloat16.FromFloat32(x))
						lv[i] = float64(bfloat16.BFloat16(lhs[i]).Float32())
					} else {
						lhs[i] = uint16(float16.FromFloat32(x))
						lv[i] = float64(float16.Float16(lhs[i]).Float32())
					}
				}
				for i := range rhs {
					x := float32(math.Cos(float64(i)*0.3)) - 0.125
					if dt == "bf16" {
						rhs[i] = uint16(bfloat16.FromFloat32(x))
						rv[i] = float64(bfloat16.BFloat16(rhs[i]).Float32())
					} else {
						rhs[i] = uint16(float16.FromFloat32(x))
						rv[i] = float64(float16.Float16(rhs[i]).Float32())
					}
				}
				out := make([]float32, s.m*s.n)
				func() {
					defer debug.SetPanicOnFault(debug.SetPanicOnFault(true)) // per goroutine: this subtest's
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("the kernel read past the RHS: %v", r)
						}
					}()
					if dt == "bf16" {
						avx2SmallBFloat16(unsafe.Slice((*bfloat16.BFloat16)(unsafe.Pointer(&lhs[0])), len(lhs)),
							unsafe.Slice((*bfloat16.BFloat16)(unsafe.Pointer(&rhs[0])), len(rhs)), 0, 1, s.m, s.n, s.k, out)
					} else {
						avx2SmallFloat16(unsafe.Slice((*float16.Float16)(unsafe.Pointer(&lhs[0])), len(lhs)),
							unsafe.Slice((*float16.Float16)(unsafe.Pointer(&rhs[0])), len(rhs)), 0, 1, s.m, s.n, s.k, out)
					}
				}()
				for i := range s.m {
					for j := range s.n {
						var want float64
						for c := range s.k {
							want += lv[i*s.k+c] * rv[c*s.n+j]
						}
						if d := math.Abs(float64(out[i*s.n+j]) - want); d > 1e-5*(1+math.Abs(want)) {
							t.Fatalf("out[%d][%d] = %v; float64 sum %v", i, j, out[i*s.n+j], want)
						}
					}
				}
			})
		}
	}
}
