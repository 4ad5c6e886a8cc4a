package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/store/safetensors"
)

// Parameter names follow HuggingFace's Qwen2/Qwen3 checkpoints exactly, so that loading and
// saving are a matter of matching names.
const (
	nameEmbed  = "model.embed_tokens.weight"
	nameNorm   = "model.norm.weight"
	nameLMHead = "lm_head.weight"
)

func layerName(i int, suffix string) string { return fmt.Sprintf("model.layers.%d.%s", i, suffix) }

// Per-layer parameter suffixes. The order here is the order of graph parameters.
const (
	sInNorm   = "input_layernorm.weight"
	sQ        = "self_attn.q_proj.weight"
	sK        = "self_attn.k_proj.weight"
	sV        = "self_attn.v_proj.weight"
	sO        = "self_attn.o_proj.weight"
	sQBias    = "self_attn.q_proj.bias"
	sKBias    = "self_attn.k_proj.bias"
	sVBias    = "self_attn.v_proj.bias"
	sQNorm    = "self_attn.q_norm.weight"
	sKNorm    = "self_attn.k_norm.weight"
	sPostNorm = "post_attention_layernorm.weight"
	sGate     = "mlp.gate_proj.weight"
	sUp       = "mlp.up_proj.weight"
	sDown     = "mlp.down_proj.weight"
)

// ParamSpec names one parameter and its float32 shape.
type ParamSpec struct {
	Name string
	Dims []int
}

// Size is the number of elements.
func (p ParamSpec) Size() int {
	n := 1
	for _, d := range p.Dims {
		n *= d
	}
	return n
}

// ParamShapes lists every parameter of the model in canonical (graph) order.
func ParamShapes(c *Config) []ParamSpec {
	h, hd, kv, nh, inter := c.HiddenSize, c.HeadDim, c.NumKVHeads, c.NumHeads, c.IntermediateSize
	specs := []ParamSpec{{nameEmbed, []int{c.VocabSize, h}}}
	for i := 0; i < c.NumLayers; i++ {
		add := func(suffix string, dims ...int) {
			specs = append(specs, ParamSpec{layerName(i, suffix), dims})
		}
		add(sInNorm, h)
		add(sQ, nh*hd, h)
		add(sK, kv*hd, h)
		add(sV, kv*hd, h)
		add(sO, h, nh*hd)
		if c.AttentionBias {
			add(sQBias, nh*hd)
			add(sKBias, kv*hd)
			add(sVBias, kv*hd)
		}
		if c.Family == Qwen3 {
			add(sQNorm, hd)
			add(sKNorm, hd)
		}
		add(sPostNorm, h)
		add(sGate, inter, h)
		add(sUp, inter, h)
		add(sDown, h, inter)
	}
	specs = append(specs, ParamSpec{nameNorm, []int{h}})
	if !c.TieWordEmbeddings {
		specs = append(specs, ParamSpec{nameLMHead, []int{c.VocabSize, h}})
	}
	return append(specs, loraShapes(c)...)
}

// Params holds the model's weights as float32 tensors in ParamShapes order. They are the master
// copy: the forward pass casts them to the compute dtype inside the graph.
type Params struct {
	Config *Config
	Specs  []ParamSpec
	Values []*tensors.Tensor
	index  map[string]int
}

func newParams(c *Config) *Params {
	p := &Params{Config: c, Specs: ParamShapes(c), index: map[string]int{}}
	p.Values = make([]*tensors.Tensor, len(p.Specs))
	for i, s := range p.Specs {
		p.index[s.Name] = i
	}
	return p
}

// Sibling returns parameters of the same model holding values instead (one per spec, in graph
// order, any float dtype): an inference copy in the compute dtype, say. It shares nothing
// mutable with p.
func (p *Params) Sibling(values []*tensors.Tensor) (*Params, error) {
	if len(values) != len(p.Specs) {
		return nil, fmt.Errorf("model: %d parameter values for %d parameters", len(values), len(p.Specs))
	}
	q := newParams(p.Config)
	copy(q.Values, values)
	return q, nil
}

// Get returns the tensor of the named parameter, or nil.
func (p *Params) Get(name string) *tensors.Tensor {
	if i, ok := p.index[name]; ok {
		return p.Values[i]
	}
	return nil
}

