// Package ledger is the byte ledger of the time-shared GPU: from a model shape and a recipe's
// memory, rollout and training settings it derives what each phase holds on the device, chooses
// the number of KV-cache slots and the training micro-batch that fit a memory budget, and says
// which component is too big when nothing fits. It runs nothing; `agentrl-tui plan` prints it and
// the engine sizes its buffers from it.
//
// # Phases
//
// Rollout holds the inference weights (compute dtype), the KV cache, the sampler's workspace and
// the runtime reserve, plus the float32 master weights and the AdamW moments unless they wait in
// host memory (memory.master_offload, memory.optimizer_offload). The reference copy is never on
// the device during rollout.
//
// Eval (when eval.max_total_tokens is longer than rollout's) is evaluation in its own context:
// rollout's KV cache is freed and one of the evaluation's slot length is allocated beside the
// inference weights (eval.go). A shorter or equal context evaluates in rollout's slots.
//
// Reference (when the recipe needs a reference: KL term or OPD teacher) runs between rollout and
// the update: the KV cache and the inference copy are freed, the reference weights come onto the
// device for one forward without gradients (one sequence at a time), then go back to the host —
// before offloaded master weights and moments come in, so the reference copy and the update never
// share the device.
//
// Train holds the master weights, their float32 gradients, the AdamW moments, the activations of
// one micro-batch and the runtime reserve; on the go backend also the gradient workspace (two
// buffers of the vocabulary projection's size while its gradient is assembled, see
// sizer.gradientWorkspace). The sync after the update frees the gradients, moves
// offloaded moments to the host, rebuilds the inference copy from the master weights and only
// then moves offloaded master weights to the host, so the sync never holds more than rollout does.
//
// Remote rollout (rollout.engines, Settings.RemoteRollout): inference servers generate the
// rollouts and evaluations, so rollout holds only what waits for the update (and the runtime),
// with no KV slots, and there is no eval phase; the PRM, reference and train phases are unchanged.
//
// 8-bit moments and LoRA change these sizes: see options.go. Peak (Plan.Total) is the largest phase.
//
// # Estimates
//
// Per decoder layer and per token, a training forward keeps for the backward pass, in the compute
// dtype (b bytes): the layer input and its RMSNorm output (2H), q, k and v (q+2kv, with q = heads ×
// head_dim and kv = kv_heads × head_dim), q and k after RoPE (q+kv), q and k before their RMSNorm
// (q+kv, qwen3 only), the attention output (q), the residual and its RMSNorm output (2H), and the
// SwiGLU gate, up, activation and product (4I) — plus what the attention path keeps
// (Settings.Attention, as engine/model chooses it): chunked attention (the Go backend beyond one
// block) keeps the packed q, k, v its gradient reads (+kv over the list) and recomputes each block's
// probabilities in the backward pass, holding BlocksInFlight blocks of B × heads × block × S scores
// at a time, (8+b) bytes each (measured on the Go backend in float32: three float32 buffers per
// block; a transient of one layer, linear in S); fused flash attention (XLA CUDA in bf16/f16) keeps
// the softmax statistics (heads × 4 bytes); dense attention (sequences of one block or less) keeps
// the probabilities of every token, heads × S, once in float32 for the softmax and once in the
// compute dtype (heads × S × (4+b) bytes, S = sequence length). Rollout's decode and prefill over
// the KV cache are dense.
//
// Without gradient checkpointing a micro-batch of T tokens holds T × layers × that, plus the
// vocabulary projection's shifted logits for every token (T × vocab × 4 in float32: each log-prob
// chunk keeps them for its backward, whose gradient for the logits is written out from them and
// their exponentials, computed again), plus what the backward has in flight: either one layer's
// worth (the gradients of the layer it is in) or the working buffers of one log-prob chunk (two),
// never both, since the head's backward runs before the layers'; plus the head's gradient for the
// hidden states, assembled chunk by chunk in float32 (3 × T × H × 4: the packed input, the
// chunks' gradients, their concatenation). With checkpointing it holds each layer's input
// (T × layers × H × b), two layers' worth of the above (the layer being recomputed and its gradients) and three buffers of
// one log-prob chunk; checkpointing covers the log-prob head too (each chunk's logits are
// recomputed in the backward). The trainer must compute log-probs in chunks of at most
// LogitChunkTokens tokens (micro-batch × positions) for these numbers to hold.
package ledger

