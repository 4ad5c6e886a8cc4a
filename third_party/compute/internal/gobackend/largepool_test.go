// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package gobackend_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

const mib = 1 << 20

// f32MiB is the shape of a float32 buffer of n MiB: from 16 MiB the pool's buckets are
// sixteenths of a power of two, so n = 16, 20, 24, 32 MiB are buckets of exactly that size.
func f32MiB(n int) shapes.Shape { return shapes.Make(dtypes.Float32, n*mib/4) }

// TestLargePoolBounded (agentrl patch 25): freed buffers of 16 MiB and more are kept for reuse up
// to the backend's bound, the oldest dropped first; a buffer is reused only for its own bucket;
// one larger than the bound is never kept; TrimPools empties it.
func TestLargePoolBounded(t *testing.T) {
	cb, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Finalize()
	b := cb.(*gobackend.Backend)
	if old := b.SetLargePoolLimit(64 * mib); old != gobackend.DefaultLargePoolBytes {
		t.Errorf("default bound %d bytes; want %d", old, gobackend.DefaultLargePoolBytes)
	}
	get := func(n int) *gobackend.Buffer {
		t.Helper()
		buf, err := b.GetBuffer(f32MiB(n))
		if err != nil {
			t.Fatal(err)
		}
		if len(buf.RawBytes) != n*mib {
			t.Fatalf("a %d MiB buffer has %d raw bytes", n, len(buf.RawBytes))
		}
		return buf
	}
	a, c, d := get(16), get(20), get(24)
	for _, step := range []struct {
		what string
		put  *gobackend.Buffer
		free int64
	}{
		{"16 MiB freed", a, 16 * mib},
		{"20 MiB freed", c, 36 * mib},
		{"24 MiB freed", d, 60 * mib},
	} {
		b.PutBuffer(step.put)
		if got := b.LargePoolFree(); got != step.free {
			t.Errorf("%s: %d bytes kept; want %d", step.what, got, step.free)
		}
	}
	e := get(32) // none kept of its bucket: a new one
	if e == a || e == c || e == d {
		t.Error("a 32 MiB buffer reused a smaller one")
	}
	b.PutBuffer(e) // 92 MiB > 64: the oldest (16, then 20) dropped
	if got := b.LargePoolFree(); got != 56*mib {
		t.Errorf("over the bound: %d bytes kept; want %d (24 + 32 MiB)", got, 56*mib)
	}
	if again := get(24); again != d {
		t.Error("the kept 24 MiB buffer was not reused")
	}
	if again := get(16); again == a {
		t.Error("the dropped 16 MiB buffer came back")
	}
	b.PutBuffer(get(16))
	b.SetLargePoolLimit(8 * mib) // under the smallest large buffer: nothing kept
	if got := b.LargePoolFree(); got != 0 {
		t.Errorf("bound lowered to 8 MiB: %d bytes kept; want 0", got)
	}
	b.PutBuffer(get(20))
	if got := b.LargePoolFree(); got != 0 {
		t.Errorf("a buffer over the bound kept: %d bytes", got)
	}
	b.SetLargePoolLimit(64 * mib)
	b.PutBuffer(get(20))
	b.TrimPools()
	if got := b.LargePoolFree(); got != 0 {
		t.Errorf("after TrimPools %d bytes kept; want 0", got)
	}
}

// TestFreedLargeBuffersCollectable (agentrl patch 25): what the collector marks live after large
// buffers are freed is at most the pool's bound. A sync.Pool (the small buffers' pools, and the
// large ones' before the patch) keeps its contents reachable until the second collection after
// they were put, so one collection would count all 512 MiB here as live and a heap limit could
// not make room for them: that is how a 0.6B training step was killed for memory above its plan.
// The figure is the collector's own count of marked bytes after collections the test starts
// itself (automatic ones are off), the same under any load.
func TestFreedLargeBuffersCollectable(t *testing.T) {
	cb, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Finalize()
	b := cb.(*gobackend.Backend)
	b.SetLargePoolLimit(64 * mib)
	// Only the test's own collections run: an automatic one between the frees and the count would
	// let a sync.Pool's contents go too.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	live := func() int64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	base := live()
	bufs := make([]*gobackend.Buffer, 16)
	for i := range bufs {
		if bufs[i], err = b.GetBuffer(f32MiB(32)); err != nil {
			t.Fatal(err)
		}
	}
	if held := live() - base; held < 500*mib {
		t.Fatalf("16 buffers of 32 MiB in use: %d MiB live; want about 512", held/mib)
	}
	for _, buf := range bufs {
		b.PutBuffer(buf)
	}
	bufs = nil
	if after := live() - base; after > 64*mib+8*mib {
		t.Errorf("after freeing 512 MiB of buffers, one collection marks %d MiB live; want at most the pool's 64 MiB (and 8 MiB of slack)", after/mib)
	}
	if kept := b.LargePoolFree(); kept != 64*mib {
		t.Errorf("%d MiB kept for reuse; want the bound, 64", kept/mib)
	}
}
