package train

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/support/exceptions"

	"agentrl/engine/model"
)

// LossInputs are the per-token inputs of the policy loss, all [B, T] of one float dtype.
type LossInputs struct {
	LogProbs    *Node // current log p(target), with gradient
	OldLogProbs *Node // the sampler's log-probs (rollout policy)
	Advantages  *Node
	Mask        *Node // 1 on policy tokens, 0 elsewhere
	RefLogProbs *Node // reference model's log-probs; read only when Config.KLCoef > 0
	Entropy     *Node // per-token entropy of the current policy; nil: no bonus and no metric
	// Denom is the scalar normaliser: the number of policy tokens (token-mean) or of sequences
	// with a policy token (seq-mean) over every micro-batch of the update, so that gradients summed
	// over micro-batches are the gradient of the whole update's mean. nil: this batch's own count.
	Denom *Node
}

// LossOutputs are the loss and the sums its metrics are made of, all scalars. Sums run over
// policy tokens only; divide by Tokens (summed over micro-batches) for means.
type LossOutputs struct {
	Loss        *Node // clipped surrogate + KLCoef·KL − EntropyCoef·entropy, aggregated ÷ Denom
	ClipCount   *Node // tokens whose clipped branch is active (their gradient is zero)
	RatioSum    *Node // Σ exp(logp − old)
	ApproxKLSum *Node // Σ ½(logp − old)²: divergence from the rollout policy
	RefKLSum    *Node // Σ KL estimate to the reference (0 without a KL term)
	EntropySum  *Node // Σ entropy (0 without Entropy)
	AbsDiffSum  *Node // Σ |logp − old|: the log-prob mismatch probe's mean
	MaxAbsDiff  *Node // max |logp − old|: the probe's maximum
	NLLSum      *Node // Σ −logp: the negative log-likelihood of the policy tokens
	Tokens      *Node // number of policy tokens
}

// PolicyLoss builds the PPO-style clipped policy loss: per policy token
//
//	−min(r·A, clip(r, 1−ClipLow, 1+ClipHigh)·A) + KLCoef·KL(logp, ref) − EntropyCoef·H,   r = exp(logp − old)
//
// aggregated by token-mean or seq-mean. Non-policy positions are masked before any exponential,
// so padding can never turn into Inf or NaN in the loss or its gradient.
func PolicyLoss(c *Config, in LossInputs) LossOutputs {
	dt := in.LogProbs.DType()
	g := in.LogProbs.Graph()
	on := GreaterThan(in.Mask, ZerosLike(in.Mask))
	zero := ZerosLike(in.LogProbs)
	masked := func(x *Node) *Node { return Where(on, x, zero) }

	old := in.OldLogProbs
	if c.OnPolicy {
		old = StopGradient(in.LogProbs)
	}
	diff := masked(Sub(in.LogProbs, old))
	ratio := Exp(diff)
	unclipped := Mul(ratio, in.Advantages)
	clipped := Mul(ClipScalar(ratio, 1-c.ClipLow, 1+c.ClipHigh), in.Advantages)
	perTok := Neg(Min(unclipped, clipped))
	var out LossOutputs
	out.RefKLSum = ScalarZero(g, dt)
	if c.KLCoef > 0 {
		kl := klEstimate(in.LogProbs, in.RefLogProbs, masked, c.KLEstimator)
		perTok = Add(perTok, MulScalar(kl, c.KLCoef))
		out.RefKLSum = ReduceAllSum(masked(StopGradient(kl)))
	}
	out.EntropySum = ScalarZero(g, dt)
	if in.Entropy != nil {
		if c.EntropyCoef > 0 {
			perTok = Sub(perTok, MulScalar(in.Entropy, c.EntropyCoef))
		}
		out.EntropySum = ReduceAllSum(masked(StopGradient(in.Entropy)))
	}
	perTok = masked(perTok)

	maskF := ConvertDType(on, dt)
	out.Tokens = ReduceAllSum(maskF)
	out.Loss = aggregate(c, perTok, maskF, out.Tokens, in.Denom)

	sd, sr := StopGradient(diff), StopGradient(ratio)
	active := LogicalAnd(on, LessThan(StopGradient(clipped), StopGradient(unclipped)))
	out.ClipCount = ReduceAllSum(ConvertDType(active, dt))
	out.RatioSum = ReduceAllSum(masked(sr))
	out.NLLSum = Neg(ReduceAllSum(masked(StopGradient(in.LogProbs))))
	out.ApproxKLSum = ReduceAllSum(MulScalar(Square(sd), 0.5))
	out.AbsDiffSum = ReduceAllSum(Abs(sd))
	out.MaxAbsDiff = ReduceAllMax(Abs(sd))
	return out
}