import (
	"fmt"
	"sort"
	"strings"
)

// Fixed sizes the ledger assumes.
const (
	// RuntimeReserve is held in every phase for the CUDA context, cuBLAS/cuDNN handles and XLA's
	// scratch workspace.
	RuntimeReserve int64 = 1 << 30
	// LogitChunkTokens is the most tokens (summed over a micro-batch) whose vocabulary logits exist
	// at once in training.
	LogitChunkTokens = 1024
	// PrefillChunkTokens is the most prompt or observation tokens prefilled into a slot at once.
	PrefillChunkTokens = 256
)

// Component names, the keys of Plan.Components.
const (
	InferenceWeights = "inference_weights"
	BaseWeights      = "base_weights" // LoRA's frozen base, shared by every phase
	KVCache          = "kv_cache"
	ReferenceWeights = "reference_weights"
	MasterWeights    = "master_weights"
	Gradients        = "gradients"
	OptimizerMoments = "optimizer_moments"
	Activations      = "activations"
	// GradientWorkspace is what assembling the gradients holds beside them (the go backend:
	// see sizer.gradientWorkspace).
	GradientWorkspace = "gradient_workspace"
	SamplerWorkspace  = "sampler_workspace"
	Runtime           = "runtime_reserve"
)

// componentOrder is the order tables list components in.
func componentOrder() []string {
	return []string{InferenceWeights, BaseWeights, ReferenceWeights, PRMWeights, MasterWeights, Gradients, OptimizerMoments,
		KVCache, EvalKVCache, PRMKVCache, Activations, GradientWorkspace, SamplerWorkspace, Runtime}
}

// Offload modes of the optimizer moments and of the master weights during rollout.
const (
	OffloadAuto   = "auto"   // on the device when rollout still fits with the most slots, else host
	OffloadDevice = "device" // always on the device
	OffloadHost   = "host"   // always moved to the host during rollout
)

// Settings are the recipe values the ledger reads (see SettingsFor).
type Settings struct {
	// ComputeBytes is the size of one value in the compute dtype: 2 (bf16) or 4 (f32).
	ComputeBytes int
	// SeqLen is the length of a KV slot and of a training sequence (rollout.max_total_tokens).
	SeqLen int
	// KVSlots fixes the number of slots; 0 lets the ledger choose up to MaxKVSlots.
	KVSlots int
	// MaxKVSlots bounds the choice (the step's trajectories: tasks × group size).
	MaxKVSlots int
	// MicroBatch fixes the training micro-batch; 0 lets the ledger choose up to MaxMicroBatch.
	MicroBatch int
	// MaxMicroBatch bounds the choice.
	MaxMicroBatch int
	// Offload (the AdamW moments) is OffloadAuto, OffloadDevice or OffloadHost.
	Offload string
	// MasterOffload (the float32 master weights) is OffloadAuto, OffloadDevice or OffloadHost;
	// "" is OffloadDevice.
	MasterOffload string
	// OptimizerBits is 32 (float32 moments) or 8 (block-wise 8-bit, see options.go); 0 is 32.
	OptimizerBits int
	// LoRARank > 0 trains rank-LoRARank adapters on a frozen base (see options.go); 0 trains
	// every weight.
	LoRARank int
	// LoRATargets lists the projections with adapters, comma-separated ("" = all seven).
	LoRATargets string
	// GradientCheckpointing recomputes activations in the backward pass.
	GradientCheckpointing bool
	// Attention is the training attention path, AttentionDense, AttentionChunked or AttentionFused;
	// "" is fused in bf16 (ComputeBytes 2, a GPU), else chunked beyond one block, else dense.
	Attention string
	// AttentionBlock is chunked attention's query block; 0 is DefaultAttentionBlock.
	AttentionBlock int
	// Reference keeps a frozen copy of the initial weights (KL term or OPD teacher).
	Reference bool
	// ValueHead adds PPO's value head (hidden + 1 trainable parameters).
	ValueHead bool
	// DeviceIsHost is the go backend, whose device memory is host memory.
	DeviceIsHost bool
	// SaveOptimizer: checkpoints hold the AdamW moments too (checkpoint.save_optimizer).
	SaveOptimizer bool
	// PRM sizes the model PRM's phase (prm.kind model on this device); nil: none.
	PRM *PRMSettings
	// Eval sizes the evaluation's phase when its context is longer than rollout's
	// (eval.max_total_tokens); nil: evaluation decodes in rollout's slots.
	Eval *EvalSettings
	// KeepBest and KeepLast are checkpoint.keep_best and keep_last, and CheckpointsKept the most
	// checkpoints the store holds at once (CheckpointsKept; 0: one).
	KeepBest, KeepLast, CheckpointsKept int
	// RemoteRollout: the rollouts and evaluations are generated on rollout.engines' inference
	// servers, so the device holds no inference copy, KV cache or sampler workspace for them;
	// rollout holds what waits for the update (master weights, moments), and there is no eval
	// phase. The reference, PRM and train phases are as without it. KVSlots is then 0.
	RemoteRollout bool
	// Engines is the number of rollout.engines (for display; 0: none), LocalEngine why the local
	// engine stays beside them ("" when nothing else generates here; see LocalEngineFor).
	Engines     int
	LocalEngine string
	// EvalOnly plans an evaluation-only run (agentrl-tui eval): the model generates and nothing
	// trains, so there is no master copy, gradient, AdamW moment or activation of an update, no
	// reference or PRM phase, and a LoRA checkpoint is evaluated merged (a plain model). Only the
	// rollout phase is sized, at the evaluation's context (SeqLen); MicroBatch is 0.
	EvalOnly bool
}

