// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

#include "textflag.h"

// func xgetbv1Supported() bool
TEXT ·xgetbv1Supported(SB), NOSPLIT, $0-1
	MOVL $1, AX
	XORL CX, CX
	CPUID
	BTL  $27, CX // OSXSAVE
	JCC  no
	BTL  $28, CX // AVX
	JCC  no
	MOVL $0xD, AX
	MOVL $1, CX
	CPUID
	BTL  $2, AX // XGETBV with ECX=1
	JCC  no
	MOVB $1, ret+0(FP)
	RET
no:
	MOVB $0, ret+0(FP)
	RET

// func xinuse() uint64
TEXT ·xinuse(SB), NOSPLIT, $0-8
	MOVL  $1, CX
	XGETBV
	SHLQ  $32, DX
	ORQ   DX, AX
	MOVQ  AX, ret+0(FP)
	RET

// func dirtyUpper(p *[8]float32)
TEXT ·dirtyUpper(SB), NOSPLIT, $0-8
	MOVQ    p+0(FP), AX
	VMOVUPS (AX), Y3
	RET
