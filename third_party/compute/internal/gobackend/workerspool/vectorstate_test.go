// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package workerspool

import (
	"runtime"
	"testing"

	"github.com/gomlx/compute/internal/vectorstate"
)

// TestRunTaskClearsVectorState (agentrl patch 13): a task that leaves the upper vector state
// dirty, as the SIMD kernels do, leaves it clean once the pool's task runner returns, before the
// worker's thread runs other Go code.
func TestRunTaskClearsVectorState(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !vectorstate.MakeDirty() {
		t.Skip("this CPU has no AVX or cannot report XINUSE (XGETBV with ECX=1)")
	}
	if dirty, _ := vectorstate.UpperDirty(); !dirty {
		t.Skip("this CPU does not report dirty upper state after a 256-bit load")
	}
	ran := false
	runTask(func() { ran = vectorstate.MakeDirty() })
	if !ran {
		t.Fatal("the task did not run")
	}
	if dirty, _ := vectorstate.UpperDirty(); dirty && vectorstate.Effective {
		t.Error("upper vector state dirty after runTask")
	}
	// And through the pool's inline path (no parallelism), which runs on this thread.
	p := New()
	p.SetMaxParallelism(0)
	for name, run := range map[string]func(func()){"WaitToStart": p.WaitToStart, "Saturate": p.Saturate} {
		run(func() { vectorstate.MakeDirty() })
		if dirty, _ := vectorstate.UpperDirty(); dirty && vectorstate.Effective {
			t.Errorf("upper vector state dirty after %s", name)
		}
	}
}