// Bytes is the size of the float32 master copy.
func (p *Params) Bytes() int64 {
	var n int64
	for _, s := range p.Specs {
		n += 4 * int64(s.Size())
	}
	return n
}

// RandomParams initialises a model the way HF does for a fresh checkpoint: normal(0, std) weights,
// zero biases, unit norms. Deterministic for a seed.
func RandomParams(c *Config, seed uint64, std float64) *Params {
	p := newParams(c)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for i, s := range p.Specs {
		v := make([]float32, s.Size())
		if drawn(s, v) {
			for j := range v {
				v[j] = float32(rng.NormFloat64() * std)
			}
		}
		p.Values[i] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
	}
	return p
}

// RandomParamsParallel is RandomParams for real model sizes, on every core: each block of
// randomBlock elements of a tensor draws from its own stream, seeded by (seed, tensor, block), so
// the weights are the same for any number of cores — but not RandomParams' (one stream over the
// whole model, which the built-in model's pipeline starts from and must keep). For benchmarks'
// and the GPU self-check's random weights: Qwen3-4B's 4.0 billion values in seconds rather than
// minutes.
func RandomParamsParallel(c *Config, seed uint64, std float64) *Params {
	p := newParams(c)
	type job struct {
		v        []float32
		tensor   int
		from, to int
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				rng := rand.New(rand.NewPCG(seed, uint64(j.tensor)<<32|uint64(j.from/randomBlock)))
				for k := j.from; k < j.to; k++ {
					j.v[k] = float32(rng.NormFloat64() * std)
				}
			}
		}()
	}
	values := make([][]float32, len(p.Specs))
	for i, s := range p.Specs {
		v := make([]float32, s.Size())
		values[i] = v
		if drawn(s, v) {
			for from := 0; from < len(v); from += randomBlock {
				jobs <- job{v, i, from, min(from+randomBlock, len(v))}
			}
		}
	}
	close(jobs)
	wg.Wait()
	for i, s := range p.Specs {
		p.Values[i] = tensors.FromFlatDataAndDimensions(values[i], s.Dims...)
		values[i] = nil
	}
	return p
}

// randomBlock is how many values of a tensor one stream of RandomParamsParallel draws.
const randomBlock = 1 << 20

// drawn says whether the values v of s are drawn at random: a matrix's are; a norm weight's are
// ones (set here) and a bias's zeros.
func drawn(s ParamSpec, v []float32) bool {
	if len(s.Dims) != 1 {
		return true
	}
	if isNormName(s.Name) {
		for j := range v {
			v[j] = 1
		}
	}
	return false
}

func isNormName(name string) bool {
	for _, suf := range []string{"norm.weight", "layernorm.weight"} {
		if len(name) >= len(suf) && name[len(name)-len(suf):] == suf {
			return true
		}
	}
	return false
}

// LoadParams reads the weights of a HuggingFace folder (model.safetensors or a sharded index) into
// float32 tensors, checking every name and shape against the config.
func LoadParams(dir string, c *Config) (*Params, error) {
	f, err := safetensors.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return ParamsFromFile(f, c, dir)
}

// ParamsFromFile converts safetensors tensors (F32, BF16 or F16) into Params.
func ParamsFromFile(f *safetensors.File, c *Config, source string) (*Params, error) {
	p := newParams(c)
	for i, s := range p.Specs {
		t, err := f.Get(s.Name, s.Dims)
		if err != nil && s.Name == nameLMHead {
			return nil, fmt.Errorf("%w (config.json says tie_word_embeddings is false)", err)
		}
		if err != nil {
			return nil, err
		}
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", source, s.Name, err)
		}
		p.Values[i] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
	}
	return p, nil
}

// SetFromTensors replaces every parameter's value with the same-named safetensors tensor (F32,
// BF16 or F16), checking names and shapes: loading a checkpoint into a live model.
func (p *Params) SetFromTensors(ts []*safetensors.Tensor, source string) error {
	f := &safetensors.File{Tensors: map[string]*safetensors.Tensor{}, Source: source}
	for _, t := range ts {
		f.Tensors[t.Name] = t
	}
	q, err := ParamsFromFile(f, p.Config, source)
	if err != nil {
		return err
	}
	for i := range p.Values {
		p.Values[i].FinalizeAll()
		p.Values[i] = q.Values[i]
	}
	return nil
}

