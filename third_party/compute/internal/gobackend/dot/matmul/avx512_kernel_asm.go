// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package matmul

import "simd/archsimd"

// avx512AsmKernel reports whether the AVX-512 assembly micro-kernel can run here (AVX-512F, which
// the 512-bit VFMADD231PS, VBROADCASTSS and VMOVUPS need).
var avx512AsmKernel = archsimd.X86.AVX512()

// avx512Kernel4x32Float32 computes one 4 × 32 block of a packed panel product and stores it into
// out (or, with accumulate ≠ 0, adds it to out's values: agentrl patch 23), whose rows are
// outStride elements apart:
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
func avx512Kernel4x32Float32(lhs, rhs, out *float32, contractingLen, outStride, accumulate int)
