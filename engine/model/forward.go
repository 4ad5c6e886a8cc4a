package model

import (
	"math"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/support/exceptions"
)

// Net is the graph-side view of a model: parameter nodes by name and the compute dtype. Its
// methods build pieces of the transformer; the rollout engine (KV cache) and the trainer reuse them.
type Net struct {
	Config  *Config
	Compute dtypes.DType // dtype of matmuls and the residual stream (Float32 or BFloat16)
	// Differentiated marks a net whose graph is differentiated (the trainer's loss): attention's
	// softmax then carries its closed-form gradient (see softmax).
	Differentiated bool
	// Attention is how Forward attends over whole sequences ("" is auto, see ChooseAttention),
	// AttentionBlock the query block of the chunked path (0: DefaultAttentionBlock).
	Attention      AttentionKind
	AttentionBlock int
	params         map[string]*Node
	g              *Graph
}

// NewNet binds parameter nodes given in ParamShapes order.
func NewNet(c *Config, compute dtypes.DType, paramNodes []*Node) *Net {
	specs := ParamShapes(c)
	if len(paramNodes) != len(specs) {
		exceptions.Panicf("model graph: got %d parameter nodes, want %d", len(paramNodes), len(specs))
	}
	n := &Net{Config: c, Compute: compute, params: make(map[string]*Node, len(specs)), g: paramNodes[0].Graph()}
	for i, s := range specs {
		n.params[s.Name] = paramNodes[i]
	}
	return n
}

func panicf(format string, args ...any) { exceptions.Panicf(format, args...) }

// w returns a parameter cast to the compute dtype.
func (n *Net) w(name string) *Node {
	p, ok := n.params[name]
	if !ok {
		exceptions.Panicf("model graph: no parameter %q", name)
	}
	if p.DType() != n.Compute {
		return ConvertDType(p, n.Compute)
	}
	return p
}

// linear computes x·Wᵀ (+ the LoRA adapter's output, when W has one) (+ b) for HF's [out, in]
// weight layout. x: [..., in] → [..., out].
func (n *Net) linear(x *Node, weight, bias string) *Node {
	w := n.w(weight)
	y := DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{1}, nil)
	if d := n.loraDelta(x, weight); d != nil {
		y = Add(y, d)
	}
	if bias != "" {
		y = Add(y, ExpandLeftToRank(n.w(bias), y.Rank()))
	}
	return y
}

// rmsNorm is HF's Qwen RMSNorm: normalise in float32 over the last axis, cast back, scale.
func (n *Net) rmsNorm(x *Node, weight string) *Node {
	x32 := ConvertDType(x, dtypes.Float32)
	variance := ReduceAndKeep(Square(x32), ReduceMean, -1)
	normed := Div(x32, Sqrt(AddScalar(variance, n.Config.RMSNormEps))) // Rsqrt has no gradient in GoMLX
	return Mul(ConvertDType(normed, n.Compute), ExpandLeftToRank(n.w(weight), x.Rank()))
}

// Embed looks up token embeddings. ids: [B, T] int32 → [B, T, H].
func (n *Net) Embed(ids *Node) *Node {
	return Gather(n.w(nameEmbed), ExpandAxes(ids, -1))
}

// Rope holds cos and sin tables for a set of positions, shaped [B, T, 1, headDim] in float32.
type Rope struct{ Cos, Sin *Node }

// NewRope computes rotary tables for positions [B, T] (int32; negative positions are treated as 0).
func (n *Net) NewRope(positions *Node) Rope {
	hd := n.Config.HeadDim
	invFreq := Const(n.g, ropeInvFreq(n.Config.RopeTheta, hd)) // [hd/2]
	pos := ConvertDType(MaxScalar(positions, int32(0)), dtypes.Float32)
	freqs := Mul(ExpandAxes(pos, -1), ExpandLeftToRank(invFreq, 3)) // [B, T, hd/2]
	emb := Concatenate([]*Node{freqs, freqs}, -1)                   // [B, T, hd]
	return Rope{Cos: ExpandAxes(Cos(emb), 2), Sin: ExpandAxes(Sin(emb), 2)}
}

// apply rotates x: [B, T, heads, hd] as x·cos + rotate_half(x)·sin.
func (r Rope) apply(x *Node) *Node {
	hd := x.Shape().Dim(-1)
	x1 := SliceAxis(x, -1, AxisRange(0, hd/2))
	x2 := SliceAxis(x, -1, AxisRange(hd/2, hd))
	rot := Concatenate([]*Node{Neg(x2), x1}, -1)
	cos, sin := ConvertDType(r.Cos, x.DType()), ConvertDType(r.Sin, x.DType())
	return Add(Mul(x, cos), Mul(rot, sin))
}

