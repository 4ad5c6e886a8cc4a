// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func avx2Kernel4x16Float32(lhs, rhs, out *float32, contractingLen, outStride, accumulate int)
//
// Y0..Y7: the 4 × 16 accumulators (row r in Y(2r), Y(2r+1)); Y8, Y9: 16 RHS values of one
// contracting step; Y10, Y11: broadcast LHS values. Two contracting steps per iteration.
TEXT ·avx2Kernel4x16Float32(SB), NOSPLIT, $0-48
	MOVQ lhs+0(FP), SI
	MOVQ rhs+8(FP), DI
	MOVQ out+16(FP), DX
	MOVQ contractingLen+24(FP), CX
	MOVQ outStride+32(FP), R8
	MOVQ accumulate+40(FP), R9
	SHLQ $2, R8

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

	MOVQ CX, BX
	SHRQ $1, BX
	JZ   tail

loop2:
	VMOVUPS      (DI), Y8
	VMOVUPS      32(DI), Y9
	VBROADCASTSS (SI), Y10
	VBROADCASTSS 4(SI), Y11
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS 8(SI), Y10
	VBROADCASTSS 12(SI), Y11
	VFMADD231PS  Y8, Y10, Y4
	VFMADD231PS  Y9, Y10, Y5
	VFMADD231PS  Y8, Y11, Y6
	VFMADD231PS  Y9, Y11, Y7

	VMOVUPS      64(DI), Y8
	VMOVUPS      96(DI), Y9
	VBROADCASTSS 16(SI), Y10
	VBROADCASTSS 20(SI), Y11
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS 24(SI), Y10
	VBROADCASTSS 28(SI), Y11
	VFMADD231PS  Y8, Y10, Y4
	VFMADD231PS  Y9, Y10, Y5
	VFMADD231PS  Y8, Y11, Y6
	VFMADD231PS  Y9, Y11, Y7

	ADDQ $32, SI
	ADDQ $128, DI
	DECQ BX
	JNZ  loop2

tail:
	ANDQ $1, CX
	JZ   store
	VMOVUPS      (DI), Y8
	VMOVUPS      32(DI), Y9
	VBROADCASTSS (SI), Y10
	VBROADCASTSS 4(SI), Y11
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS 8(SI), Y10
	VBROADCASTSS 12(SI), Y11
	VFMADD231PS  Y8, Y10, Y4
	VFMADD231PS  Y9, Y10, Y5
	VFMADD231PS  Y8, Y11, Y6
	VFMADD231PS  Y9, Y11, Y7

store:
	// accumulate ≠ 0 (agentrl patch 23): out + the block, the sum avx2ApplyPackedOutputFloat32
	// and avx512ApplyPackedOutputFloat32 form (packed + output), added in place so the block needs no packed copy.
	TESTQ R9, R9
	JNZ   accstore
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VZEROUPPER
	RET

accstore:
	VADDPS  (DX), Y0, Y0
	VADDPS  32(DX), Y1, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y2, Y2
	VADDPS  32(DX), Y3, Y3
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y4, Y4
	VADDPS  32(DX), Y5, Y5
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y6, Y6
	VADDPS  32(DX), Y7, Y7
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	VZEROUPPER
	RET

// func avx2Dot2x4Float32(lhs0, lhs1, rhs *float32, rhsStride, chunks int, out0, out1 *float32)
//
// out_r[c] = the dot product of lhs_r and rhs row c (c < 4, rows rhsStride elements apart) over
// chunks·8 elements, accumulated and reduced exactly as avx2SmallFloat32Transposed does for one
// output element: one accumulator per output, a fused multiply-add per 8-element chunk in order,
// then (hi + lo), pairwise sums, and their sum. Y0-Y3: row 0 × columns 0-3, Y4-Y7: row 1.
TEXT ·avx2Dot2x4Float32(SB), NOSPLIT, $0-56
	MOVQ lhs0+0(FP), SI
	MOVQ lhs1+8(FP), DI
	MOVQ rhs+16(FP), BX
	MOVQ rhsStride+24(FP), AX
	SHLQ $2, AX
	LEAQ (BX)(AX*1), R8
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	MOVQ chunks+32(FP), CX

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ  CX, CX
	JLE    reduce

dotloop:
	VMOVUPS     (SI), Y8
	VMOVUPS     (DI), Y9
	VMOVUPS     (BX), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	VMOVUPS     (R8), Y11
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS     (R9), Y10
	VFMADD231PS Y10, Y8, Y2
	VFMADD231PS Y10, Y9, Y6
	VMOVUPS     (R10), Y11
	VFMADD231PS Y11, Y8, Y3
	VFMADD231PS Y11, Y9, Y7
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, BX
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $32, R10
	DECQ        CX
	JNZ         dotloop

reduce:
	// x4 = hi + lo for each accumulator (hi the first operand, as GetHi().Add(GetLo())).
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X0, X8, X0
	VEXTRACTF128 $1, Y1, X8
	VADDPS       X1, X8, X1
	VEXTRACTF128 $1, Y2, X8
	VADDPS       X2, X8, X2
	VEXTRACTF128 $1, Y3, X8
	VADDPS       X3, X8, X3
	VEXTRACTF128 $1, Y4, X8
	VADDPS       X4, X8, X4
	VEXTRACTF128 $1, Y5, X8
	VADDPS       X5, X8, X5
	VEXTRACTF128 $1, Y6, X8
	VADDPS       X6, X8, X6
	VEXTRACTF128 $1, Y7, X8
	VADDPS       X7, X8, X7

	// [a0+a1, a2+a3, b0+b1, b2+b3], [c0+c1, c2+c3, d0+d1, d2+d3], then
	// [(a0+a1)+(a2+a3), (b0+b1)+(b2+b3), (c…), (d…)].
	VHADDPS X1, X0, X0
	VHADDPS X3, X2, X2
	VHADDPS X2, X0, X0
	VHADDPS X5, X4, X4
	VHADDPS X7, X6, X6
	VHADDPS X6, X4, X4

	MOVQ    out0+40(FP), DX
	VMOVUPS X0, (DX)
	MOVQ    out1+48(FP), DX
	VMOVUPS X4, (DX)
	VZEROUPPER
	RET
