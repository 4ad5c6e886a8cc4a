// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

//go:build !amd64

package vectorstate

// UpperDirty cannot tell on this architecture: ok is false.
func UpperDirty() (dirty, ok bool) { return false, false }

// MakeDirty cannot on this architecture: ok is false.
func MakeDirty() (ok bool) { return false }