// QKV projects the layer input (already normalised) into rotated queries [B, T, nH, hd] and
// keys [B, T, nKV, hd] and values [B, T, nKV, hd].
func (n *Net) QKV(layer int, x *Node, rope Rope) (q, k, v *Node) {
	c := n.Config
	b, t := x.Shape().Dim(0), x.Shape().Dim(1)
	bias := func(s string) string {
		if c.AttentionBias {
			return layerName(layer, s)
		}
		return ""
	}
	q = Reshape(n.linear(x, layerName(layer, sQ), bias(sQBias)), b, t, c.NumHeads, c.HeadDim)
	k = Reshape(n.linear(x, layerName(layer, sK), bias(sKBias)), b, t, c.NumKVHeads, c.HeadDim)
	v = Reshape(n.linear(x, layerName(layer, sV), bias(sVBias)), b, t, c.NumKVHeads, c.HeadDim)
	if c.Family == Qwen3 {
		q = n.rmsNorm(q, layerName(layer, sQNorm))
		k = n.rmsNorm(k, layerName(layer, sKNorm))
	}
	return rope.apply(q), rope.apply(k), v
}

// Attend computes grouped-query attention of queries q [B, T, nH, hd] at positions qPos [B, T]
// over keys/values k, v [B, S, nKV, hd] at positions kPos [B, S]. A key is visible to a query when
// 0 ≤ kPos ≤ qPos (causal; negative positions mark padding or empty cache rows). Returns [B, T, nH·hd].
func (n *Net) Attend(q, k, v, qPos, kPos *Node) *Node {
	return n.attendHeadsFirst(q, TransposeAllAxes(k, 0, 2, 1, 3), TransposeAllAxes(v, 0, 2, 1, 3), qPos, kPos)
}

// attendHeadsFirst is Attend with keys and values already laid out heads first, kt, vt
// [B, nKV, S, hd]: the layout of the KV cache, which the two products read without a transpose.
//
// The 1/√hd scale is applied to the queries ([B, T, nH, hd]) rather than to the scores
// ([B, nKV, G, T, S], S/hd times larger), and masked keys get −1e30 added rather than chosen with
// Where: the sum rounds to exactly −1e30, as Where gave, and its gradient is the identity, so the
// backward pass does no masking over the scores.
func (n *Net) attendHeadsFirst(q, kt, vt, qPos, kPos *Node) *Node {
	c := n.Config
	b, t, s := q.Shape().Dim(0), q.Shape().Dim(1), kt.Shape().Dim(2)
	groups := c.NumHeads / c.NumKVHeads
	q = MulScalar(q, 1/math.Sqrt(float64(c.HeadDim)))
	// [B, T, nKV, G, hd] → [B, nKV, G, T, hd].
	qg := TransposeAllAxes(Reshape(q, b, t, c.NumKVHeads, groups, c.HeadDim), 0, 2, 3, 1, 4)
	scores := ConvertDType(Einsum("bkgtd,bksd->bkgts", qg, kt), dtypes.Float32)

	kp := ExpandAxes(kPos, 1)                                                                  // [B, 1, S]
	qp := ExpandAxes(qPos, 2)                                                                  // [B, T, 1]
	visible := LogicalAnd(GreaterOrEqual(kp, ZerosLike(kp)), LessOrEqual(kp, qp))              // [B, T, S]
	bias := Where(visible, Scalar(n.g, dtypes.Float32, 0), Scalar(n.g, dtypes.Float32, -1e30)) // [B, T, S]
	bias = BroadcastToDims(Reshape(bias, b, 1, 1, t, s), b, c.NumKVHeads, groups, t, s)
	probs := ConvertDType(n.softmax(Add(scores, bias)), n.Compute)
	out := Einsum("bkgts,bksd->bkgtd", probs, vt) // [B, nKV, G, T, hd]
	out = TransposeAllAxes(out, 0, 3, 1, 2, 4)    // [B, T, nKV, G, hd]
	return Reshape(out, b, t, c.NumHeads*c.HeadDim)
}

// softmax is the softmax over the last axis. The backend's fused op computes it; GoMLX
// differentiates a fused softmax through an alternate graph of the same value (by default the
// unfused max, exp, sum and divide, differentiated op by op), which over attention scores was most
// of the backward pass's exp and division. A differentiated net hands it an alternate whose
// gradient is the closed form instead, ∂L/∂x = p ⊙ (g − Σ g ⊙ p), from the output p alone: the
// fused output plus (x − x) through a custom-gradient identity. When the fused op runs, the
// alternate is only differentiated, never computed, so the forward pass is the fused op alone
// (before, the zero term cost an add, a subtract and three copies of every layer's scores).
// Where the backend has no fused softmax (XLA), the alternate is the value: p + (x − x) = p
// exactly (x is finite: masked scores are −1e30, not −∞).
func (n *Net) softmax(x *Node) *Node {
	if !n.Differentiated {
		return Softmax(x, -1)
	}
	var p *Node // the fused output, or the alternate's own softmax where there is none
	closedForm := func() *Node {
		own := StopGradient(Softmax(x, -1))
		p = own
		xg := IdentityWithCustomGradient(x, func(_, g *Node) *Node {
			return Mul(p, Sub(g, ReduceAndKeep(Mul(g, p), ReduceSum, -1)))
		})
		return Add(own, Sub(xg, StopGradient(xg)))
	}
	out, fused := InternalFusedOpCaller(func() *Node { return BackendFusedSoftmax(x, x.Rank()-1) }, closedForm, true)
	if fused {
		p = out // read by the gradient only (no second derivative is taken), so not stopped: no copy
	}
	return out
}

