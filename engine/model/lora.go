package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/store/safetensors"
)

// LoRA configures low-rank adapters on a decoder's linear projections: each targeted weight W
// [out, in] computes y = x·Wᵀ + (Alpha ÷ Rank)·(x·Aᵀ)·Bᵀ with A [Rank, in] and B [out, Rank].
// Rank 0 means no adapters. Targets use HuggingFace's module names (q_proj … down_proj), as PEFT
// does.
type LoRA struct {
	Rank    int
	Alpha   float64
	Targets []string
}

// loraModules are the projections that can carry adapters, in canonical (graph) order, with
// the suffix of their weight in a decoder layer.
var loraModules = []struct{ name, suffix string }{
	{"q_proj", sQ}, {"k_proj", sK}, {"v_proj", sV}, {"o_proj", sO},
	{"gate_proj", sGate}, {"up_proj", sUp}, {"down_proj", sDown},
}

// LoRATargets lists the projection names that can carry adapters, in canonical order.
func LoRATargets() []string {
	out := make([]string, len(loraModules))
	for i, m := range loraModules {
		out[i] = m.name
	}
	return out
}

// Enabled reports whether there are adapters.
func (l LoRA) Enabled() bool { return l.Rank > 0 }

// Scale is the factor of the adapters' output, Alpha ÷ Rank.
func (l LoRA) Scale() float64 { return l.Alpha / float64(l.Rank) }

// Validate checks the rank, alpha and targets.
func (l LoRA) Validate() error {
	if l.Rank < 0 {
		return fmt.Errorf("lora: rank %d; want ≥ 0 (0 = no adapters)", l.Rank)
	}
	if l.Rank == 0 {
		return nil
	}
	if !(l.Alpha > 0) || math.IsInf(l.Alpha, 0) {
		return fmt.Errorf("lora: alpha %v; want a finite value > 0", l.Alpha)
	}
	if len(l.Targets) == 0 {
		return fmt.Errorf("lora: rank %d with no targets; name some of %s", l.Rank, strings.Join(LoRATargets(), ", "))
	}
	for i, t := range l.Targets {
		if !slices.Contains(LoRATargets(), t) {
			return fmt.Errorf("lora: target %q is not a projection; want some of %s", t, strings.Join(LoRATargets(), ", "))
		}
		if slices.Contains(l.Targets[:i], t) {
			return fmt.Errorf("lora: target %q is listed twice", t)
		}
	}
	return nil
}

// LoRAName is the name of adapter ab ("A" or "B") of a weight: PEFT's key without its
// "base_model.model." prefix, e.g. model.layers.0.self_attn.q_proj.lora_A.weight.
func LoRAName(weight, ab string) string {
	return strings.TrimSuffix(weight, ".weight") + ".lora_" + ab + ".weight"
}

// IsAdapter reports whether a parameter name is a LoRA adapter's.
func IsAdapter(name string) bool { return safetensors.IsAdapter(name) }

// loraShapes lists the adapters of c.LoRA, after the base parameters in graph order: per layer,
// per targeted projection in canonical order, A [rank, in] then B [out, rank].
func loraShapes(c *Config) []ParamSpec {
	l := c.LoRA
	if !l.Enabled() {
		return nil
	}
	h, hd, kv, nh, inter := c.HiddenSize, c.HeadDim, c.NumKVHeads, c.NumHeads, c.IntermediateSize
	dims := map[string][2]int{ // out, in
		sQ: {nh * hd, h}, sK: {kv * hd, h}, sV: {kv * hd, h}, sO: {h, nh * hd},
		sGate: {inter, h}, sUp: {inter, h}, sDown: {h, inter},
	}
	var specs []ParamSpec
	for i := 0; i < c.NumLayers; i++ {
		for _, m := range loraModules {
			if !slices.Contains(l.Targets, m.name) {
				continue
			}
			d, w := dims[m.suffix], layerName(i, m.suffix)
			specs = append(specs, ParamSpec{LoRAName(w, "A"), []int{l.Rank, d[1]}}, ParamSpec{LoRAName(w, "B"), []int{d[0], l.Rank}})
		}
	}
	return specs
}

// loraDelta is a targeted projection's adapter output (Alpha ÷ Rank)·(x·Aᵀ)·Bᵀ for x [..., in],
// in the compute dtype, or nil when weight has no adapter.
func (n *Net) loraDelta(x *Node, weight string) *Node {
	nameA := LoRAName(weight, "A")
	if _, ok := n.params[nameA]; !ok {
		return nil
	}
	xa := DotGeneral(x, []int{x.Rank() - 1}, nil, n.w(nameA), []int{1}, nil)                  // [..., rank]
	d := DotGeneral(xa, []int{xa.Rank() - 1}, nil, n.w(LoRAName(weight, "B")), []int{1}, nil) // [..., out]
	return MulScalar(d, n.Config.LoRA.Scale())
}

// TrainableIndices lists the parameters an optimizer updates: the adapters with LoRA (the base
// is frozen), every parameter without.
func (p *Params) TrainableIndices() []int {
	var out []int
	for i, s := range p.Specs {
		if !p.Config.LoRA.Enabled() || IsAdapter(s.Name) {
			out = append(out, i)
		}
	}
	return out
}

