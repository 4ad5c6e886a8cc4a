// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package gobackend

import "sync/atomic"

// HeldBytes counts the bytes of the backend's buffers that are in use: taken by GetBuffer (for an
// op's output, a transfer from the host or a shared buffer) and not yet given back by PutBuffer
// or Finalize, and the most that were in use at once since the last ResetPeak. Buffers waiting in
// the pools for reuse are not held. The count moves only where a buffer changes hands, so it is
// the same whatever else the process or the machine is doing (unlike a sampled heap figure); a
// buffer dropped without Finalize stays counted until the program finalizes it (agentrl patch 20).
type HeldBytes struct {
	now, peak atomic.Int64
}

func (h *HeldBytes) acquire(n int64) {
	now := h.now.Add(n)
	for {
		p := h.peak.Load()
		if now <= p || h.peak.CompareAndSwap(p, now) {
			return
		}
	}
}

func (h *HeldBytes) release(n int64) { h.now.Add(-n) }

// Now is the bytes held now.
func (h *HeldBytes) Now() int64 { return h.now.Load() }

// Peak is the most bytes held at once since the last ResetPeak (or since the backend started).
func (h *HeldBytes) Peak() int64 { return h.peak.Load() }

// ResetPeak starts a new peak from the bytes held now.
func (h *HeldBytes) ResetPeak() { h.peak.Store(h.now.Load()) }
