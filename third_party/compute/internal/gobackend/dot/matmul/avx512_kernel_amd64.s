// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func avx512Kernel4x32Float32(lhs, rhs, out *float32, contractingLen, outStride, accumulate int)
//
// The AVX-512 counterpart of avx2Kernel4x16Float32 (agentrl patch 15): Z0..Z7 are the 4 × 32
// accumulators (row r in Z(2r), Z(2r+1)); Z8, Z9 (Z14, Z15 in the second half of an iteration)
// hold 32 RHS values of a contracting step, Z10..Z13 the four broadcast LHS values; two
// contracting steps per iteration. Every accumulator takes one fused multiply-add per contracting
// step, in order, as avx512LargeKernelFloat32 does. Only Z0-Z15, so that the final VZEROUPPER
// leaves no upper state dirty (see package vectorstate).
TEXT ·avx512Kernel4x32Float32(SB), NOSPLIT, $0-48
	MOVQ lhs+0(FP), SI
	MOVQ rhs+8(FP), DI
	MOVQ out+16(FP), DX
	MOVQ contractingLen+24(FP), CX
	MOVQ outStride+32(FP), R8
	MOVQ accumulate+40(FP), R9
	SHLQ $2, R8

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

	MOVQ CX, BX
	SHRQ $1, BX
	JZ   tail

loop2:
	VMOVUPS      (DI), Z8
	VMOVUPS      64(DI), Z9
	VBROADCASTSS (SI), Z10
	VBROADCASTSS 4(SI), Z11
	VBROADCASTSS 8(SI), Z12
	VBROADCASTSS 12(SI), Z13
	VFMADD231PS  Z8, Z10, Z0
	VFMADD231PS  Z9, Z10, Z1
	VFMADD231PS  Z8, Z11, Z2
	VFMADD231PS  Z9, Z11, Z3
	VFMADD231PS  Z8, Z12, Z4
	VFMADD231PS  Z9, Z12, Z5
	VFMADD231PS  Z8, Z13, Z6
	VFMADD231PS  Z9, Z13, Z7

	VMOVUPS      128(DI), Z14
	VMOVUPS      192(DI), Z15
	VBROADCASTSS 16(SI), Z10
	VBROADCASTSS 20(SI), Z11
	VBROADCASTSS 24(SI), Z12
	VBROADCASTSS 28(SI), Z13
	VFMADD231PS  Z14, Z10, Z0
	VFMADD231PS  Z15, Z10, Z1
	VFMADD231PS  Z14, Z11, Z2
	VFMADD231PS  Z15, Z11, Z3
	VFMADD231PS  Z14, Z12, Z4
	VFMADD231PS  Z15, Z12, Z5
	VFMADD231PS  Z14, Z13, Z6
	VFMADD231PS  Z15, Z13, Z7

	ADDQ $32, SI
	ADDQ $256, DI
	DECQ BX
	JNZ  loop2

tail:
	ANDQ $1, CX
	JZ   store
	VMOVUPS      (DI), Z8
	VMOVUPS      64(DI), Z9
	VBROADCASTSS (SI), Z10
	VBROADCASTSS 4(SI), Z11
	VBROADCASTSS 8(SI), Z12
	VBROADCASTSS 12(SI), Z13
	VFMADD231PS  Z8, Z10, Z0
	VFMADD231PS  Z9, Z10, Z1
	VFMADD231PS  Z8, Z11, Z2
	VFMADD231PS  Z9, Z11, Z3
	VFMADD231PS  Z8, Z12, Z4
	VFMADD231PS  Z9, Z12, Z5
	VFMADD231PS  Z8, Z13, Z6
	VFMADD231PS  Z9, Z13, Z7

store:
	// accumulate ≠ 0 (agentrl patch 23): out + the block, the sum avx2ApplyPackedOutputFloat32
	// and avx512ApplyPackedOutputFloat32 form (packed + output), added in place so the block needs no packed copy.
	TESTQ R9, R9
	JNZ   accstore
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	ADDQ    R8, DX
	VMOVUPS Z2, (DX)
	VMOVUPS Z3, 64(DX)
	ADDQ    R8, DX
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	ADDQ    R8, DX
	VMOVUPS Z6, (DX)
	VMOVUPS Z7, 64(DX)
	VZEROUPPER
	RET

accstore:
	VADDPS  (DX), Z0, Z0
	VADDPS  64(DX), Z1, Z1
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Z2, Z2
	VADDPS  64(DX), Z3, Z3
	VMOVUPS Z2, (DX)
	VMOVUPS Z3, 64(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Z4, Z4
	VADDPS  64(DX), Z5, Z5
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Z6, Z6
	VADDPS  64(DX), Z7, Z7
	VMOVUPS Z6, (DX)
	VMOVUPS Z7, 64(DX)
	VZEROUPPER
	RET
