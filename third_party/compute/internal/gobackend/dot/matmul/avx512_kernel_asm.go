// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"runtime"
	"simd/archsimd"
	"unsafe"

	"github.com/pkg/errors"
)

// avx512AsmKernel reports whether the AVX-512 assembly micro-kernel can run here (AVX-512F, which
// the 512-bit VFMADD231PS, VBROADCASTSS and VMOVUPS need).
var avx512AsmKernel = archsimd.X86.AVX512()

// avx512Kernel4x32Float32 computes one 4 × 32 block of a packed panel product and stores it (no
// accumulation) into out, whose rows are outStride elements apart:
//
//	out[r*outStride + c] = Σ_k lhs[k*4 + r] · rhs[k*32 + c],  r < 4, c < 32, k < contractingLen.
//
// lhs is a strip of the LHS panel as avx512PackLHSKernelRows4 lays it out (4 rows interleaved per
// contracting index), rhs a strip of the RHS panel as avx512PackRHSNonTransposed or unsafePackLHS
// with 32 columns lay it out. contractingLen must be ≥ 0; lhs must hold 4·contractingLen
// elements, rhs 32·contractingLen, out 3·outStride + 32.
//
// Assembly for the reason of avx2Kernel4x16Float32 (agentrl patch 6): Go lowers
// Float32x16.MulAdd to VFMADD213PS, which overwrites a multiplicand, so the Go kernel copies a
// register for every fused multiply-add and rotates its accumulators through moves.
//
//go:noescape
func avx512Kernel4x32Float32(lhs, rhs, out *float32, contractingLen, outStride int)

// avx512LargeKernelAsmFloat32 is avx512LargeKernelFloat32 through avx512Kernel4x32Float32: the
// same blocks of 4 rows × 32 columns, each summed over the contracting axis in the same order with
// fused multiply-adds, so the results are bit-identical to the Go kernel's.
func avx512LargeKernelAsmFloat32(packedLHS, packedRHS, packedOutput []float32,
	rhsPanelCols, contractingLen, lhsActiveRows, rhsActiveCols int) {
	const kernelRows, kernelCols = 4, 32
	if lhsActiveRows <= 0 || rhsActiveCols <= 0 {
		return
	}
	if contractingLen < 0 || rhsPanelCols < kernelCols {
		panic(errors.Errorf("avx512LargeKernelAsmFloat32: contracting length %d, panel columns %d", contractingLen, rhsPanelCols))
	}
	// The kernel reads and writes whole blocks (the packing functions pad the panels to them):
	// check the last block of each operand once, so that no block reaches past its slice.
	lastRow := (lhsActiveRows - 1) / kernelRows * kernelRows
	lastCol := (rhsActiveCols - 1) / kernelCols * kernelCols
	if contractingLen > 0 {
		_ = packedLHS[(lastRow+kernelRows)*contractingLen-1]
		_ = packedRHS[(lastCol+kernelCols)*contractingLen-1]
	}
	_ = packedOutput[(lastRow+kernelRows-1)*rhsPanelCols+lastCol+kernelCols-1]
	lhs := unsafe.Pointer(unsafe.SliceData(packedLHS))
	rhs := unsafe.Pointer(unsafe.SliceData(packedRHS))
	out := unsafe.Pointer(unsafe.SliceData(packedOutput))
	for row := 0; row < lhsActiveRows; row += kernelRows {
		lhsBlock := (*float32)(unsafe.Add(lhs, row*contractingLen*4))
		for col := 0; col < rhsActiveCols; col += kernelCols {
			avx512Kernel4x32Float32(lhsBlock,
				(*float32)(unsafe.Add(rhs, col*contractingLen*4)),
				(*float32)(unsafe.Add(out, (row*rhsPanelCols+col)*4)),
				contractingLen, rhsPanelCols)
		}
	}
	runtime.KeepAlive(packedLHS)
	runtime.KeepAlive(packedRHS)
	runtime.KeepAlive(packedOutput)
}
