package ledger

import (
	"fmt"
	"slices"
	"strings"
)

// The recipe options that change what a phase holds: where the master weights and the AdamW
// moments wait during rollout, 8-bit moments and LoRA. This file sizes them and builds the three
// phases from the sizer's components.
//
// # Where each component lives
//
//	                    rollout              reference              train
//	inference weights   device               freed                  freed
//	KV cache            device               freed                  freed
//	reference weights   host                 device                 host
//	master weights      device or host (1)   device or host (1)     device
//	AdamW moments       device or host (2)   device or host (2)     device
//	gradients           -                    -                      device
//	activations         sampler workspace    one forward, no grads  one micro-batch
//
// (1) memory.master_offload, (2) memory.optimizer_offload; auto moves the moments first and the
// master weights second, each only when rollout cannot reach its most slots otherwise. The
// reference forward runs after rollout frees its KV cache and inference copy and before the
// master weights and moments come back, so the reference copy and the update never share the
// device. With LoRA there is no reference copy: the reference is the frozen base with the
// adapters off, and the base (in the compute dtype) is on the device in every phase.

// MomentBlock is the number of values that share one float32 scale in 8-bit AdamW moments
// (train.MomentBlock must agree).
const MomentBlock = 256

// LoRATargets are the linear projections of a decoder layer that can carry adapters.
func LoRATargets() []string {
	return []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
}