func (s Settings) validate() error {
	var bad []string
	if s.ComputeBytes != 2 && s.ComputeBytes != 4 {
		bad = append(bad, fmt.Sprintf("compute bytes %d is not 2 (bf16) or 4 (f32)", s.ComputeBytes))
	}
	if s.SeqLen < 1 {
		bad = append(bad, fmt.Sprintf("sequence length %d is below 1", s.SeqLen))
	}
	if s.KVSlots < 0 || s.MicroBatch < 0 {
		bad = append(bad, fmt.Sprintf("kv slots %d or micro-batch %d is negative", s.KVSlots, s.MicroBatch))
	}
	if s.KVSlots == 0 && s.MaxKVSlots < 1 || s.MicroBatch == 0 && s.MaxMicroBatch < 1 {
		bad = append(bad, fmt.Sprintf("max kv slots %d and max micro-batch %d must be at least 1", s.MaxKVSlots, s.MaxMicroBatch))
	}
	switch s.Offload {
	case OffloadAuto, OffloadDevice, OffloadHost:
	default:
		bad = append(bad, fmt.Sprintf("offload %q is not one of auto, device, host", s.Offload))
	}
	switch s.MasterOffload {
	case "", OffloadAuto, OffloadDevice, OffloadHost:
	default:
		bad = append(bad, fmt.Sprintf("master offload %q is not one of auto, device, host", s.MasterOffload))
	}
	if s.OptimizerBits != 0 && s.OptimizerBits != 32 && s.OptimizerBits != 8 {
		bad = append(bad, fmt.Sprintf("optimizer bits %d is not 32 or 8", s.OptimizerBits))
	}
	if s.LoRARank < 0 {
		bad = append(bad, fmt.Sprintf("lora rank %d is negative", s.LoRARank))
	}
	if _, err := loraTargets(s.LoRATargets); err != nil {
		bad = append(bad, err.Error())
	}
	if len(bad) > 0 {
		return fmt.Errorf("ledger settings: %s", strings.Join(bad, "; "))
	}
	return nil
}

// Phase is what one phase holds on the device.
type Phase struct {
	Name  string           // "rollout", "eval", "prm", "reference" or "train"
	Bytes int64            // their sum
	Holds map[string]int64 // component → bytes, only what the phase holds
	Host  map[string]int64 // component → bytes waiting in host memory during the phase
}

