package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Shape is what the ledger needs to know about a decoder-only transformer of the Qwen3 or Qwen2
// family.
type Shape struct {
	Name         string // a label: a known shape's name or the model folder
	Family       string // "qwen3" (q/k RMSNorm, no biases) or "qwen2" (q/k/v biases, no q/k norm)
	Layers       int
	Hidden       int
	Intermediate int
	Heads        int
	KVHeads      int
	HeadDim      int
	Vocab        int
	// Tied is true when the output projection reuses the embedding matrix (one copy in memory).
	Tied bool
	// ParamDType is the dtype the checkpoint was saved in ("bfloat16", "float32", …); the ledger
	// sizes device copies by the recipe's compute dtype, not by this.
	ParamDType string
}

// KnownShapes returns the named shapes that `plan --shape` accepts.
func KnownShapes() map[string]Shape {
	q3 := func(name string, hidden, layers, heads, kv, inter int, tied bool) Shape {
		return Shape{Name: name, Family: "qwen3", Layers: layers, Hidden: hidden, Intermediate: inter,
			Heads: heads, KVHeads: kv, HeadDim: 128, Vocab: 151936, Tied: tied, ParamDType: "bfloat16"}
	}
	return map[string]Shape{
		"qwen3-0.6b": q3("qwen3-0.6b", 1024, 28, 16, 8, 3072, true),
		"qwen3-1.7b": q3("qwen3-1.7b", 2048, 28, 16, 8, 6144, true),
		"qwen3-4b":   q3("qwen3-4b", 2560, 36, 32, 8, 9728, true),
		"qwen3-8b":   q3("qwen3-8b", 4096, 36, 32, 8, 12288, false),
	}
}

// KnownShape returns the shape called name (case-insensitive). NAME:LAYERS is that shape's width
// at LAYERS of its layers ("qwen3-4b:8": the 4B model's embedding, heads and MLP, 8 of its 36
// layers), for a measurement whose full depth does not fit the time or memory at hand; its Name
// keeps the suffix, so that whatever reports it says so.
func KnownShape(name string) (Shape, error) {
	shapes := KnownShapes()
	base, layers, cut := strings.Cut(strings.ToLower(name), ":")
	if s, ok := shapes[base]; ok {
		if !cut {
			return s, nil
		}
		n, err := strconv.Atoi(layers)
		if err != nil || n < 1 || n > s.Layers {
			return Shape{}, fmt.Errorf("shape %q: %q after the colon is not a layer count from 1 to %d (%s has %d layers)", name, layers, s.Layers, base, s.Layers)
		}
		s.Name, s.Layers = base+":"+layers, n
		return s, nil
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return Shape{}, fmt.Errorf("unknown shape %q; known shapes: %s, each also as NAME:LAYERS for fewer layers (or give --model DIR with a config.json)", name, strings.Join(names, ", "))
}

// Params counts the parameters held in memory: the embedding, per layer the q/k/v/o projections,
// the SwiGLU MLP (gate, up, down), two RMSNorm weights, q/k norm weights (qwen3, head_dim each) or
// q/k/v biases (qwen2), then the final norm and, when untied, the output projection.
//
// Qwen3-0.6B: 596,049,920; Qwen3-1.7B: 1,720,574,976; Qwen3-4B: 4,022,468,096; Qwen3-8B:
// 8,190,735,360. (The Qwen3-1.7B safetensors also store a copy of the tied embedding as
// lm_head.weight, which is why the hub lists 2.03B for it; that copy is never held twice here.)
func (s Shape) Params() int64 {
	h, v := int64(s.Hidden), int64(s.Vocab)
	q := int64(s.Heads * s.HeadDim)
	kv := int64(s.KVHeads * s.HeadDim)
	perLayer := h*q + 2*h*kv + q*h // q, k, v, o projections
	perLayer += 3 * h * int64(s.Intermediate)
	perLayer += 2 * h // input and post-attention RMSNorm
	switch s.Family {
	case "qwen3":
		perLayer += 2 * int64(s.HeadDim) // q_norm, k_norm
	case "qwen2":
		perLayer += q + 2*kv // q, k, v biases
	}
	n := v*h + int64(s.Layers)*perLayer + h
	if !s.Tied {
		n += v * h
	}
	return n
}

// Validate reports a shape the ledger cannot size.
func (s Shape) Validate() error {
	var bad []string
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", s.Layers}, {"hidden", s.Hidden}, {"intermediate", s.Intermediate}, {"heads", s.Heads},
		{"kv_heads", s.KVHeads}, {"head_dim", s.HeadDim}, {"vocab", s.Vocab}} {
		if f.v <= 0 {
			bad = append(bad, fmt.Sprintf("%s is %d; want a positive number", f.name, f.v))
		}
	}
	if s.Family != "qwen3" && s.Family != "qwen2" {
		bad = append(bad, fmt.Sprintf("family %q is not one of qwen3, qwen2", s.Family))
	}
	if s.KVHeads > 0 && s.Heads%s.KVHeads != 0 {
		bad = append(bad, fmt.Sprintf("heads %d is not a multiple of kv_heads %d", s.Heads, s.KVHeads))
	}
	if len(bad) > 0 {
		return fmt.Errorf("model shape %s: %s", s.Name, strings.Join(bad, "; "))
	}
	return nil
}

// ReadShape reads the shape from a HuggingFace config.json, given the file or its folder. Only
// config.json is needed: plan never loads weights.
func ReadShape(path string) (Shape, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return Shape{}, fmt.Errorf("model %s not found: give a model folder that holds config.json, or --shape NAME", path)
	}
	if err == nil && st.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Shape{}, fmt.Errorf("model config %s not found: the folder needs a HuggingFace config.json", path)
		}
		return Shape{}, fmt.Errorf("reading model config: %w", err)
	}
	var c struct {
		ModelType    string `json:"model_type"`
		Hidden       int    `json:"hidden_size"`
		Layers       int    `json:"num_hidden_layers"`
		Heads        int    `json:"num_attention_heads"`
		KVHeads      int    `json:"num_key_value_heads"`
		HeadDim      int    `json:"head_dim"`
		Intermediate int    `json:"intermediate_size"`
		Vocab        int    `json:"vocab_size"`
		Tied         *bool  `json:"tie_word_embeddings"`
		TorchDType   string `json:"torch_dtype"`
		DType        string `json:"dtype"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return Shape{}, fmt.Errorf("%s: invalid config.json: %w", path, err)
	}
	s := Shape{
		Name: filepath.Base(filepath.Dir(path)), Family: strings.ToLower(c.ModelType), Layers: c.Layers,
		Hidden: c.Hidden, Intermediate: c.Intermediate, Heads: c.Heads, KVHeads: c.KVHeads,
		HeadDim: c.HeadDim, Vocab: c.Vocab, Tied: c.Tied != nil && *c.Tied, ParamDType: c.DType,
	}
	if s.ParamDType == "" {
		s.ParamDType = c.TorchDType
	}
	if s.KVHeads == 0 {
		s.KVHeads = s.Heads
	}
	if s.HeadDim == 0 && s.Heads > 0 {
		s.HeadDim = s.Hidden / s.Heads // Qwen2 configs leave head_dim implicit
	}
	if err := s.Validate(); err != nil {
		return Shape{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
