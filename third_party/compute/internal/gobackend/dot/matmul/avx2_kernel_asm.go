// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import (
	"runtime"
	"simd/archsimd"
	"unsafe"

	"github.com/pkg/errors"
)

// avx2AsmKernel reports whether the assembly micro-kernel (AVX2 + FMA3) can run here: every CPU
// with AVX2 that Go supports has FMA3 too, but the check costs nothing.
var avx2AsmKernel = archsimd.X86.AVX2() && archsimd.X86.FMA()

// avx2Kernel4x16Float32 computes one 4 × 16 block of a packed panel product and stores it into
// out, whose rows are outStride elements apart:
//
//	out[r*outStride + c] = Σ_k lhs[k*4 + r] · rhs[k*16 + c],  r < 4, c < 16, k < contractingLen;
//
// with accumulate ≠ 0 it adds the block to what out holds instead (agentrl patch 23: the sum
// avx2ApplyPackedOutputFloat32 forms, packed + output, so the panel loop can write whole blocks
// straight into the output matrix).
//
// lhs is a strip of the LHS panel as avx2PackLHSKernelRows4 lays it out (4 rows interleaved per
// contracting index), rhs a strip of the RHS panel as avx2PackRHSNonTransposed or unsafePackLHS
// with 16 columns lay it out. contractingLen must be ≥ 0; lhs must hold 4·contractingLen
// elements, rhs 16·contractingLen, out 3·outStride + 16.
//
// It is written in assembly because the Go compiler (1.26, GOEXPERIMENT=simd) lowers
// Float32x8.MulAdd to VFMADD213PS, whose result replaces a multiplicand: with the accumulators as
// the addend, every fused multiply-add of the Go kernel needed a register copy and the eight
// accumulators were rotated through moves on every contracting step, about 50 instructions for
// 8 FMAs. This kernel keeps the accumulators in place with VFMADD231PS and broadcasts the LHS
// values straight from memory: 14 instructions for 8 FMAs.
//
//go:noescape
func avx2Kernel4x16Float32(lhs, rhs, out *float32, contractingLen, outStride, accumulate int)

// asmKernelFloat32 is an assembly micro-kernel that computes one block of 4 rows × its width of
// a packed panel product and stores it into out (rows outStride elements apart), or adds it to
// out's values with accumulate ≠ 0: avx2Kernel4x16Float32 or avx512Kernel4x32Float32.
type asmKernelFloat32 func(lhs, rhs, out *float32, contractingLen, outStride, accumulate int)

// applyPackedFloat32 is avx2ApplyPackedOutputFloat32 or avx512ApplyPackedOutputFloat32.
type applyPackedFloat32 func(packedOutput, output []float32, isFirstContractingPanel bool, packedOutputRowStride,
	lhsRowOffset, rhsColOffset, outputRowStride, height, width int)