// Plan is the ledger's answer for one shape, settings and budget.
type Plan struct {
	// Fits is true when both phases fit the budget.
	Fits bool
	// KVSlots is the number of KV-cache slots chosen (fixed, or the most that fit); when the
	// rollout phase does not fit even at one slot (or at the fixed count) it is 0.
	KVSlots int
	// MicroBatch is the training micro-batch chosen; 0 when the train phase does not fit.
	MicroBatch int
	// Components is the device bytes of each component at the chosen sizes (at 1 slot or
	// micro-batch where nothing fits), each at its largest over the phases.
	Components map[string]int64
	// Rollout, Reference and Train are the phases; Reference is empty (0 bytes) when the recipe
	// needs no reference model. PRM is the model PRM's phase (prm.kind model on this device),
	// empty without one, and PRMSlots its KV slots (0 when none fits). Eval is the evaluation's
	// phase when its context is longer than rollout's (Settings.Eval), empty otherwise, and
	// EvalSlots its KV slots (0 when none fits).
	Rollout, Eval, PRM, Reference, Train Phase
	PRMSlots, EvalSlots                  int
	// Total is the peak: the largest phase.
	Total int64
	// Budget is the device memory budget; 0 means unlimited.
	Budget int64
	// MomentsOnHost is true when the optimizer moments leave the device during rollout.
	MomentsOnHost bool
	// MasterOnHost is true when the float32 master weights leave the device during rollout.
	MasterOnHost bool
	// HostBytes is the host memory of what waits off the device during rollout: the offloaded
	// moments and master weights and the reference copy.
	HostBytes int64
	// Trainable is the number of trained parameters (LoRA: the adapters'; ppo: + the value head).
	Trainable int64
	// HostBeside is, on the go backend, what host memory holds beside the device phases (the
	// reference copy and the PRM's own weights off the device, a checkpoint's tensor, the
	// store's pending chunks and the process; the runtime reserve stands for the buffers the
	// backend keeps for reuse): the phases are sized to Budget less it, so that the one RAM holds
	// both. 0 on a GPU.
	HostBeside int64
	// Reason explains, when Fits is false, which phase is too big and its largest component.
	Reason string
	// Host is what the run needs outside the device: host memory and disk (host.go).
	Host HostPlan
	// Shape, Params and Settings are the inputs, for display.
	Shape    Shape
	Params   int64
	Settings Settings
}

// sizer computes component sizes for one shape and settings.
type sizer struct {
	sh                Shape
	st                Settings
	params, trainable int64
	b                 int64
	targets           []string // LoRA's targeted projections
}

// newSizer expects validated settings (the LoRA targets parse).
func newSizer(sh Shape, st Settings) sizer {
	z := sizer{sh: sh, st: st, params: sh.Params(), b: int64(st.ComputeBytes)}
	z.targets, _ = loraTargets(st.LoRATargets)
	for _, n := range z.trainableSizes() {
		z.trainable += n
	}
	return z
}

// kvCache is 2 (K and V) × layers × kv_heads × head_dim × slot length × slots × dtype bytes.
func (z sizer) kvCache(slots int) int64 {
	return 2 * int64(z.sh.Layers) * int64(z.sh.KVHeads) * int64(z.sh.HeadDim) * int64(z.st.SeqLen) * int64(slots) * z.b
}

// Attention paths (Settings.Attention), as engine/model names them.
const (
	AttentionDense   = "dense"
	AttentionChunked = "chunked"
	AttentionFused   = "fused"
	// DefaultAttentionBlock and BlocksInFlight are engine/model's: the query block of chunked
	// attention and how many blocks run at once.
	DefaultAttentionBlock = 256
	BlocksInFlight        = 2
)

// attention is the path training takes (Settings.Attention resolved) and its query block.
func (z sizer) attention() (string, int64) {
	block := z.st.AttentionBlock
	if block <= 0 {
		block = DefaultAttentionBlock
	}
	switch {
	case z.st.Attention != "":
		return z.st.Attention, int64(block)
	case z.b == 2:
		return AttentionFused, int64(block)
	case z.st.SeqLen > block:
		return AttentionChunked, int64(block)
	}
	return AttentionDense, int64(block)
}

// layerBytes is one decoder layer's saved activations per token over s positions when attention
// takes path (see the package comment).
func (z sizer) layerBytes(path string, s int) int64 {
	h, i := int64(z.sh.Hidden), int64(z.sh.Intermediate)
	q := int64(z.sh.Heads * z.sh.HeadDim)
	kv := int64(z.sh.KVHeads * z.sh.HeadDim)
	elems := 4*h + 2*q + 2*kv + 4*i
	if z.sh.Family == "qwen3" {
		elems += q + kv
	}
	switch path {
	case AttentionChunked:
		return (elems + kv) * z.b
	case AttentionFused:
		return elems*z.b + int64(z.sh.Heads)*4
	}
	return elems*z.b + int64(z.sh.Heads)*int64(s)*(4+z.b)
}

// attentionTransient is what attention holds beyond the saved activations while one layer runs,
// for m sequences: chunked, BlocksInFlight blocks of m × heads × block × S scores at (8+b) bytes.
func (z sizer) attentionTransient(m int) int64 {
	path, block := z.attention()
	if path != AttentionChunked {
		return 0
	}
	s := int64(z.st.SeqLen)
	return BlocksInFlight * int64(m) * int64(z.sh.Heads) * min(block, s) * s * (8 + z.b)
}