// Tensors converts the parameters into safetensors tensors of the given dtype (F32, BF16, F16),
// in sorted-name order.
func (p *Params) Tensors(dt safetensors.DType) ([]*safetensors.Tensor, error) {
	out := make([]*safetensors.Tensor, 0, len(p.Specs))
	for i := range p.Specs {
		t, err := p.Tensor(i, dt)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stream returns the parameters as a source a streaming writer pulls (store.SaveCheckpointFrom):
// each call converts the next one (Specs order) into dt, nil after the last; *bytes counts the
// data handed out so far. The host holds one converted tensor at a time, not the whole model.
func (p *Params) Stream(dt safetensors.DType) (next func() (*safetensors.Tensor, error), bytes *int64) {
	i, n := 0, new(int64)
	return func() (*safetensors.Tensor, error) {
		if i == len(p.Specs) {
			return nil, nil
		}
		t, err := p.Tensor(i, dt)
		i++
		if t != nil {
			*n += int64(len(t.Data))
		}
		return t, err
	}, n
}

// Tensor converts the i-th parameter (Specs order) into a safetensors tensor of the given dtype:
// one at a time, for a writer that streams them (a checkpoint).
func (p *Params) Tensor(i int, dt safetensors.DType) (*safetensors.Tensor, error) {
	s := p.Specs[i]
	v, err := float32Data(p.Values[i]) // a LoRA base is held in the compute dtype
	if err != nil {
		return nil, fmt.Errorf("parameter %s: %w", s.Name, err)
	}
	t, err := safetensors.FromFloat32(s.Name, s.Dims, v, dt)
	if err != nil {
		return nil, fmt.Errorf("parameter %s: %w", s.Name, err)
	}
	return t, nil
}

// Save writes config.json and model.safetensors into dir.
func (p *Params) Save(dir string, dt safetensors.DType) error {
	ts, err := p.Tensors(dt)
	if err != nil {
		return err
	}
	if err := safetensors.WriteDir(dir, map[string]string{"format": "pt"}, ts, 0); err != nil {
		return err
	}
	cfg := *p.Config
	cfg.DType = map[safetensors.DType]string{"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dt]
	js, err := cfg.JSON()
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, "config.json", js)
}

// Shape is the float32 GoMLX shape of a spec.
func (p ParamSpec) Shape() shapes.Shape { return shapes.Make(dtypes.Float32, p.Dims...) }

// ropeInvFreq returns θ^(-2i/d) for i in [0, d/2), computed as transformers does.
func ropeInvFreq(theta float64, headDim int) []float32 {
	out := make([]float32, headDim/2)
	for i := range out {
		exp := float32(2*i) / float32(headDim)
		out[i] = float32(1.0 / math.Pow(theta, float64(exp)))
	}
	return out
}

// ReloadFrom replaces every value with the same-named weight of the HuggingFace folder dir
// (config.json must describe the same shapes), converted to the dtype each value has now (an
// inference copy's compute dtype): a served model taking new weights. Nothing may run on the
// values meanwhile. On an error the values are as they were.
func (p *Params) ReloadFrom(dir string) error {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return err
	}
	specs := ParamShapes(cfg)
	if len(specs) != len(p.Specs) {
		return fmt.Errorf("%s: its config.json describes another model than the one served (%d parameters, not %d)", dir, len(specs), len(p.Specs))
	}
	for i, s := range specs {
		if s.Name != p.Specs[i].Name || fmt.Sprint(s.Dims) != fmt.Sprint(p.Specs[i].Dims) {
			return fmt.Errorf("%s: its config.json describes another model than the one served (parameter %s)", dir, s.Name)
		}
	}
	q, err := LoadParams(dir, p.Config)
	if err != nil {
		return err
	}
	for i, v := range q.Values {
		dt := dtypes.Float32
		if p.Values[i] != nil {
			dt = p.Values[i].DType()
		}
		if q.Values[i], err = toDType(v, dt); err != nil {
			return fmt.Errorf("%s: parameter %s: %w", dir, p.Specs[i].Name, err)
		}
	}
	for i := range p.Values {
		if p.Values[i] != nil {
			p.Values[i].FinalizeAll()
		}
		p.Values[i] = q.Values[i]
	}
	return nil
}
