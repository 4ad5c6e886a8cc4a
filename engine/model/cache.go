package model

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// KV caches for continuous batching.
//
// Each layer has a key and a value cache shaped [S, nKV, L, hd] (S slots, nKV key/value heads, L
// rows), in the compute dtype. Row p of a slot's head holds the key/value of the token at position
// p of that slot's sequence. A query at position q sees rows 0..q of its own slot, so rows left
// over from an earlier trajectory in the same slot are never visible: a new trajectory rewrites
// rows 0..q before it attends to them, and resetting a slot costs nothing.
//
// The heads axis comes before the rows so that attention reads a slot's keys and values in the
// layout its two matrix products take ([batch, heads, rows, hd]): with rows first, every decode
// step transposed the whole attended part of every cache (a third of a CPU decode step).

// CacheShape is the shape of one layer's key (or value) cache.
func CacheShape(c *Config, dt dtypes.DType, slots, rows int) shapes.Shape {
	return shapes.Make(dt, slots, c.NumKVHeads, rows, c.HeadDim)
}

// CacheBytes is the size of all layers' key and value caches.
func CacheBytes(c *Config, dt dtypes.DType, slots, rows int) int64 {
	return 2 * int64(c.NumLayers) * CacheShape(c, dt, slots, rows).ByteSize()
}

// writeRows stores update [P, C, nKV, hd] into cache [S, nKV, L, hd] at rows positions [P, C] of
// slots slotIdx [P] (nil: lane p is slot p, P = S); entries whose position is negative are skipped.
// It uses two ScatterSums — one adding the negated old rows (x + (−x) is exactly 0), one adding the
// new values — so the result is bit-exact and only the written rows are touched (the Go backend
// has no DynamicUpdateSlice).
func writeRows(cache, update, positions, slotIdx *Node) *Node {
	g := cache.Graph()
	p, c, kv := positions.Shape().Dim(0), positions.Shape().Dim(1), update.Shape().Dim(2)
	valid := GreaterOrEqual(positions, ZerosLike(positions)) // [P, C]
	rows := Where(valid, positions, ZerosLike(positions))    // invalid → row 0, with a zero update
	var slot *Node
	if slotIdx == nil {
		slot = Iota(g, shapes.Make(dtypes.Int32, p, c, kv), 0) // [P, C, nKV]
	} else {
		slot = BroadcastToDims(Reshape(ConvertDType(slotIdx, dtypes.Int32), p, 1, 1), p, c, kv)
	}
	head := Iota(g, shapes.Make(dtypes.Int32, p, c, kv), 2)
	row := BroadcastToDims(ExpandAxes(ConvertDType(rows, dtypes.Int32), -1), p, c, kv)
	idx := Stack([]*Node{slot, head, row}, -1)                           // [P, C, nKV, 3]
	keep := ConvertDType(Reshape(valid, p, c, 1, 1), cache.DType())      // [P, C, 1, 1]
	old := Gather(cache, idx)                                            // [P, C, nKV, hd]
	cleared := ScatterSum(cache, idx, Mul(Neg(old), keep), false, false) // written rows → 0
	return ScatterSum(cleared, idx, Mul(update, keep), false, false)     // → update
}

// Step runs new tokens [P, C] at positions [P, C] (negative = no token in that place) through the
// decoder, appending their keys and values to caches [S, L, nKV, hd] (2 per layer: k0, v0, k1, v1,
// …), and attends over the first bucket rows of each lane's slot (bucket must exceed every position
// in the step). Lane p works on slot slotIdx[p] ([P] int32; nil means lane p is slot p and P = S):
// a prefill of a few slots runs with few lanes instead of padding every slot to the chunk length.
// It returns the final normalised hidden state of the token at index last[p] of each lane's chunk,
// [P, H], and the updated caches.
func (n *Net) Step(tokens, positions, last, slotIdx *Node, caches []*Node, bucket int) (*Node, []*Node) {
	c := n.Config
	if len(caches) != 2*c.NumLayers {
		panicf("model step: got %d caches, want %d", len(caches), 2*c.NumLayers)
	}
	p := tokens.Shape().Dim(0)
	x := n.Embed(tokens)
	rope := n.NewRope(positions)
	rowPos := Iota(n.g, shapes.Make(dtypes.Int32, p, bucket), 1) // row index = position
	out := make([]*Node, len(caches))
	rowsOf := func(cache *Node) *Node {
		b := cache // [S, nKV, L, hd]
		if bucket < cache.Shape().Dim(2) {
			b = SliceAxis(cache, 2, AxisRange(0, bucket)) // [S, nKV, bucket, hd]
		}
		if slotIdx == nil {
			return b
		}
		return Gather(b, ExpandAxes(ConvertDType(slotIdx, dtypes.Int32), -1)) // [P, nKV, bucket, hd]
	}
	for l := 0; l < c.NumLayers; l++ {
		q, k, v := n.QKV(l, n.LayerPre(l, x), rope)
		kc := writeRows(caches[2*l], k, positions, slotIdx)
		vc := writeRows(caches[2*l+1], v, positions, slotIdx)
		out[2*l], out[2*l+1] = kc, vc
		x = n.LayerPost(l, x, n.attendHeadsFirst(q, rowsOf(kc), rowsOf(vc), positions, rowPos))
	}
	h := n.rmsNorm(x, nameNorm)                                                 // [P, C, H]
	idx := Stack([]*Node{Iota(n.g, shapes.Make(dtypes.Int32, p), 0), last}, -1) // [P, 2]
	return Gather(h, idx), out                                                  // [P, H]
}