// activations of one training micro-batch of m sequences (see the package comment).
func (z sizer) activations(m int) int64 {
	t := int64(m) * int64(z.st.SeqLen)
	l := int64(z.sh.Layers)
	path, _ := z.attention()
	layer := z.layerBytes(path, z.st.SeqLen)
	chunk := min(t, LogitChunkTokens) * int64(z.sh.Vocab) * 4
	final := t * 2 * int64(z.sh.Hidden) * z.b
	// The log-prob head's gradient for the hidden states, assembled chunk by chunk in float32
	// (engine/train's chunkedHeadGradient): the packed input, the chunks' gradients and their
	// concatenation, about three [T, H] float32 buffers.
	head := 3 * t * int64(z.sh.Hidden) * 4
	if z.st.GradientCheckpointing {
		return t*l*int64(z.sh.Hidden)*z.b + 2*t*layer + final + head + 3*chunk + z.attentionTransient(m)
	}
	return t*l*layer + max(t*layer, 2*chunk) + final + head + t*int64(z.sh.Vocab)*4 + z.attentionTransient(m)
}

// sampler is the larger of a decode step over all slots (logits, probabilities and sort buffers
// for top-p over the vocabulary; one layer's temporaries per slot) and a prefill chunk.
func (z sizer) sampler(slots int) int64 {
	v := int64(z.sh.Vocab)
	layer := z.layerBytes(AttentionDense, z.st.SeqLen)
	decode := int64(slots) * (3*v*4 + layer)
	prefill := PrefillChunkTokens*(layer+2*int64(z.sh.Hidden)*z.b) + 3*v*4
	return max(decode, prefill)
}

func (p Phase) summed() Phase {
	p.Bytes = 0
	for _, b := range p.Holds {
		p.Bytes += b
	}
	return p
}

