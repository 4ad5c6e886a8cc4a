// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package vectorstate

import (
	"runtime"
	"testing"
)

// TestClear: the CPU's own record of the upper state (XINUSE) says dirty after 256-bit code
// and clean after Clear.
func TestClear(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !MakeDirty() {
		t.Skip("this CPU has no AVX or cannot report XINUSE (XGETBV with ECX=1)")
	}
	if dirty, _ := UpperDirty(); !dirty {
		t.Fatal("XINUSE reports clean upper state right after a 256-bit load: this CPU does not track it, and the tests built on it prove nothing")
	}
	Clear()
	dirty, _ := UpperDirty()
	if Effective && dirty {
		t.Fatal("upper state still dirty after Clear")
	}
	if !Effective && !dirty {
		t.Fatal("Clear is a no-op in this build, yet the state is clean")
	}
}
