// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package gobackend

import "sync"

// DefaultLargePoolBytes is the most bytes of freed large buffers a backend keeps for reuse.
const DefaultLargePoolBytes = 1 << 30

// largePool keeps freed buffers of fineBucketFrom bytes or more for reuse, at most limit bytes of
// them, the oldest dropped first (agentrl patch 25). They used to go to a sync.Pool like the
// small ones, but a sync.Pool's contents stay reachable until the second collection after they
// were put there, so the collector counts them as live: a Qwen3-0.6B training step whose buffers
// in use peaked at 15 GiB marked 23 GiB live and was killed for memory on a 24 GiB machine, with
// its heap limit (GOMEMLIMIT) below that, because the pooled logit chunks and weight-sized
// buffers could not be collected in time. Here what is kept is bounded and counted (Free), what
// is dropped is garbage the collector can free at once, and Trim empties it between phases.
// Training graphs repeat their large sizes (a logits chunk, the vocabulary matrix's gradient),
// so a bounded list still reuses most of them: not pooling them at all cost 10-19 % of a 0.6B-
// width micro-step in allocation and zeroing.
type largePool struct {
	mu    sync.Mutex
	limit int64
	bytes int64
	fifo  []*Buffer // freed order: the oldest first
}

// get takes a freed buffer of exactly n bytes (the newest), or nil.
func (p *largePool) get(n int) *Buffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.fifo) - 1; i >= 0; i-- {
		if b := p.fifo[i]; len(b.RawBytes) == n {
			p.fifo = append(p.fifo[:i], p.fifo[i+1:]...)
			p.bytes -= int64(n)
			return b
		}
	}
	return nil
}

// put keeps buf for reuse, dropping the oldest buffers kept while over the limit (buf itself
// when it alone is over it).
func (p *largePool) put(buf *Buffer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := int64(len(buf.RawBytes))
	if n > p.limit {
		return
	}
	p.fifo = append(p.fifo, buf)
	p.bytes += n
	drop := 0
	for p.bytes > p.limit {
		p.bytes -= int64(len(p.fifo[drop].RawBytes))
		p.fifo[drop] = nil
		drop++
	}
	p.fifo = p.fifo[drop:]
}

// setLimit changes the limit (dropping what is over it) and returns the previous one.
func (p *largePool) setLimit(n int64) int64 {
	p.mu.Lock()
	old := p.limit
	p.limit = max(n, 0)
	p.mu.Unlock()
	p.trimTo(p.limit)
	return old
}

// trimTo drops the oldest buffers kept until at most n bytes are.
func (p *largePool) trimTo(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	drop := 0
	for p.bytes > n {
		p.bytes -= int64(len(p.fifo[drop].RawBytes))
		p.fifo[drop] = nil
		drop++
	}
	p.fifo = append([]*Buffer(nil), p.fifo[drop:]...)
}

// free is the bytes kept now.
func (p *largePool) free() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}