// largest returns the phase's biggest component.
func (p Phase) largest() (string, int64) {
	names := make([]string, 0, len(p.Holds))
	for n := range p.Holds {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestB := "", int64(-1)
	for _, n := range names {
		if p.Holds[n] > bestB {
			best, bestB = n, p.Holds[n]
		}
	}
	return best, bestB
}

// most returns the largest n in [1, hi] with cost(n) ≤ budget (cost non-decreasing in n), or 0.
func most(hi int, budget int64, cost func(int) int64) int {
	if hi < 1 || cost(1) > budget {
		return 0
	}
	lo := 1 // cost(lo) fits
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if cost(mid) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// Compute plans the device memory of shape under settings within budget bytes (0 = unlimited:
// the largest allowed slots and micro-batch, moments kept on the device unless told otherwise).
func Compute(shape Shape, st Settings, budget int64) (*Plan, error) {
	if err := shape.Validate(); err != nil {
		return nil, err
	}
	if err := st.validate(); err != nil {
		return nil, err
	}
	if budget < 0 {
		return nil, fmt.Errorf("memory budget %d bytes is negative", budget)
	}
	if st.EvalOnly {
		st.Reference, st.PRM, st.Eval, st.ValueHead, st.LoRARank, st.LoRATargets = false, nil, nil, false, 0, ""
		st.RemoteRollout = false
	}
	if st.RemoteRollout {
		st.Eval = nil // evaluations generate on the engines too
	}
	z := newSizer(shape, st)
	p := &Plan{Budget: budget, Shape: shape, Params: z.params, Trainable: z.trainable, Settings: st}
	if beside := z.hostBeside(); beside > 0 && budget > 0 {
		// The go backend's device is the host's memory: what the host holds beside the device
		// phases comes out of the same budget.
		p.HostBeside = beside
		budget = max(budget-beside, 1)
	}
	fits := func(b int64) bool { return budget == 0 || b <= budget }

	maxSlots, maxMicro := st.MaxKVSlots, st.MaxMicroBatch
	if st.KVSlots > 0 {
		maxSlots = st.KVSlots
	}
	if st.MicroBatch > 0 {
		maxMicro = st.MicroBatch
	}

	var w where // an evaluation-only run has no master copy or moments to place
	if !st.EvalOnly {
		w = z.placement(maxSlots, fits)
	}
	p.MomentsOnHost, p.MasterOnHost = w.momentsOnHost, w.masterOnHost
	p.Reference = z.referencePhase(w)
	p.PRM = z.prmPhase(1, w)

	var reasons []string
	if st.EvalOnly {
		maxMicro = 0
	}
	if st.RemoteRollout { // the engines hold the KV cache: rollout's phase is what waits for the update
		maxSlots = 0
	}
	if budget == 0 {
		p.KVSlots, p.MicroBatch = maxSlots, maxMicro
	} else {
		rolloutCost := func(n int) int64 { return z.rollout(n, w).Bytes }
		trainCost := func(n int) int64 { return z.train(n).Bytes }
		p.KVSlots = most(maxSlots, budget, rolloutCost)
		p.MicroBatch = most(maxMicro, budget, trainCost)
		if st.RemoteRollout {
			if r := z.rollout(0, w); r.Bytes > budget {
				reasons = append(reasons, tooBig(r, budget, "no KV slot (the engines generate)"))
			}
		} else if st.KVSlots > 0 && p.KVSlots < st.KVSlots {
			reasons = append(reasons, tooBig(z.rollout(st.KVSlots, w), budget,
				fmt.Sprintf("%d KV slots (fixed; %s)", st.KVSlots, fitCount(p.KVSlots, "slot"))))
			p.KVSlots = 0
		} else if p.KVSlots == 0 {
			reasons = append(reasons, tooBig(z.rollout(1, w), budget, "1 KV slot"))
		}
		if p.Reference.Bytes > budget {
			reasons = append(reasons, tooBig(p.Reference, budget, "1 sequence"))
		}
		if st.EvalOnly {
			p.MicroBatch = 0
		} else if st.MicroBatch > 0 && p.MicroBatch < st.MicroBatch {
			reasons = append(reasons, tooBig(z.train(st.MicroBatch), budget,
				fmt.Sprintf("micro-batch %d (fixed; %s)", st.MicroBatch, fitCount(p.MicroBatch, "sequence"))))
			p.MicroBatch = 0
		} else if p.MicroBatch == 0 {
			reasons = append(reasons, tooBig(z.train(1), budget, "micro-batch 1"))
		}
	}
	reasons = append(reasons, z.chooseEval(p, w, budget)...)
	reasons = append(reasons, z.choosePRM(p, w, budget)...)
	p.Fits = len(reasons) == 0
	p.Reason = strings.Join(reasons, "; ")

	// Report components at what was chosen, or at the smallest (or fixed) size that was tried.
	slots, micro := p.KVSlots, p.MicroBatch
	if slots == 0 && !st.RemoteRollout {
		slots = max(st.KVSlots, 1)
	}
	if micro == 0 {
		micro = max(st.MicroBatch, 1)
	}
	p.Rollout, p.Train = z.rollout(slots, w), z.train(micro)
	if st.EvalOnly {
		p.Train = Phase{Name: "train", Holds: map[string]int64{}, Host: map[string]int64{}}
	}
	p.Total = max(p.Rollout.Bytes, p.Eval.Bytes, p.PRM.Bytes, p.Reference.Bytes, p.Train.Bytes)
	p.Components = map[string]int64{}
	for _, n := range componentOrder() {
		remoteOnly := st.RemoteRollout && (n == InferenceWeights || n == KVCache || n == SamplerWorkspace) // held on the engines
		if b := max(p.Rollout.Holds[n], p.Eval.Holds[n], p.PRM.Holds[n], p.Reference.Holds[n], p.Train.Holds[n]); b > 0 ||
			!st.EvalOnly && !remoteOnly && n != PRMWeights && n != PRMKVCache && n != EvalKVCache {
			p.Components[n] = b
		}
	}
	for _, b := range p.Rollout.Host {
		p.HostBytes += b
	}
	p.Host = z.host(p)
	return p, nil
}

func fitCount(n int, unit string) string {
	switch n {
	case 0:
		return "not even 1 fits"
	case 1:
		return "at most 1 " + unit + " fits"
	}
	return fmt.Sprintf("at most %d %ss fit", n, unit)
}

// tooBig explains a phase that exceeds the budget at the given size.
func tooBig(p Phase, budget int64, at string) string {
	name, b := p.largest()
	return fmt.Sprintf("the %s phase needs %s at %s but the budget is %s; its largest part is %s (%s)",
		p.Name, gib(p.Bytes), at, gib(budget), name, gib(b))
}