// aggregate reduces masked per-token losses perTok [B, T] to the scalar loss: Σ ÷ denom
// (token-mean) or the sum over rows of each row's mean ÷ denom (seq-mean). maskF is the float
// mask, tokens its sum; a nil denom is this batch's own count of tokens or of rows with a token.
func aggregate(c *Config, perTok, maskF, tokens, denom *Node) *Node {
	if c.Aggregation == SeqMean {
		perRow := ReduceSum(maskF, 1)
		perSeq := Div(ReduceSum(perTok, 1), MaxScalar(perRow, 1))
		if denom == nil {
			denom = ReduceAllSum(ConvertDType(GreaterThan(perRow, ZerosLike(perRow)), maskF.DType()))
		}
		return Div(ReduceAllSum(perSeq), MaxScalar(denom, 1))
	}
	if denom == nil {
		denom = tokens
	}
	return Div(ReduceAllSum(perTok), MaxScalar(denom, 1))
}

// klEstimate is the per-token KL estimate to the reference: k1 = logp − ref, k3 = exp(ref − logp)
// − (ref − logp) − 1. The difference is masked before the exponential.
func klEstimate(logp, ref *Node, masked func(*Node) *Node, estimator string) *Node {
	d := masked(Sub(ref, logp))
	if estimator == K1 {
		return Neg(d)
	}
	return SubScalar(Sub(Exp(d), d), 1)
}

// TokenStats returns log p(targets[b,t] | hidden[b,t]) as [B, T] float32 and, when withEntropy,
// the entropy of the whole next-token distribution at each position (nil otherwise). The
// vocabulary projection runs chunk positions at a time, so the float32 [B, chunk, V] logits of
// one chunk are the largest temporary (never [B, T, V]); log-prob and entropy come from the
// same logits. With checkpoint, each chunk's logits are recomputed in the backward pass instead
// of being kept.
//
// In a differentiated net with more than one chunk, hidden's gradient is assembled chunk by chunk
// (see chunkedHeadGradient) rather than by differentiating the slices, whose gradients GoMLX pads
// to the whole sequence: S/chunk buffers of [B, S, H], a term in S² (8K tokens in chunks of 32:
// 1.5 GiB).
func TokenStats(net *model.Net, hidden, targets *Node, chunk int, withEntropy, checkpoint bool) (logp, entropy *Node) {
	t := hidden.Shape().Dim(1)
	if chunk <= 0 || chunk > t {
		chunk = t
	}
	if net.Differentiated && chunk < t {
		return chunkedHeadGradient(net, hidden, targets, chunk, withEntropy, checkpoint)
	}
	var lps, ents []*Node
	for start := 0; start < t; start += chunk {
		end := min(start+chunk, t)
		h := SliceAxis(hidden, 1, AxisRange(start, end))
		if checkpoint {
			h = h.Checkpoint()
		}
		lp, ent := chunkStats(net.Logits(h), SliceAxis(targets, 1, AxisRange(start, end)), withEntropy)
		if checkpoint {
			lp = lp.StopCheckpoint()
			if ent != nil {
				ent = ent.StopCheckpoint()
			}
		}
		lps, ents = append(lps, lp), append(ents, ent)
	}
	if len(lps) == 1 {
		return lps[0], ents[0]
	}
	logp = Concatenate(lps, 1)
	if withEntropy {
		entropy = Concatenate(ents, 1)
	}
	return logp, entropy
}

