// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package gobackend_test

import (
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// TestHeldBytes (agentrl patch 20): the held count follows every buffer from GetBuffer to
// PutBuffer or Finalize, pooled reuse included, and the peak is the most held at once since the
// last ResetPeak. Buffer sizes are the pool's buckets: 1000 float32 (4,000 bytes) takes a 4,096
// bucket, 3 int32 (12 bytes) a 12-byte one.
func TestHeldBytes(t *testing.T) {
	cb, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Finalize()
	b := cb.(*gobackend.Backend)
	h := &b.Held
	base := h.Now()
	h.ResetPeak()
	step := func(what string, wantNow, wantPeak int64) {
		t.Helper()
		if got := h.Now() - base; got != wantNow {
			t.Errorf("%s: held %d bytes; want %d", what, got, wantNow)
		}
		if got := h.Peak() - base; got != wantPeak {
			t.Errorf("%s: peak %d bytes; want %d", what, got, wantPeak)
		}
	}
	big, err := b.GetBuffer(shapes.Make(dtypes.Float32, 1000))
	if err != nil {
		t.Fatal(err)
	}
	bucket := int64(len(big.RawBytes))
	if bucket < 4000 {
		t.Fatalf("a buffer of 4000 bytes has %d raw bytes", bucket)
	}
	step("one buffer", bucket, bucket)
	small, err := b.GetBuffer(shapes.Make(dtypes.Int32, 3))
	if err != nil {
		t.Fatal(err)
	}
	sb := int64(len(small.RawBytes))
	step("two buffers", bucket+sb, bucket+sb)
	b.PutBuffer(big)
	step("the first back in the pool", sb, bucket+sb)
	again, err := b.GetBuffer(shapes.Make(dtypes.Float32, 1000)) // reused from the pool
	if err != nil {
		t.Fatal(err)
	}
	step("the pooled buffer taken again", bucket+sb, bucket+sb)
	if err := small.Finalize(); err != nil {
		t.Fatal(err)
	}
	step("one finalized", bucket, bucket+sb)
	h.ResetPeak()
	step("after ResetPeak", bucket, bucket)
	fed, err := b.BufferFromFlatData(0, make([]float32, 1000), shapes.Make(dtypes.Float32, 1000))
	if err != nil {
		t.Fatal(err)
	}
	step("a buffer fed from the host", 2*bucket, 2*bucket)
	b.PutBuffer(fed.(*gobackend.Buffer)) // a fed buffer is finalized, not pooled
	b.PutBuffer(again)
	step("all given back", 0, 2*bucket)
}
