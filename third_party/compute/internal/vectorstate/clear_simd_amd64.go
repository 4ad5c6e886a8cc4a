// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build amd64 && goexperiment.simd

package vectorstate

import "simd/archsimd"

var haveAVX = archsimd.X86.AVX()

// Effective says whether Clear executes anything in this build (for tests of its callers).
const Effective = true

// Clear zeroes the upper bits of the vector registers (VZEROUPPER) where the CPU has AVX. The
// registers' contents are not preserved: call it where no vector value is live.
func Clear() {
	if haveAVX {
		archsimd.ClearAVXUpperBits()
	}
}
