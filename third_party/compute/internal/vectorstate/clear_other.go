// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build !amd64 || !goexperiment.simd

package vectorstate

// Clear does nothing: without GOEXPERIMENT=simd on amd64 the backend runs no Go vector code, and
// its assembly kernels clear the state themselves.
func Clear() {}

// Effective says whether Clear executes anything in this build (for tests of its callers).
const Effective = false