// asmPanelToOutputFloat32 is the panel product of largeKernelAsmFloat32 followed by the apply
// function (the output matrix's block at lhsRowOffset, rhsColOffset, rows outputRowStride apart,
// set to the product on the first contracting panel, else added to), with the whole blocks of 4
// rows × kernelCols written by the kernel straight into the output (agentrl patch 23). Before,
// every block went to the packed output and was copied or added from there: a second pass over
// the output panel per contracting panel, 10 % of a Qwen3-0.6B-width training step's CPU. The
// blocks at the panel's ragged edges still go through the packed output. Bit-identical to the
// two-pass form: each block is summed from zero over the panel as before and then added to the
// output with the same one addition.
func asmPanelToOutputFloat32(kernel asmKernelFloat32, kernelCols int, apply applyPackedFloat32,
	packedLHS, packedRHS, packedOutput, output []float32, isFirstContractingPanel bool,
	rhsPanelCols, contractingLen, lhsActiveRows, rhsActiveCols, lhsRowOffset, rhsColOffset, outputRowStride int) {
	const kernelRows = 4
	if lhsActiveRows <= 0 || rhsActiveCols <= 0 {
		return
	}
	fullRows := lhsActiveRows / kernelRows * kernelRows
	fullCols := rhsActiveCols / kernelCols * kernelCols
	if fullRows > 0 && fullCols > 0 {
		if contractingLen < 0 {
			panic(errors.Errorf("asmPanelToOutputFloat32: contracting length %d", contractingLen))
		}
		if contractingLen > 0 {
			_ = packedLHS[fullRows*contractingLen-1]
			_ = packedRHS[fullCols*contractingLen-1]
		}
		_ = output[(lhsRowOffset+fullRows-1)*outputRowStride+rhsColOffset+fullCols-1]
		if rhsColOffset+fullCols > outputRowStride {
			panic(errors.Errorf("asmPanelToOutputFloat32: columns %d-%d past the output's %d", rhsColOffset, rhsColOffset+fullCols, outputRowStride))
		}
		accumulate := 1
		if isFirstContractingPanel {
			accumulate = 0
		}
		lhs := unsafe.Pointer(unsafe.SliceData(packedLHS))
		rhs := unsafe.Pointer(unsafe.SliceData(packedRHS))
		out := unsafe.Pointer(unsafe.SliceData(output))
		for row := 0; row < fullRows; row += kernelRows {
			lhsBlock := (*float32)(unsafe.Add(lhs, row*contractingLen*4))
			outRow := unsafe.Add(out, ((lhsRowOffset+row)*outputRowStride+rhsColOffset)*4)
			for col := 0; col < fullCols; col += kernelCols {
				kernel(lhsBlock, (*float32)(unsafe.Add(rhs, col*contractingLen*4)), (*float32)(unsafe.Add(outRow, col*4)),
					contractingLen, outputRowStride, accumulate)
			}
		}
		runtime.KeepAlive(packedLHS)
		runtime.KeepAlive(packedRHS)
		runtime.KeepAlive(output)
	}
	// The ragged edges: the columns past the whole blocks on every row, then the rows past the
	// whole blocks on the whole blocks' columns, each through the packed output.
	if fullCols < rhsActiveCols {
		largeKernelAsmFloat32(kernel, kernelCols, packedLHS, packedRHS[fullCols*contractingLen:], packedOutput[fullCols:],
			rhsPanelCols, contractingLen, lhsActiveRows, rhsActiveCols-fullCols)
		apply(packedOutput[fullCols:], output, isFirstContractingPanel, rhsPanelCols,
			lhsRowOffset, rhsColOffset+fullCols, outputRowStride, lhsActiveRows, rhsActiveCols-fullCols)
	}
	if fullRows < lhsActiveRows && fullCols > 0 {
		largeKernelAsmFloat32(kernel, kernelCols, packedLHS[fullRows*contractingLen:], packedRHS, packedOutput[fullRows*rhsPanelCols:],
			rhsPanelCols, contractingLen, lhsActiveRows-fullRows, fullCols)
		apply(packedOutput[fullRows*rhsPanelCols:], output, isFirstContractingPanel, rhsPanelCols,
			lhsRowOffset+fullRows, rhsColOffset, outputRowStride, lhsActiveRows-fullRows, fullCols)
	}
}

// largeKernelAsmFloat32 is avx2LargeKernelFloat32 (kernelCols 16) or avx512LargeKernelFloat32
// (kernelCols 32) through their assembly kernel: the same blocks of 4 rows × kernelCols columns,
// each summed over the contracting axis in the same order with fused multiply-adds, so the
// results are bit-identical to the Go kernels'.
func largeKernelAsmFloat32(kernel asmKernelFloat32, kernelCols int, packedLHS, packedRHS, packedOutput []float32,
	rhsPanelCols, contractingLen, lhsActiveRows, rhsActiveCols int) {
	const kernelRows = 4
	if lhsActiveRows <= 0 || rhsActiveCols <= 0 {
		return
	}
	if contractingLen < 0 || rhsPanelCols < kernelCols {
		panic(errors.Errorf("largeKernelAsmFloat32: contracting length %d, panel columns %d, kernel columns %d", contractingLen, rhsPanelCols, kernelCols))
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
			kernel(lhsBlock,
				(*float32)(unsafe.Add(rhs, col*contractingLen*4)),
				(*float32)(unsafe.Add(out, (row*rhsPanelCols+col)*4)),
				contractingLen, rhsPanelCols, 0)
		}
	}
	runtime.KeepAlive(packedLHS)
	runtime.KeepAlive(packedRHS)
	runtime.KeepAlive(packedOutput)
}

