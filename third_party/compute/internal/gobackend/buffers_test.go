// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package gobackend_test

import (
	"runtime"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/compute/support/testutil"
)

func TestBuffers_Bytes(t *testing.T) {
	buf, err := backend.(*gobackend.Backend).GetBuffer(shapes.Make(dtypes.Int32, 3))
	if err != nil {
		t.Fatalf("Failed to get buffer: %+v", err)
	}
	buf.Zeros()
	if len(buf.Flat.([]int32)) != 3 {
		t.Fatalf("Expected length 3, got %d", len(buf.Flat.([]int32)))
	}
	flatBytes, err := buf.MutableBytes()
	if err != nil {
		t.Fatalf("Failed to get mutable bytes: %+v", err)
	}
	if len(flatBytes) != 3*int(dtypes.Int32.Size()) {
		t.Fatalf("Expected length %d, got %d", 3*int(dtypes.Int32.Size()), len(flatBytes))
	}
	flatBytes[0] = 1
	flatBytes[4] = 7
	flatBytes[8] = 3
	if ok, diff := testutil.IsEqual([]int32{1, 7, 3}, buf.Flat.([]int32)); !ok {
		t.Fatalf("Unexpected result (-want +got):\n%s", diff)
	}
	runtime.KeepAlive(buf)
}

func TestBuffers_Fill(t *testing.T) {
	buf, err := backend.(*gobackend.Backend).GetBuffer(shapes.Make(dtypes.Int32, 3))
	if err != nil {
		t.Fatalf("Failed to get buffer: %+v", err)
	}
	if len(buf.Flat.([]int32)) != 3 {
		t.Fatalf("Expected length 3, got %d", len(buf.Flat.([]int32)))
	}
	if err := buf.Fill(int32(3)); err != nil {
		t.Fatalf("Failed to fill buffer: %+v", err)
	}
	if ok, diff := testutil.IsEqual([]int32{3, 3, 3}, buf.Flat.([]int32)); !ok {
		t.Fatalf("Unexpected result (-want +got):\n%s", diff)
	}

	buf.Zeros()
	if ok, diff := testutil.IsEqual([]int32{0, 0, 0}, buf.Flat.([]int32)); !ok {
		t.Fatalf("Unexpected result (-want +got):\n%s", diff)
	}
}

// TestBucketLen: buffers from 16 MiB take at most a sixteenth more than asked (Qwen3-0.6B's
// float32 embedding, 593.5 MiB, took 768 MiB in TwoBitBucketLen's halves), smaller ones keep
// TwoBitBucketLen's buckets, and a size takes the same bucket every time (pools reuse).
func TestBucketLen(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ n, want int }{
		{3, 3},
		{4000, 4096},                   // 2^12
		{5000, 6144},                   // 1.5·2^12
		{16*mib - 1, 16 * mib},         // below fineBucketFrom: TwoBitBucketLen
		{16 * mib, 16 * mib},           // a power of two is its own bucket
		{16*mib + 1, 17 * mib},         // a sixteenth of 16 MiB is 1 MiB
		{151936 * 1024 * 4, 608 * mib}, // the embedding: 593.5 MiB in steps of 32 MiB
		{3072 * 1024 * 4, 12 * mib},    // below: 1.5·2^23
	} {
		got := gobackend.BucketLen(c.n)
		if got != c.want {
			t.Errorf("bucketLen(%d) = %d; want %d", c.n, got, c.want)
		}
		if got < c.n || c.n >= 16*mib && float64(got) > 1.0625*float64(c.n) {
			t.Errorf("bucketLen(%d) = %d: below the size or more than a sixteenth above", c.n, got)
		}
	}
	b := backend.(*gobackend.Backend)
	buf, err := b.GetBuffer(shapes.Make(dtypes.Float32, 151936, 32))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(buf.RawBytes), gobackend.BucketLen(151936*32*4); got != want {
		t.Errorf("GetBuffer of %d bytes holds %d; want its bucket %d", 151936*32*4, got, want)
	}
	b.PutBuffer(buf)
}