// chunkedHeadGradient is TokenStats over chunks of a differentiated net, with the same values and
// the same gradients, assembled without padding. The chunks read hidden through a StopGradient, so
// autodiff through them reaches the vocabulary projection's weight but not hidden. The gradient
// reaching the log-probs and entropies is routed, as in attendChunked, through two slots per
// position packed beside hidden, x = [hidden | 0 0] in float32: the outputs add (slot − slot),
// zero in value, so x's custom gradient receives ∂L/∂logp and ∂L/∂entropy in the slots, and returns
// in hidden's place the concatenation over chunks of each chunk's own gradient with respect to its
// slice of hidden. What the backward holds for hidden is then one [B, T, H] buffer and its chunks,
// linear in T.
//
// Each chunk's gradient with respect to its logits (chunkStats's closed form) is computed once, in
// x's custom gradient, which autodiff reaches first (x's identity is built after the chunks), and
// used there for the projection's weight too (headWeightGrad: the products summed chunk by chunk),
// or, with a LoRA adapter on the head or a frozen head, handed to the chunk's own custom gradient
// (headGrad.pending): the backward pass of the product runs twice, once for the hidden states and
// once for the weight, the softmax's gradient once. With checkpoint the chunk's logits are
// recomputed there from its hidden states, the only [B, C, V] buffers the backward holds at a time.
func chunkedHeadGradient(net *model.Net, hidden, targets *Node, chunk int, withEntropy, checkpoint bool) (logp, entropy *Node) {
	g := hidden.Graph()
	b, t, h := hidden.Shape().Dim(0), hidden.Shape().Dim(1), hidden.Shape().Dim(2)
	dt := hidden.DType()
	// The projection's weight gradient summed in the chunks' own pass (see headWeightGrad) when the
	// weight is trained and its logits are the plain product; else autodiff's, chunk by chunk.
	w, plain := net.HeadParam()
	var hw *headWeightGrad
	logits := net.Logits
	if plain && !net.Config.LoRA.Enabled() {
		hw = newHeadWeightGrad(w)
		stopped := StopGradient(w)
		logits = func(x *Node) *Node { return net.LogitsWith(x, stopped) }
	}
	x := Concatenate([]*Node{ConvertDType(hidden, dtypes.Float32), Zeros(g, shapes.Make(dtypes.Float32, b, t, 2))}, -1)
	hs := ConvertDType(SliceAxis(StopGradient(x), -1, AxisRange(0, h)), dt)
	type headChunk struct {
		start, end int
		h          *Node
		grad       *headGrad
	}
	var chunks []headChunk
	var lps, ents []*Node
	for start := 0; start < t; start += chunk {
		end := min(start+chunk, t)
		hc := SliceAxis(hs, 1, AxisRange(start, end))
		in := hc
		if checkpoint {
			in = hc.Checkpoint()
		}
		lp, ent, hg := chunkStatsGrad(logits(in), SliceAxis(targets, 1, AxisRange(start, end)), withEntropy)
		if checkpoint {
			lp = lp.StopCheckpoint()
			if ent != nil {
				ent = ent.StopCheckpoint()
			}
		}
		chunks = append(chunks, headChunk{start: start, end: end, h: hc, grad: hg})
		lps, ents = append(lps, lp), append(ents, ent)
	}
	xg := IdentityWithCustomGradient(x, func(_, dx *Node) *Node {
		dhs := make([]*Node, len(chunks))
		for i, c := range chunks {
			at := func(col int) *Node {
				return Slice(dx, AxisRange(), AxisRange(c.start, c.end), AxisRange(h+col, h+col+1)) // [B, n, 1]
			}
			z, st := c.grad.logits, c.grad.fwd
			if checkpoint {
				z = logits(c.h)
				st = newSoftmaxStats(z)
			}
			var dent *Node
			if withEntropy {
				dent = at(1)
			}
			dz := c.grad.dLogits(st, at(0), dent)
			if hw != nil {
				dhs[i] = hw.add(net, c.h, dz)
				continue
			}
			c.grad.pending = dz
			// The product's gradient for this chunk's hidden states at dz: autodiff of the projection
			// alone, reached through an identity whose gradient is dz whatever arrives.
			y := IdentityWithCustomGradient(z, func(_, _ *Node) *Node { return dz })
			dhs[i] = ConvertDType(Gradient(ReduceAllSum(y), c.h)[0], dtypes.Float32)
		}
		return Concatenate([]*Node{Concatenate(dhs, 1), Zeros(g, shapes.Make(dtypes.Float32, b, t, 2))}, -1)
	})
	slots := SliceAxis(xg, -1, AxisRange(h, h+2))
	zero := Sub(slots, StopGradient(slots)) // [B, T, 2], zero in value
	logp = Add(Concatenate(lps, 1), Reshape(SliceAxis(zero, -1, AxisRange(0, 1)), b, t))
	if hw != nil {
		logp = hw.attach(logp)
	}
	if withEntropy {
		entropy = Add(Concatenate(ents, 1), Reshape(SliceAxis(zero, -1, AxisRange(1, 2)), b, t))
	}
	return logp, entropy
}

