// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// func transpose8x8BlocksAVX2(in *float32, inRow int, out *float32, outRow int, rows, cols int)
//
// agentrl patch 17: out[c*outRow + r] = in[r*inRow + c] for r < rows, c < cols, both multiples of
// 8, by 8 × 8 blocks: eight rows loaded, transposed in registers (unpack, shuffle, 128-bit
// permute) and stored as eight rows. Y0-Y14 only (X15 is Go's zero register); VZEROUPPER at
// the end leaves no dirty upper state to the caller's scalar code.
TEXT ·transpose8x8BlocksAVX2(SB), NOSPLIT, $0-48
	MOVQ in+0(FP), SI
	MOVQ inRow+8(FP), R8
	SHLQ $2, R8               // input row stride, bytes
	MOVQ out+16(FP), DI
	MOVQ outRow+24(FP), R9
	SHLQ $2, R9               // output row stride, bytes
	MOVQ rows+32(FP), R10
	MOVQ cols+40(FP), R11
	LEAQ (R8)(R8*2), R12      // 3 input rows
	LEAQ (R9)(R9*2), R13      // 3 output rows
	TESTQ R11, R11
	JZ   done

rowloop:
	CMPQ R10, $8
	JLT  done
	MOVQ SI, AX               // the block's first input element
	MOVQ DI, CX               // its first output element
	MOVQ R11, DX              // columns left

colloop:
	LEAQ    (AX)(R8*4), BX
	VMOVUPS (AX), Y0
	VMOVUPS (AX)(R8*1), Y1
	VMOVUPS (AX)(R8*2), Y2
	VMOVUPS (AX)(R12*1), Y3
	VMOVUPS (BX), Y4
	VMOVUPS (BX)(R8*1), Y5
	VMOVUPS (BX)(R8*2), Y6
	VMOVUPS (BX)(R12*1), Y7

	// t0..t7: pairs of rows interleaved.
	VUNPCKLPS Y1, Y0, Y8      // t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5]
	VUNPCKHPS Y1, Y0, Y9      // t1
	VUNPCKLPS Y3, Y2, Y0      // t2
	VUNPCKHPS Y3, Y2, Y1      // t3
	VUNPCKLPS Y5, Y4, Y2      // t4
	VUNPCKHPS Y5, Y4, Y3      // t5
	VUNPCKLPS Y7, Y6, Y4      // t6
	VUNPCKHPS Y7, Y6, Y5      // t7

	// tt0..tt7: four rows' values of one column per 128-bit lane.
	VSHUFPS $0x44, Y0, Y8, Y6 // tt0 = shuf(t0, t2)
	VSHUFPS $0xEE, Y0, Y8, Y7 // tt1
	VSHUFPS $0x44, Y1, Y9, Y8 // tt2 = shuf(t1, t3)
	VSHUFPS $0xEE, Y1, Y9, Y0 // tt3
	VSHUFPS $0x44, Y4, Y2, Y9 // tt4 = shuf(t4, t6)
	VSHUFPS $0xEE, Y4, Y2, Y1 // tt5
	VSHUFPS $0x44, Y5, Y3, Y2 // tt6 = shuf(t5, t7)
	VSHUFPS $0xEE, Y5, Y3, Y4 // tt7

	// Output rows: the low lanes (0x20) and the high lanes (0x31) of rows 0-3 and 4-7.
	VPERM2F128 $0x20, Y9, Y6, Y10 // o0
	VPERM2F128 $0x31, Y9, Y6, Y11 // o4
	VPERM2F128 $0x20, Y1, Y7, Y12 // o1
	VPERM2F128 $0x31, Y1, Y7, Y13 // o5
	VPERM2F128 $0x20, Y2, Y8, Y14 // o2
	VPERM2F128 $0x31, Y2, Y8, Y3  // o6
	VPERM2F128 $0x20, Y4, Y0, Y5  // o3
	VPERM2F128 $0x31, Y4, Y0, Y6  // o7

	LEAQ    (CX)(R9*4), BX
	VMOVUPS Y10, (CX)
	VMOVUPS Y12, (CX)(R9*1)
	VMOVUPS Y14, (CX)(R9*2)
	VMOVUPS Y5, (CX)(R13*1)
	VMOVUPS Y11, (BX)
	VMOVUPS Y13, (BX)(R9*1)
	VMOVUPS Y3, (BX)(R9*2)
	VMOVUPS Y6, (BX)(R13*1)

	ADDQ $32, AX              // the next 8 input columns
	LEAQ (CX)(R9*8), CX       // are the next 8 output rows
	SUBQ $8, DX
	CMPQ DX, $8
	JGE  colloop

	LEAQ (SI)(R8*8), SI       // the next 8 input rows
	ADDQ $32, DI              // are the next 8 output columns
	SUBQ $8, R10
	JMP  rowloop

done:
	VZEROUPPER
	RET
