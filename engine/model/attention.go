package model

import (
	"fmt"
	"math"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// AttentionKind is how Net.Forward computes causal self-attention over whole sequences (the
// trainer's loss, the reference/teacher forward, scoring). The KV-cache decode path is always dense.
type AttentionKind string

const (
	// AttentionAuto: fused where the backend has the op (and takes the dtype), else chunked for
	// sequences longer than the block, else dense.
	AttentionAuto AttentionKind = "auto"
	// AttentionDense materialises the scores and probabilities of every query: [B, heads, T, S].
	AttentionDense AttentionKind = "dense"
	// AttentionChunked computes blocks of queries one after another, in the forward and in the
	// backward pass, so one block's [B, heads, block, S] probabilities exist at a time.
	AttentionChunked AttentionKind = "chunked"
	// AttentionFused is the backend's fused attention op (cuDNN flash attention on XLA CUDA, with
	// its fused backward); chunked where the backend lacks it or refuses the call.
	AttentionFused AttentionKind = "fused"
)

// DefaultAttentionBlock is the query block of chunked attention when Options leave it 0.
const DefaultAttentionBlock = 256

// ParseAttention reads a recipe's train.attention ("" is auto).
func ParseAttention(s string) (AttentionKind, error) {
	switch k := AttentionKind(s); k {
	case "":
		return AttentionAuto, nil
	case AttentionAuto, AttentionDense, AttentionChunked, AttentionFused:
		return k, nil
	}
	return "", fmt.Errorf("attention %q is not one of auto, dense, chunked, fused", s)
}

// ChooseAttention resolves kind for sequences of seqLen tokens, where fused says whether the
// backend's fused op serves this model and dtype (see FusedAttentionAvailable): auto is fused when
// it does, chunked when seqLen exceeds block, dense otherwise (at or below one block chunking saves
// nothing); fused without the op is chunked.
func ChooseAttention(kind AttentionKind, fused bool, seqLen, block int) AttentionKind {
	switch kind {
	case AttentionDense, AttentionChunked:
		return kind
	case AttentionFused:
		if fused {
			return AttentionFused
		}
		return AttentionChunked
	}
	switch {
	case fused:
		return AttentionFused
	case seqLen > block:
		return AttentionChunked
	}
	return AttentionDense
}

// FusedAttentionAvailable reports whether backend b lists the fused attention op and the call would
// be one it serves: XLA's cuDNN flash attention takes float16/bfloat16 and a head size that is a
// multiple of 8 (a refused call still falls back to chunked attention when the graph is built).
func FusedAttentionAvailable(b compute.Backend, dt dtypes.DType, headDim int) bool {
	if b == nil || !b.Capabilities().Operations[compute.OpTypeFusedScaledDotProductAttention] {
		return false
	}
	return dt.IsHalfPrecision() && headDim%8 == 0
}

// SelfAttend is causal self-attention of queries q [B, T, nH, hd] over keys and values k, v
// [B, T, nKV, hd] of the same tokens at positions [B, T] (negative = padding; a key is visible
// when 0 ≤ kPos ≤ qPos), computed as the net's Attention says. Returns [B, T, nH·hd].
func (n *Net) SelfAttend(q, k, v, positions *Node) *Node {
	block := n.AttentionBlock
	if block <= 0 {
		block = DefaultAttentionBlock
	}
	fused := FusedAttentionAvailable(n.g.Backend(), n.Compute, n.Config.HeadDim)
	switch ChooseAttention(n.Attention, fused, q.Shape().Dim(1), block) {
	case AttentionFused:
		return n.attendFused(q, k, v, positions, block)
	case AttentionChunked:
		return n.attendChunked(q, k, v, positions, block)
	}
	return n.Attend(q, k, v, positions, positions)
}

// attendFused calls the backend's fused attention (layout [B, T, heads, hd], causal, with per-row
// lengths as the padding mask). It assumes what Pack and Score lay out: each row's tokens first at
// positions 0, 1, …, then padding, so that causal by index and the lengths give the visibility of
// the positions. Where the backend refuses the call (not implemented for this dtype, shape or
// plugin) the chunked path computes it; where it has no fused backward, the chunked path's
// backward is used.
func (n *Net) attendFused(q, k, v, positions *Node, block int) *Node {
	c := n.Config
	b, t := q.Shape().Dim(0), q.Shape().Dim(1)
	lengths := ReduceSum(ConvertDType(GreaterOrEqual(positions, ZerosLike(positions)), dtypes.Int32), -1) // [B]
	hasVJP := n.g.Backend().Capabilities().Operations[compute.OpTypeFusedScaledDotProductAttentionVJP]
	out, _ := InternalFusedOpCaller(func() *Node {
		cfg := &compute.ScaledDotProductAttentionConfig{
			Scale: 1 / math.Sqrt(float64(c.HeadDim)), Causal: true,
			QuerySeqLen: InternalBackendOutputs(lengths)[0], KeyValueSeqLen: InternalBackendOutputs(lengths)[0],
		}
		o, _ := BackendFusedScaledDotProductAttention(q, k, v, compute.AttentionAxesLayoutBSHD, cfg)
		return o
	}, func() *Node {
		return Reshape(n.attendChunked(q, k, v, positions, block), b, t, c.NumHeads, c.HeadDim)
	}, !hasVJP)
	return Reshape(out, b, t, c.NumHeads*c.HeadDim)
}

// attendChunked is SelfAttend in blocks of block queries (see chunked.go). In a differentiated net
// the gradient is a closed form computed block by block as well: q, k and v are packed into one
// tensor X [B, T, nH+2nKV, hd] whose custom gradient receives dO in the queries' slot (the output
// is out + (Xg − Xg)[queries], zero in value) and returns dQ, dK and dV together.
func (n *Net) attendChunked(q, k, v, positions *Node, block int) *Node {
	c := n.Config
	b, t := q.Shape().Dim(0), q.Shape().Dim(1)
	q = MulScalar(q, 1/math.Sqrt(float64(c.HeadDim)))
	if !n.Differentiated {
		return n.newBlocks(q, k, v, positions, block).forward()
	}
	nh, nkv := c.NumHeads, c.NumKVHeads
	x := Concatenate([]*Node{q, k, v}, 2)
	unpack := func(x *Node) (q, k, v *Node) {
		return SliceAxis(x, 2, AxisRange(0, nh)), SliceAxis(x, 2, AxisRange(nh, nh+nkv)), SliceAxis(x, 2, AxisRange(nh+nkv, nh+2*nkv))
	}
	qs, ks, vs := unpack(StopGradient(x))
	out := n.newBlocks(qs, ks, vs, positions, block).forward()
	xg := IdentityWithCustomGradient(x, func(x, dx *Node) *Node {
		qx, kx, vx := unpack(x)
		return n.newBlocks(qx, kx, vx, positions, block).backward(SliceAxis(dx, 2, AxisRange(0, nh)))
	})
	qg := SliceAxis(xg, 2, AxisRange(0, nh))
	return Add(out, Reshape(Sub(qg, StopGradient(qg)), b, t, nh*c.HeadDim))
}