// LayerPre is the first half of a decoder layer: returns the normalised input for attention.
func (n *Net) LayerPre(layer int, x *Node) *Node {
	return n.rmsNorm(x, layerName(layer, sInNorm))
}

// LayerPost finishes a decoder layer given its input x and the attention output attn:
// residual add, post-attention norm, SwiGLU MLP, residual add.
func (n *Net) LayerPost(layer int, x, attn *Node) *Node {
	h := Add(x, n.linear(attn, layerName(layer, sO), ""))
	y := n.rmsNorm(h, layerName(layer, sPostNorm))
	gate := n.linear(y, layerName(layer, sGate), "")
	up := n.linear(y, layerName(layer, sUp), "")
	mlp := n.linear(Mul(Mul(gate, Sigmoid(gate)), up), layerName(layer, sDown), "")
	return Add(h, mlp)
}

// Forward runs the decoder over ids [B, T] at positions [B, T] (negative = padding) with causal
// attention among them, and returns the final normalised hidden states [B, T, H] in the compute dtype.
func (n *Net) Forward(ids, positions *Node) *Node {
	x := n.Embed(ids)
	rope := n.NewRope(positions)
	for l := 0; l < n.Config.NumLayers; l++ {
		q, k, v := n.QKV(l, n.LayerPre(l, x), rope)
		x = n.LayerPost(l, x, n.SelfAttend(q, k, v, positions))
	}
	return n.rmsNorm(x, nameNorm)
}

// lmHead is the output projection's parameter name (the embedding when tied).
func (n *Net) lmHead() string {
	if n.Config.TieWordEmbeddings {
		return nameEmbed
	}
	return nameLMHead
}

// Logits projects hidden states [..., H] onto the vocabulary, in float32: [..., V].
func (n *Net) Logits(hidden *Node) *Node {
	return ConvertDType(n.linear(hidden, n.lmHead(), ""), dtypes.Float32)
}

// HeadParam is the vocabulary projection's parameter node as bound (the tied embedding or
// lm_head.weight, before any cast), and whether Logits is its plain product: no LoRA adapter on
// it, so LogitsWith(hidden, HeadParam) is Logits(hidden).
func (n *Net) HeadParam() (p *Node, plain bool) {
	_, adapted := n.params[LoRAName(n.lmHead(), "A")]
	return n.params[n.lmHead()], !adapted
}

// LogitsWith is Logits through the given projection weight [V, H] (cast to the compute dtype
// here), without the head's LoRA adapter: the trainer's head passes the weight through a
// StopGradient or its own custom gradient.
func (n *Net) LogitsWith(hidden, weight *Node) *Node {
	if weight.DType() != n.Compute {
		weight = ConvertDType(weight, n.Compute)
	}
	return ConvertDType(DotGeneral(hidden, []int{hidden.Rank() - 1}, nil, weight, []int{1}, nil), dtypes.Float32)
}

// TokenLogProbs returns log p(targets[b,t] | hidden[b,t]) as [B, T] float32, and the argmax token
// [B, T] int32. The vocabulary projection runs over chunks of at most chunk positions, so the
// float32 [B, chunk, V] logits of one chunk are the largest temporary (never [B, T, V]). The
// log-prob of the target is picked with Gather, never a one-hot product.
func (n *Net) TokenLogProbs(hidden, targets *Node, chunk int) (logp, argmax *Node) {
	t := hidden.Shape().Dim(1)
	if chunk <= 0 || chunk > t {
		chunk = t
	}
	var lps, ams []*Node
	for start := 0; start < t; start += chunk {
		end := min(start+chunk, t)
		h := SliceAxis(hidden, 1, AxisRange(start, end))
		tg := SliceAxis(targets, 1, AxisRange(start, end))
		logits := n.Logits(h) // [B, c, V]
		lps = append(lps, pickLogProb(logits, tg))
		ams = append(ams, ArgMax(logits, -1, dtypes.Int32))
	}
	if len(lps) == 1 {
		return lps[0], ams[0]
	}
	return Concatenate(lps, 1), Concatenate(ams, 1)
}

// pickLogProb computes logits[b,t,target] − logsumexp(logits[b,t,:]) for logits [B, T, V].
func pickLogProb(logits, targets *Node) *Node {
	b, t := logits.Shape().Dim(0), logits.Shape().Dim(1)
	shape := targets.Shape()
	bIdx := Iota(logits.Graph(), shape, 0)
	tIdx := Iota(logits.Graph(), shape, 1)
	idx := Stack([]*Node{bIdx, tIdx, ConvertDType(targets, shape.DType)}, -1) // [B, T, 3]
	picked := Gather(logits, idx)                                             // [B, T]
	maxv := StopGradient(ReduceAndKeep(logits, ReduceMax, -1))
	lse := Add(Log(ReduceSum(Exp(Sub(logits, maxv)), -1)), Reshape(maxv, b, t))
	return Sub(picked, lse)
}