// loraTargets parses Settings.LoRATargets: empty means all seven; the "_proj" suffix may be left out.
func loraTargets(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return LoRATargets(), nil
	}
	var out []string
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if !strings.HasSuffix(t, "_proj") {
			t += "_proj"
		}
		if !slices.Contains(LoRATargets(), t) {
			return nil, fmt.Errorf("lora target %q is not one of %s", strings.TrimSuffix(t, "_proj"), strings.Join(LoRATargets(), ", "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// linearDims returns the input and output width of a decoder layer's linear projection.
func (s Shape) linearDims(name string) (in, out int64) {
	h, i := int64(s.Hidden), int64(s.Intermediate)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	switch name {
	case "q_proj":
		return h, q
	case "k_proj", "v_proj":
		return h, kv
	case "o_proj":
		return q, h
	case "gate_proj", "up_proj":
		return h, i
	}
	return i, h // down_proj
}

// tensorSizes lists the element count of every parameter tensor the model holds (Params is their sum).
func (s Shape) tensorSizes() []int64 {
	h, v := int64(s.Hidden), int64(s.Vocab)
	out := []int64{v * h}
	for range s.Layers {
		for _, name := range LoRATargets() {
			in, o := s.linearDims(name)
			out = append(out, in*o)
		}
		out = append(out, h, h) // input and post-attention RMSNorm
		switch s.Family {
		case "qwen3":
			out = append(out, int64(s.HeadDim), int64(s.HeadDim))
		case "qwen2":
			q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
			out = append(out, q, kv, kv)
		}
	}
	out = append(out, h)
	if !s.Tied {
		out = append(out, v*h)
	}
	return out
}

// trainableSizes lists the element count of every trained tensor: the model's (full fine-tune)
// or, with LoRA, A [rank, in] and B [out, rank] per targeted projection per layer; then the value
// head's weight and bias (ppo).
func (z sizer) trainableSizes() []int64 {
	var out []int64
	if z.st.LoRARank > 0 {
		r := int64(z.st.LoRARank)
		for range z.sh.Layers {
			for _, name := range z.targets {
				in, o := z.sh.linearDims(name)
				out = append(out, r*in, o*r)
			}
		}
	} else {
		out = z.sh.tensorSizes()
	}
	if z.st.ValueHead {
		out = append(out, int64(z.sh.Hidden), 1)
	}
	return out
}

// momentBytes is one moment of a tensor of n values: float32, or 8-bit in blocks of MomentBlock
// values, each block with its float32 scale (the trainer stores [⌈n/256⌉, 256 + 4] bytes).
func (z sizer) momentBytes(n int64) int64 {
	if z.st.OptimizerBits == 8 {
		return (n + MomentBlock - 1) / MomentBlock * (MomentBlock + 4)
	}
	return 4 * n
}

func (z sizer) master() int64 { return z.trainable * 4 }
func (z sizer) grads() int64  { return z.trainable * 4 }

// moments is AdamW's m and v over every trained tensor.
func (z sizer) moments() int64 {
	var n int64
	for _, s := range z.trainableSizes() {
		n += 2 * z.momentBytes(s)
	}
	return n
}

// inference is the compute-dtype copy rollout decodes with: the whole model, or with LoRA the
// adapters only (the base is counted as BaseWeights).
func (z sizer) inference() int64 {
	if z.st.LoRARank > 0 {
		return (z.trainable - z.head()) * z.b
	}
	return z.params * z.b
}

// base is LoRA's frozen base in the compute dtype, shared by rollout, the reference and training.
func (z sizer) base() int64 {
	if z.st.LoRARank > 0 {
		return z.params * z.b
	}
	return 0
}

// reference is the frozen reference copy; none with LoRA (the base with the adapters off).
func (z sizer) reference() int64 {
	if !z.st.Reference || z.st.LoRARank > 0 {
		return 0
	}
	return z.params * z.b
}

func (z sizer) head() int64 {
	if z.st.ValueHead {
		return int64(z.sh.Hidden) + 1
	}
	return 0
}

// loraActivations is what the adapters add to a micro-batch's saved activations: x·A (rank values
// per targeted projection per token) for every layer kept (two with checkpointing, else all + 1).
func (z sizer) loraActivations(m int) int64 {
	if z.st.LoRARank == 0 {
		return 0
	}
	layers := int64(z.sh.Layers) + 1
	if z.st.GradientCheckpointing {
		layers = 2
	}
	return int64(m) * int64(z.st.SeqLen) * layers * int64(z.st.LoRARank*len(z.targets)) * z.b
}

// referenceForward is the workspace of the reference (teacher) forward: one sequence at a time,
// without gradients, one layer's temporaries for every token and three buffers of one log-prob chunk.
func (z sizer) referenceForward() int64 {
	t := int64(z.st.SeqLen)
	chunk := min(t, LogitChunkTokens) * int64(z.sh.Vocab) * 4
	path, _ := z.attention()
	return t*(z.layerBytes(path, z.st.SeqLen)+2*int64(z.sh.Hidden)*z.b) + 3*chunk + z.attentionTransient(1)
}

// where says which of the waiting components are in host memory during rollout (and the
// reference forward, which runs before they come back).
type where struct{ masterOnHost, momentsOnHost bool }

// placement applies memory.optimizer_offload and memory.master_offload: auto moves the moments,
// then the master weights, to the host only when rollout does not reach slots otherwise or the
// reference forward would not fit beside them.
func (z sizer) placement(slots int, fits func(int64) bool) where {
	w := where{masterOnHost: z.st.MasterOffload == OffloadHost, momentsOnHost: z.st.Offload == OffloadHost}
	short := func() bool {
		return !fits(z.rollout(slots, w).Bytes) || !fits(z.referencePhase(w).Bytes) || z.st.PRM != nil && !fits(z.prmPhase(1, w).Bytes) ||
			z.st.Eval != nil && !fits(z.evalPhase(1, w).Bytes)
	}
	if z.st.Offload == OffloadAuto && short() {
		w.momentsOnHost = true
	}
	if z.st.MasterOffload == OffloadAuto && short() {
		w.masterOnHost = true
	}
	return w
}

// waiting puts the master weights and moments on the device or the host of p.
func (z sizer) waiting(p *Phase, w where) {
	if z.st.EvalOnly { // nothing waits: no trainer, reference or PRM
		return
	}
	put := func(name string, b int64, onHost bool) {
		if onHost {
			p.Host[name] = b
		} else {
			p.Holds[name] = b
		}
	}
	put(MasterWeights, z.master(), w.masterOnHost)
	put(OptimizerMoments, z.moments(), w.momentsOnHost)
	if r := z.reference(); r > 0 && p.Holds[ReferenceWeights] == 0 {
		p.Host[ReferenceWeights] = r
	}
	if r := z.prmOwnWeights(); r > 0 && p.Holds[PRMWeights] == 0 {
		p.Host[PRMWeights] = r
	}
}

func newPhase(name string) Phase {
	return Phase{Name: name, Holds: map[string]int64{Runtime: RuntimeReserve}, Host: map[string]int64{}}
}

func (z sizer) rollout(slots int, w where) Phase {
	p := newPhase("rollout")
	if !z.st.RemoteRollout {
		p.Holds[InferenceWeights] = z.inference()
		p.Holds[KVCache] = z.kvCache(slots)
		p.Holds[SamplerWorkspace] = z.sampler(slots)
	}
	z.waiting(&p, w)
	z.addBase(&p)
	return p.summed()
}

// referencePhase is the reference (teacher) forward, between rollout and the update; empty when
// the recipe needs no reference.
func (z sizer) referencePhase(w where) Phase {
	if !z.st.Reference {
		return Phase{Name: "reference", Holds: map[string]int64{}, Host: map[string]int64{}}
	}
	p := newPhase("reference")
	if r := z.reference(); r > 0 {
		p.Holds[ReferenceWeights] = r
	}
	p.Holds[Activations] = z.referenceForward()
	z.waiting(&p, w)
	z.addBase(&p)
	return p.summed()
}

func (z sizer) train(micro int) Phase {
	p := newPhase("train")
	p.Holds[Gradients] = z.grads()
	p.Holds[Activations] = z.activations(micro) + z.loraActivations(micro)
	if w := z.gradientWorkspace(); w > 0 {
		p.Holds[GradientWorkspace] = w
	}
	z.waiting(&p, where{})
	z.addBase(&p)
	return p.summed()
}

// gradientWorkspace is what the go backend holds beside the gradients while it assembles the
// vocabulary projection's (engine/train's log-prob head, chunk by chunk): two more float32
// buffers of vocab × hidden, the running sum and one chunk's product (the head sums the chunks'
// products as it makes them, engine/train's headWeightGrad; with tied embeddings the lookup's
// scattered gradient joins the sum the same way). Measured with the backend's held-byte count on a
// 4-layer model of Qwen3-0.6B's width, one 64-token update: the gradients and two buffers of the
// embedding's 608 MiB, to the MiB. A LoRA run does not train the projection. On a GPU, XLA
// schedules the sum itself; #49's check against NVML measures it there.
func (z sizer) gradientWorkspace() int64 {
	if !z.st.DeviceIsHost || z.st.LoRARank > 0 {
		return 0
	}
	return 2 * int64(z.sh.Vocab) * int64(z.sh.Hidden) * 4
}

func (z sizer) addBase(p *Phase) {
	if b := z.base(); b > 0 {
		p.Holds[BaseWeights] = b
	}
}