// avx2ZeroFloat32 is 0 as a variable, for the Go kernels' zero vectors (agentrl patch 8): Go builds
// BroadcastFloat32x8(0.0) with a legacy-SSE XORPS, whose write keeps the register's upper half and
// so depends on its previous 256-bit value, which chains the loop's iterations together; a
// variable is broadcast from memory by VBROADCASTSS.
var avx2ZeroFloat32 float32

// avx2Dot2x4Float32 writes out0[c] and out1[c], c < 4: the dot products of lhs0 and lhs1 with the
// four RHS rows rhs, rhs+rhsStride, …, over chunks·8 elements, each accumulated and reduced as
// avx2SmallFloat32Transposed accumulates and reduces one output element (so bit-identical to it):
// eight independent accumulators where the Go kernel has one dependency chain per element, and the
// reductions in vector registers where it ends each element in scalar SSE code.
//
//go:noescape
func avx2Dot2x4Float32(lhs0, lhs1, rhs *float32, rhsStride, chunks int, out0, out1 *float32)

// avx2SmallTransposedAsmFloat32 is avx2SmallFloat32Transposed with blocks of 2 rows × 4 columns
// through avx2Dot2x4Float32 and the rest element by element as the Go kernel computes them; the
// contracting axis's last contractingSize%8 elements are added after the reduction, in order, as
// there.
func avx2SmallTransposedAsmFloat32(lhs, rhs []float32, batchStart, batchCount, lhsCrossSize, rhsCrossSize, contractingSize int,
	output []float32) {
	chunks := contractingSize / 8
	tail := chunks * 8
	lhsStride, rhsStride, outStride := lhsCrossSize*contractingSize, rhsCrossSize*contractingSize, lhsCrossSize*rhsCrossSize
	for b := batchStart; b < batchStart+batchCount; b++ {
		l := lhs[b*lhsStride : (b+1)*lhsStride]
		r := rhs[b*rhsStride : (b+1)*rhsStride]
		o := output[b*outStride : (b+1)*outStride]
		row := 0
		for ; row+2 <= lhsCrossSize; row += 2 {
			l0 := l[row*contractingSize : (row+1)*contractingSize]
			l1 := l[(row+1)*contractingSize : (row+2)*contractingSize]
			o0 := o[row*rhsCrossSize : (row+1)*rhsCrossSize]
			o1 := o[(row+1)*rhsCrossSize : (row+2)*rhsCrossSize]
			col := 0
			for ; col+4 <= rhsCrossSize; col += 4 {
				r4 := r[col*contractingSize : (col+4)*contractingSize]
				avx2Dot2x4Float32(&l0[0], &l1[0], &r4[0], contractingSize, chunks, &o0[col], &o1[col])
				for c := range 4 {
					rc := r4[c*contractingSize : (c+1)*contractingSize]
					for k := tail; k < contractingSize; k++ {
						o0[col+c] += l0[k] * rc[k]
						o1[col+c] += l1[k] * rc[k]
					}
				}
			}
			for ; col < rhsCrossSize; col++ {
				rc := r[col*contractingSize : (col+1)*contractingSize]
				o0[col] = avx2DotGoFloat32(l0, rc)
				o1[col] = avx2DotGoFloat32(l1, rc)
			}
		}
		for ; row < lhsCrossSize; row++ {
			lr := l[row*contractingSize : (row+1)*contractingSize]
			for col := range rhsCrossSize {
				o[row*rhsCrossSize+col] = avx2DotGoFloat32(lr, r[col*contractingSize:(col+1)*contractingSize])
			}
		}
	}
}

// avx2DotGoFloat32 is one output element of avx2SmallFloat32Transposed, computed as it does.
func avx2DotGoFloat32(l, r []float32) float32 {
	r = r[:len(l)]
	acc := archsimd.BroadcastFloat32x8(avx2ZeroFloat32)
	k := 0
	for ; k+8 <= len(l); k += 8 {
		acc = archsimd.LoadFloat32x8((*[8]float32)(l[k:])).MulAdd(archsimd.LoadFloat32x8((*[8]float32)(r[k:])), acc)
	}
	res := avx2ReduceSumFloat32x8(acc)
	for ; k < len(l); k++ {
		res += l[k] * r[k]
	}
	return res
}