// headWeightGrad sums the vocabulary projection's weight gradient over the chunks as the hidden
// states' custom gradient reaches each chunk, so that each chunk's logits gradient (a [B, C, V]
// buffer) is used and freed at once. Left to autodiff, the weight reached every chunk's product
// through its own use and autodiff summed the contributions at the end: every chunk's logits
// gradient stayed alive until then, and every chunk's [V, H] product with it (637 MB each for
// Qwen3's 151,936 × 1,024 in float32, five at once in an 8 × 256 micro-step). Here the chunks
// read the weight through a StopGradient, and the weight's one other use in the head is an
// identity (created before the chunks, so autodiff reaches it after the hidden states' custom
// gradient has summed the products) whose gradient is the sum, joined to the log-probs by a
// term that is zero in value.
type headWeightGrad struct {
	w, id *Node // the parameter and its identity with the summed gradient
	sum   *Node // the chunks' products so far, in chunk order
}

func newHeadWeightGrad(w *Node) *headWeightGrad {
	hw := &headWeightGrad{w: w}
	hw.id = IdentityWithCustomGradient(w, func(_, _ *Node) *Node {
		if hw.sum == nil {
			exceptions.Panicf("train: the head's weight gradient was asked for before the hidden states' (autodiff's order changed?)")
		}
		return hw.sum
	})
	return hw
}

// add adds one chunk's weight gradient at its logits gradient dz, and returns the chunk's
// hidden-state gradient (float32): both from autodiff of the chunk's projection through the
// parameter itself, reached through an identity whose gradient is dz.
func (hw *headWeightGrad) add(net *model.Net, h, dz *Node) *Node {
	y := IdentityWithCustomGradient(net.LogitsWith(h, hw.w), func(_, _ *Node) *Node { return dz })
	grads := Gradient(ReduceAllSum(y), h, hw.w)
	if hw.sum == nil {
		hw.sum = grads[1]
	} else {
		hw.sum = Add(hw.sum, grads[1])
	}
	return ConvertDType(grads[0], dtypes.Float32)
}

// attach returns logp plus a zero that depends on the weight's identity (one element of it,
// minus itself), so that the loss's gradient reaches the identity.
func (hw *headWeightGrad) attach(logp *Node) *Node {
	one := Reshape(Slice(hw.id, AxisRange(0, 1), AxisRange(0, 1)))
	zero := ConvertDType(Sub(one, StopGradient(one)), logp.DType())
	return Add(logp, zero)
}

