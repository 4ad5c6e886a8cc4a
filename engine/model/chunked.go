package model

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// BlocksInFlight is how many query blocks of chunked attention may be computed at once: block i
// starts after block i − BlocksInFlight has finished (a SchedulingBarrier on its results), so that a
// backend which runs ops as soon as their inputs are ready (the Go backend runs independent ops in
// parallel) holds at most this many blocks' [heads, block, S] scores, not all of them — and still
// has two blocks to run side by side on two cores.
const BlocksInFlight = 2

// blocks is chunked attention over one layer. Queries are cut into blocks along T; block [i0, i1)
// attends over keys [0, i1) only: with positions increasing along each row (as Pack and Score lay
// them out: 0, 1, … then −1 padding), no query sees a later token, so later keys would only be
// masked. Heads are batched as B·nKV, and each block's rows ordered (G, bq), so that every product
// is one of the Go backend's direct layouts ([batch, rows, k]·[batch, k or cols, …]) and no
// [block, S] tensor is transposed.
type blocks struct {
	n                          *Net
	b, t, s, nkv, g, hd, block int
	q                          *Node // [B, nKV, G, T, hd], already scaled by 1/√hd
	k, v                       *Node // [B·nKV, S, hd]
	qPos                       *Node // [B, T]
}

// newBlocks prepares chunked attention of q [B, T, nH, hd] (scaled) over k, v [B, S, nKV, hd]
// (S = T) for queries and keys at positions [B, T].
func (n *Net) newBlocks(q, k, v, positions *Node, block int) *blocks {
	c := n.Config
	a := &blocks{n: n, b: q.Shape().Dim(0), t: q.Shape().Dim(1), s: k.Shape().Dim(1), nkv: c.NumKVHeads,
		g: c.NumHeads / c.NumKVHeads, hd: c.HeadDim, block: block, qPos: positions}
	a.q = a.headsFirst(q)
	a.k = Reshape(TransposeAllAxes(k, 0, 2, 1, 3), a.b*a.nkv, a.s, a.hd)
	a.v = Reshape(TransposeAllAxes(v, 0, 2, 1, 3), a.b*a.nkv, a.s, a.hd)
	return a
}

// headsFirst lays x [B, T, nH, hd] out as [B, nKV, G, T, hd].
func (a *blocks) headsFirst(x *Node) *Node {
	return TransposeAllAxes(Reshape(x, a.b, a.t, a.nkv, a.g, a.hd), 0, 2, 3, 1, 4)
}

// ranges are the blocks' [start, end) along T.
func (a *blocks) ranges() [][2]int {
	var r [][2]int
	for i := 0; i < a.t; i += a.block {
		r = append(r, [2]int{i, min(i+a.block, a.t)})
	}
	return r
}

// rows cuts block r out of x [B, nKV, G, T, hd] as [B·nKV, G·bq, hd], after the nodes of after.
func (a *blocks) rows(x *Node, r [2]int, after []*Node) *Node {
	x = SliceAxis(x, 3, AxisRange(r[0], r[1]))
	if len(after) > 0 {
		x = SchedulingBarrier(x, after...)
	}
	return Reshape(x, a.b*a.nkv, a.g*(r[1]-r[0]), a.hd)
}

// keys cuts x [B·nKV, S, hd] (or positions [B, S]) to block r's keys [0, r[1]). The cut waits for
// the nodes of after: an early one would hold every block's copy at once, Σ r[1] ≈ S²/(2·block).
func keys(x *Node, r [2]int, after []*Node) *Node {
	if len(after) > 0 {
		x = SchedulingBarrier(x, after...)
	}
	return SliceAxis(x, 1, AxisRange(0, r[1]))
}

// probs are the softmax over keys [0, r[1]) (kb [B·nKV, Sk, hd]) of the queries qb [B·nKV, G·bq,
// hd] of block r (positions taken after the nodes of after), in float32 [B·nKV, G·bq, Sk]: the keys
// not visible (0 ≤ kPos ≤ qPos) get −1e30 added first, as in the dense path.
func (a *blocks) probs(qb, kb *Node, r [2]int, after []*Node) *Node {
	bq, sk := r[1]-r[0], r[1]
	pos := a.qPos
	if len(after) > 0 {
		pos = SchedulingBarrier(pos, after...)
	}
	qp := SliceAxis(pos, 1, AxisRange(r[0], r[1]))
	kp := ExpandAxes(SliceAxis(pos, 1, AxisRange(0, sk)), 1)                                     // [B, 1, Sk]
	visible := LogicalAnd(GreaterOrEqual(kp, ZerosLike(kp)), LessOrEqual(kp, ExpandAxes(qp, 2))) // [B, bq, Sk]
	g := qb.Graph()
	bias := Where(visible, Scalar(g, dtypes.Float32, 0), Scalar(g, dtypes.Float32, -1e30))
	s := ConvertDType(DotGeneral(qb, []int{2}, []int{0}, kb, []int{2}, []int{0}), dtypes.Float32) // [B·nKV, G·bq, Sk]
	s = Add(Reshape(s, a.b, a.nkv*a.g, bq*sk), Reshape(bias, a.b, 1, bq*sk))
	return Softmax(Reshape(s, a.b*a.nkv, a.g*bq, sk), -1)
}