// WithLoRA returns p's model with adapters l: the base parameters converted (on the host) to the
// compute dtype and frozen, each A drawn as PEFT does (Kaiming-uniform with a = √5, that is
// U(−1/√in, 1/√in)) from seed, each B zero, so the model computes exactly the base's function
// until B is trained. The adapters are float32 (the trained master copy). p's base tensors are
// taken over: p must not be used afterwards.
func WithLoRA(p *Params, l LoRA, seed uint64, compute dtypes.DType) (*Params, error) {
	if p.Config.LoRA.Enabled() {
		return nil, fmt.Errorf("lora: the model already has adapters")
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	cfg := *p.Config
	cfg.LoRA = LoRA{Rank: l.Rank, Alpha: l.Alpha, Targets: append([]string{}, l.Targets...)}
	q := newParams(&cfg)
	rng := rand.New(rand.NewPCG(seed, 0x4c6f5241)) // "LoRA"
	for i, s := range q.Specs {
		if i < len(p.Values) {
			v, err := toDType(p.Values[i], compute)
			if err != nil {
				return nil, fmt.Errorf("lora: base parameter %s: %w", s.Name, err)
			}
			q.Values[i] = v
			continue
		}
		v := make([]float32, s.Size())
		if strings.HasSuffix(s.Name, ".lora_A.weight") {
			bound := 1 / math.Sqrt(float64(s.Dims[1]))
			for j := range v {
				v[j] = float32((2*rng.Float64() - 1) * bound)
			}
		}
		q.Values[i] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
	}
	return q, nil
}

// Base returns the frozen base of a model with adapters: a config without LoRA and the same base
// tensors (shared, not copied), so that a model built on it is the base with the adapters off —
// the reference model of a LoRA run.
func (p *Params) Base() *Params {
	cfg := *p.Config
	cfg.LoRA = LoRA{}
	q := newParams(&cfg)
	copy(q.Values, p.Values[:len(q.Specs)])
	return q
}

// toDType converts a float32 host tensor to dt (the same tensor when it already has it).
func toDType(t *tensors.Tensor, dt dtypes.DType) (*tensors.Tensor, error) {
	if t.DType() == dt {
		return t, nil
	}
	v, err := float32Data(t)
	if err != nil {
		return nil, err
	}
	dims := t.Shape().Dimensions
	var out *tensors.Tensor
	switch dt {
	case dtypes.BFloat16:
		b := make([]bfloat16.BFloat16, len(v))
		for i, x := range v {
			b[i] = bfloat16.FromFloat32(x)
		}
		out = tensors.FromFlatDataAndDimensions(b, dims...)
	case dtypes.Float16:
		out = tensors.FromFlatDataAndDimensions(float16.FromFloat32s(v...), dims...)
	case dtypes.Float32:
		out = tensors.FromFlatDataAndDimensions(v, dims...)
	default:
		return nil, fmt.Errorf("dtype %s is not a float the model computes in", dt)
	}
	t.FinalizeAll()
	return out, nil
}

// float32Data copies a float32, bfloat16 or float16 tensor's values as float32.
func float32Data(t *tensors.Tensor) ([]float32, error) {
	switch t.DType() {
	case dtypes.BFloat16:
		b, err := tensors.CopyFlatData[bfloat16.BFloat16](t)
		if err != nil {
			return nil, err
		}
		v := make([]float32, len(b))
		for i, x := range b {
			v[i] = x.Float32()
		}
		return v, nil
	case dtypes.Float16:
		h, err := tensors.CopyFlatData[float16.Float16](t)
		if err != nil {
			return nil, err
		}
		v := make([]float32, len(h))
		for i, x := range h {
			v[i] = x.Float32()
		}
		return v, nil
	}
	return tensors.CopyFlatData[float32](t)
}

// SetAdapters replaces the adapters' values with the same-named tensors of ts (F32, BF16 or
// F16: a checkpoint's), checking names and shapes; the frozen base is left as it is.
func (p *Params) SetAdapters(ts []*safetensors.Tensor, source string) error {
	byName := make(map[string]*safetensors.Tensor, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	f := &safetensors.File{Tensors: byName, Source: source}
	idx := p.TrainableIndices()
	vals := make([]*tensors.Tensor, len(idx))
	for k, i := range idx {
		s := p.Specs[i]
		if _, ok := byName[s.Name]; !ok {
			return fmt.Errorf("%s has no LoRA adapter %s; it was saved by a run with other train.lora settings (rank %d, targets %s)",
				source, s.Name, p.Config.LoRA.Rank, strings.Join(p.Config.LoRA.Targets, ", "))
		}
		t, err := f.Get(s.Name, s.Dims)
		if err != nil {
			return err
		}
		v, err := t.Float32()
		if err != nil {
			return fmt.Errorf("%s: tensor %s: %w", source, s.Name, err)
		}
		vals[k] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
	}
	for k, i := range idx {
		p.Values[i].FinalizeAll()
		p.Values[i] = vals[k]
	}
	return nil
}