// chunkStats computes, for logits [B, C, V] float32 and targets [B, C], the target log-prob
// logits[target] − logsumexp(logits) (picked with Gather, never a one-hot product) and
// optionally the entropy logsumexp − Σ softmax·logits.
//
// Their gradient with respect to the logits is written out (headGrad.dLogits) rather than left to
// autodiff, which differentiates the max, the exponentials, the sums and the gather one by one:
// about fifteen passes over the [B, C, V] chunk, where the closed form takes four (one of them the
// exponential again: the backward keeps only the shifted logits) and a scatter of B·C values. The
// backward pass reaches the logits through a custom gradient; the log-prob's and the entropy's own
// gradients ride on two columns of the logits, sliced and subtracted from themselves (zero in
// value), so the custom gradient receives them padded into those columns.
func chunkStats(logits, targets *Node, withEntropy bool) (logp, entropy *Node) {
	logp, entropy, _ = chunkStatsGrad(logits, targets, withEntropy)
	return logp, entropy
}

// headGrad is what one chunk's custom gradient needs: the forward's softmax statistics, the
// target indices, and a gradient already computed in this backward pass (pending), if any.
type headGrad struct {
	logits *Node // the projection's output, before the custom gradient's identity
	fwd    softmaxStats
	idx    *Node // [B, C, 3]: row, position, target
	// pending is the chunk's gradient for its logits as chunkedHeadGradient computed it for the
	// hidden states earlier in the same backward pass; the custom gradient takes it (and clears
	// it) instead of computing it again. The trainer differentiates each graph once.
	pending *Node
}

// chunkStatsGrad is chunkStats and the chunk's headGrad, through which chunkedHeadGradient hands
// the chunk's custom gradient the logits' gradient it computed for the hidden states.
func chunkStatsGrad(logits, targets *Node, withEntropy bool) (logp, entropy *Node, hg *headGrad) {
	shape := targets.Shape()
	hg = &headGrad{logits: logits,
		idx: Stack([]*Node{Iota(logits.Graph(), shape, 0), Iota(logits.Graph(), shape, 1), ConvertDType(targets, shape.DType)}, -1)}
	y := IdentityWithCustomGradient(logits, func(z, v *Node) *Node {
		if dz := hg.pending; dz != nil {
			hg.pending = nil
			return dz
		}
		st := hg.fwd
		if z != st.z { // rematerialized by gradient checkpointing: recompute from the new logits
			st = newSoftmaxStats(z)
		}
		var dent *Node
		if withEntropy {
			dent = SliceAxis(v, -1, AxisRange(1, 2))
		}
		return hg.dLogits(st, SliceAxis(v, -1, AxisRange(0, 1)), dent)
	})
	hg.fwd = newSoftmaxStats(y)
	fwd := &hg.fwd
	sum := Squeeze(fwd.sum, -1)
	fwd.lse = Log(sum)                               // [B, C], of the shifted logits
	logp = Sub(Gather(fwd.shifted, hg.idx), fwd.lse) // [B, C]
	if withEntropy {
		// Σ p·shifted = Σ exp(shifted)·shifted ÷ Σ exp(shifted): no second exponential.
		fwd.entropy = Sub(fwd.lse, Div(ReduceSum(Mul(fwd.exps, fwd.shifted), -1), sum))
		entropy = fwd.entropy
	}
	slots := SliceAxis(y, -1, AxisRange(0, 2))
	zero := Sub(slots, StopGradient(slots)) // [B, C, 2], zero in value; carries ∂/∂logp, ∂/∂entropy
	logp = Add(logp, Squeeze(SliceAxis(zero, -1, AxisRange(0, 1)), -1))
	if withEntropy {
		entropy = Add(entropy, Squeeze(SliceAxis(zero, -1, AxisRange(1, 2)), -1))
	}
	return logp, entropy, hg
}

