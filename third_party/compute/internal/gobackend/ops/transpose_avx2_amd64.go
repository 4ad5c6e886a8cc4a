// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package ops

import "unsafe"

// transpose8x8BlocksAVX2 writes out[c*outRow + r] = in[r*inRow + c] for r < rows, c < cols,
// both multiples of 8 (transpose_avx2_amd64.s).
//
//go:noescape
func transpose8x8BlocksAVX2(in *float32, inRow int, out *float32, outRow int, rows, cols int)

// transposeTile4 transposes the tile in[r*inRow + c] (r < rows, c < cols) of 4-byte elements
// into out[c*outRow + r] with the AVX2 kernel, its rows and columns past the last multiple of 8
// element by element; false where AVX2 is off (agentrl patch 17).
func transposeTile4[T any](in, out []T, rows, cols, inRow, outRow int) bool {
	var zero T
	if !haveSIMDFloat32 || unsafe.Sizeof(zero) != 4 || rows == 0 || cols == 0 {
		return false
	}
	rows8, cols8 := rows&^7, cols&^7
	if rows8 > 0 && cols8 > 0 {
		// The corners the kernel reads and writes, checked as a slice index would be.
		_ = in[(rows8-1)*inRow+cols8-1]
		_ = out[(cols8-1)*outRow+rows8-1]
		transpose8x8BlocksAVX2((*float32)(unsafe.Pointer(&in[0])), inRow, (*float32)(unsafe.Pointer(&out[0])), outRow, rows8, cols8)
	}
	for r := range rows { // the columns past cols8, every row
		for c := cols8; c < cols; c++ {
			out[c*outRow+r] = in[r*inRow+c]
		}
	}
	for r := rows8; r < rows; r++ { // the rows past rows8, the columns before cols8
		for c := range cols8 {
			out[c*outRow+r] = in[r*inRow+c]
		}
	}
	return true
}