// forward returns the attention output [B, T, nH·hd] in the compute dtype.
func (a *blocks) forward() *Node {
	var outs []*Node
	var done [][]*Node
	for i, r := range a.ranges() {
		after := lag(done, i)
		qb, kb, vb := a.rows(a.q, r, after), keys(a.k, r, after), keys(a.v, r, after)
		p := ConvertDType(a.probs(qb, kb, r, after), a.n.Compute)
		o := DotGeneral(p, []int{2}, []int{0}, vb, []int{1}, []int{0}) // [B·nKV, G·bq, hd]
		done = append(done, []*Node{o})
		outs = append(outs, Reshape(o, a.b, a.nkv, a.g, r[1]-r[0], a.hd))
	}
	o := concat(outs, 3) // [B, nKV, G, T, hd]
	return Reshape(TransposeAllAxes(o, 0, 3, 1, 2, 4), a.b, a.t, a.nkv*a.g*a.hd)
}

// backward returns the gradient of the packed [q, k, v] (axis 2: nH, nKV, nKV heads) given dO
// [B, T, nH, hd], block by block: P recomputed, dP = dO·Vᵀ, dS = P ⊙ (dP − Σ P ⊙ dP) (the
// softmax's closed form; Σ P ⊙ dP = rowsum(dO ⊙ O)), dQ = dS·K, and over the block's keys
// dKᵀ += Qᵀ·dS, dVᵀ += dOᵀ·P, accumulated in float32.
func (a *blocks) backward(dO *Node) *Node {
	dO = a.headsFirst(dO)
	bh, f32 := a.b*a.nkv, dtypes.Float32
	dkT, dvT := Zeros(dO.Graph(), shapes.Make(f32, bh, a.hd, a.s)), Zeros(dO.Graph(), shapes.Make(f32, bh, a.hd, a.s))
	var dqs []*Node
	var done [][]*Node
	for i, r := range a.ranges() {
		after := lag(done, i)
		qb, dob := a.rows(a.q, r, after), a.rows(dO, r, after)
		kb, vb := keys(a.k, r, after), keys(a.v, r, after)
		p := a.probs(qb, kb, r, after)
		dp := ConvertDType(DotGeneral(dob, []int{2}, []int{0}, vb, []int{2}, []int{0}), f32) // [B·nKV, G·bq, Sk]
		pdp := Mul(p, dp)
		ds := ConvertDType(Sub(pdp, Mul(p, ReduceAndKeep(pdp, ReduceSum, -1))), a.n.Compute)
		dq := DotGeneral(ds, []int{2}, []int{0}, kb, []int{1}, []int{0}) // [B·nKV, G·bq, hd]
		dki := DotGeneral(TransposeAllAxes(qb, 0, 2, 1), []int{2}, []int{0}, ds, []int{1}, []int{0})
		dvi := DotGeneral(TransposeAllAxes(dob, 0, 2, 1), []int{2}, []int{0}, ConvertDType(p, a.n.Compute), []int{1}, []int{0})
		done = append(done, []*Node{dq, dki, dvi})
		dqs = append(dqs, Reshape(dq, a.b, a.nkv, a.g, r[1]-r[0], a.hd))
		pad := func(x *Node) *Node { // [B·nKV, hd, Sk] → [B·nKV, hd, S] float32
			return Pad(ConvertDType(x, f32), Scalar(x.Graph(), f32, 0), PadAxis{}, PadAxis{}, PadAxis{End: a.s - r[1]})
		}
		dkT, dvT = Add(dkT, pad(dki)), Add(dvT, pad(dvi))
	}
	dq := Reshape(TransposeAllAxes(concat(dqs, 3), 0, 3, 1, 2, 4), a.b, a.t, a.nkv*a.g, a.hd)
	keys := func(xT *Node) *Node { // [B·nKV, hd, S] → [B, S, nKV, hd]
		return ConvertDType(TransposeAllAxes(Reshape(xT, a.b, a.nkv, a.hd, a.s), 0, 3, 1, 2), a.n.Compute)
	}
	return Concatenate([]*Node{dq, keys(dkT), keys(dvT)}, 2)
}

// lag is what block i waits for: the results of block i − BlocksInFlight (none for the first).
func lag(done [][]*Node, i int) []*Node {
	if i < BlocksInFlight {
		return nil
	}
	return done[i-BlocksInFlight]
}

func concat(xs []*Node, axis int) *Node {
	if len(xs) == 1 {
		return xs[0]
	}
	return Concatenate(xs, axis)
}