// softmaxStats are one chunk's logits z [B, C, V], shifted by their maximum, the exponentials of
// those, their sum [B, C, 1], and (set by chunkStatsGrad) the log of the sum and the entropy [B, C].
type softmaxStats struct {
	z, shifted, exps, sum, lse, entropy *Node
}

func newSoftmaxStats(z *Node) softmaxStats {
	zs := StopGradient(z)
	shifted := Sub(zs, ReduceAndKeep(zs, ReduceMax, -1)) // ≤ 0
	exps := Exp(shifted)
	return softmaxStats{z: z, shifted: shifted, exps: exps, sum: ReduceAndKeep(exps, ReduceSum, -1)}
}

// dLogits is the gradient with respect to the logits of Σ a·logp + Σ b·entropy, for a and b
// [B, C, 1] (b nil without the entropy), from st (the forward's statistics or recomputed ones; the
// log-sum and the entropy are always the forward's [B, C] values). With p = softmax(z),
// log p = shifted − lse and H the entropy:
//
//	∂logp/∂z_j = δ(j, target) − p_j,   ∂H/∂z_j = −p_j (log p_j + H),
//
// so the gradient is a·δ(j, target) − p_j (c + b·shifted_j) with c = a + b (H − lse): with
// p_j = exps_j ÷ sum, exps · (shifted · (−b ÷ sum) − c ÷ sum), then a added at each target.
func (hg *headGrad) dLogits(st softmaxStats, a, b *Node) *Node {
	inv := Inverse(st.sum)
	exps := st.exps
	if st.z == hg.fwd.z {
		// The forward's exponentials are not kept for the backward (a second [B, C, V] buffer per
		// chunk until then): one exponential again, from the shifted logits it keeps.
		exps = Exp(st.shifted)
	}
	var dz *Node
	if b != nil {
		c := Add(a, Mul(b, ExpandAxes(Sub(hg.fwd.entropy, hg.fwd.lse), -1)))
		dz = Mul(exps, Sub(Mul(st.shifted, Neg(Mul(b, inv))), Mul(c, inv)))
	} else {
		dz = Mul(exps, Neg(Mul(a, inv)))
	}
	return ScatterSum(dz, hg.idx, Squeeze(a, -1), false, true)
}

// forward runs the decoder like net.Forward; with checkpoint it marks each layer's input as a
// gradient checkpoint, so the backward pass keeps one [B, T, H] tensor per layer and recomputes
// the layer's insides. normWeight is the final RMSNorm's parameter node (model.norm.weight).
func forward(net *model.Net, normWeight, ids, positions *Node, checkpoint bool) *Node {
	if !checkpoint {
		return net.Forward(ids, positions)
	}
	x := net.Embed(ids)
	rope := net.NewRope(positions)
	for l := 0; l < net.Config.NumLayers; l++ {
		x = x.Checkpoint()
		q, k, v := net.QKV(l, net.LayerPre(l, x), rope)
		x = net.LayerPost(l, x, net.SelfAttend(q, k, v, positions))
	}
	return finalNorm(net, x.StopCheckpoint(), normWeight)
}

// finalNorm is the model's closing RMSNorm (HF Qwen: normalise in float32, cast back, scale),
// the one step of net.Forward that engine/model does not export. A test holds it equal to
// net.Forward.
func finalNorm(net *model.Net, x, weight *Node) *Node {
	x32 := ConvertDType(x, dtypes.Float32)
	variance := ReduceAndKeep(Square(x32), ReduceMean, -1)
	normed := Div(x32, Sqrt(AddScalar(variance, net.Config.RMSNormEps)))
	w := weight
	if w.DType() != net.Compute {
		w = ConvertDType(w, net.Compute)
	}
	return Mul(ConvertDType(normed, net.Compute), ExpandLeftToRank(w, x.Rank()))
}
