// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

// Package vectorstate puts the CPU's vector registers back in a state where scalar code runs at
// full speed (agentrl patch 13, PATCHES.md).
//
// Go compiles scalar floating-point code (and small copies) to legacy SSE instructions, which
// write only the low 128 bits of a vector register. After 256- or 512-bit AVX code has left the
// upper bits of the registers non-zero ("dirty"), every such instruction on an Intel CPU since
// Skylake depends on the register's previous value and merges into it: independent scalar work
// is chained, an extra micro-op is paid per instruction, and with dirty 512-bit state a vector
// port stays shut. AMD CPUs do not pay for it. Go (1.26) does not clear the state itself
// (archsimd.ClearAVXUpperBits says a later compiler may), and GoMLX's SIMD kernels never did:
// on an AVX-512 Xeon the SIMD kernel sets trained 1.4× and decoded 2.6× slower than the portable
// ones, while they were 3× faster on AMD.
//
// Clear is called where the Go backend returns to other code after work that may have used the
// vector registers: after each node's executor, and after each task of the workers' pool (its
// goroutines run on other threads, whose state is their own). One VZEROUPPER each time.
package vectorstate
