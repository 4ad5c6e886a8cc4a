// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build !(amd64 && goexperiment.simd)

package ops

// transposeTile4 is the AVX2 tile transpose of transpose_avx2_amd64.go, absent here: patch 1's
// element-by-element tiles run instead.
func transposeTile4[T any](in, out []T, rows, cols, inRow, outRow int) bool { return false }
