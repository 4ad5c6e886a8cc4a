package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"
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

// ParseAttention reads a recipe's model.attention ("" is auto).
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
	return FusedAttentionUnavailable(b, dt, headDim) == ""
}

// FusedAttentionUnavailable says why backend b does not serve fused attention for compute dtype dt
// and head size headDim, in words a user can act on; "" when it does.
func FusedAttentionUnavailable(b compute.Backend, dt dtypes.DType, headDim int) string {
	switch {
	case b == nil:
		return "no backend"
	case !b.Capabilities().Operations[compute.OpTypeFusedScaledDotProductAttention]:
		name := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(b.Name()), " Backend")) // "Go Backend" → "go"
		return fmt.Sprintf("the %s backend has no fused attention op (only XLA's CUDA backend has cuDNN flash attention)", name)
	case !dt.IsHalfPrecision():
		return fmt.Sprintf("cuDNN flash attention takes float16 or bfloat16, and the model computes in %s (model.dtype)", dt)
	case headDim%8 != 0:
		return fmt.Sprintf("cuDNN flash attention takes a head size that is a multiple of 8, and this model's is %d", headDim)
	}
	return ""
}

// CompileFusedAttention builds, compiles and runs the fused attention of one sequence of seqLen
// tokens with cfg's heads in dtype dt on backend b, forward and backward (the gradient of the
// output's sum with respect to q, k and v): the attention of the programs a training step
// compiles, alone. It returns the error compiling or running it gave, nil when it ran. Where the
// backend refuses the call when the graph is built, the program computes chunked attention
// instead, as a run's would, and no error is returned.
func CompileFusedAttention(b compute.Backend, cfg *Config, dt dtypes.DType, seqLen int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	exec, err := NewExec(b, func(q, k, v *Node) *Node {
		n := &Net{Config: cfg, Compute: dt, Differentiated: true, Attention: AttentionFused, g: q.Graph()}
		pos := Iota(q.Graph(), shapes.Make(dtypes.Int32, 1, seqLen), 1)
		out := n.SelfAttend(q, k, v, pos)
		grads := Gradient(ReduceAllSum(ConvertDType(out, dtypes.Float32)), q, k, v)
		return Add(ReduceAllSum(ConvertDType(grads[0], dtypes.Float32)),
			Add(ReduceAllSum(ConvertDType(grads[1], dtypes.Float32)), ReduceAllSum(ConvertDType(grads[2], dtypes.Float32))))
	})
	if err != nil {
		return err
	}
	defer exec.Finalize()
	q := tensors.FromShape(shapes.Make(dt, 1, seqLen, cfg.NumHeads, cfg.HeadDim))
	kv := tensors.FromShape(shapes.Make(dt, 1, seqLen, cfg.NumKVHeads, cfg.HeadDim))
	outs, err := exec.Call(q, kv, kv)
	for _, o := range outs {
		o.FinalizeAll()
	}
	return err
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
