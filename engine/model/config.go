// Package model is the Qwen3 / Qwen2 decoder-only transformer in GoMLX: HuggingFace config.json and
// safetensors loading and saving, the forward pass, and per-token log-probabilities.
//
// Weights are kept in float32 ("master" precision) and cast to the compute dtype inside the graph, so
// the same Params serve inference (bf16 on a GPU) and training (Adam on float32 values).
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Family is the architecture family of a checkpoint.
type Family string

// Supported families.
const (
	Qwen3 Family = "qwen3" // q/k RMSNorm per head, no attention biases
	Qwen2 Family = "qwen2" // q/k/v projection biases, no q/k norm
)

// Config is the subset of a HuggingFace config.json that defines the network's shape and numerics.
// It reads both the transformers-5 format (rope_parameters, dtype) and the older hub format
// (top-level rope_theta, torch_dtype).
type Config struct {
	Family            Family  `json:"model_type"`
	VocabSize         int     `json:"vocab_size"`
	HiddenSize        int     `json:"hidden_size"`
	IntermediateSize  int     `json:"intermediate_size"`
	NumLayers         int     `json:"num_hidden_layers"`
	NumHeads          int     `json:"num_attention_heads"`
	NumKVHeads        int     `json:"num_key_value_heads"`
	HeadDim           int     `json:"head_dim"`
	RMSNormEps        float64 `json:"rms_norm_eps"`
	RopeTheta         float64 `json:"rope_theta"`
	MaxPositions      int     `json:"max_position_embeddings"`
	TieWordEmbeddings bool    `json:"tie_word_embeddings"`
	// AttentionBias is true when q/k/v projections carry biases (always for Qwen2).
	AttentionBias bool `json:"attention_bias"`
	// DType is the dtype the checkpoint was saved in ("float32", "bfloat16", "float16").
	DType string `json:"torch_dtype"`
	// EOSTokenIDs lists end-of-sequence ids (config.json holds a number, a list or null).
	EOSTokenIDs []int32 `json:"eos_token_id,omitempty"`
	BOSTokenID  *int32  `json:"bos_token_id,omitempty"`
	// LoRA adds low-rank adapters after the base parameters (see lora.go); it is not part of
	// config.json.
	LoRA LoRA `json:"-"`
}

// rawConfig mirrors config.json loosely enough to accept both formats.
type rawConfig struct {
	ModelType         string          `json:"model_type"`
	Architectures     []string        `json:"architectures"`
	VocabSize         int             `json:"vocab_size"`
	HiddenSize        int             `json:"hidden_size"`
	IntermediateSize  int             `json:"intermediate_size"`
	NumLayers         int             `json:"num_hidden_layers"`
	NumHeads          int             `json:"num_attention_heads"`
	NumKVHeads        int             `json:"num_key_value_heads"`
	HeadDim           int             `json:"head_dim"`
	RMSNormEps        float64         `json:"rms_norm_eps"`
	RopeTheta         float64         `json:"rope_theta"`
	RopeParameters    *ropeParameters `json:"rope_parameters"`
	RopeScaling       *ropeParameters `json:"rope_scaling"`
	MaxPositions      int             `json:"max_position_embeddings"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	AttentionBias     *bool           `json:"attention_bias"`
	TorchDType        string          `json:"torch_dtype"`
	DType             string          `json:"dtype"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
	BOSTokenID        *int32          `json:"bos_token_id"`
	HiddenAct         string          `json:"hidden_act"`
	UseSlidingWindow  bool            `json:"use_sliding_window"`
}

type ropeParameters struct {
	RopeTheta float64 `json:"rope_theta"`
	RopeType  string  `json:"rope_type"`
	Type      string  `json:"type"`
}

// PRMPromptFile is the file a model folder keeps the PRM prompt it was taught to judge in (sft
// --judge-share writes it); a run whose prm.prompt is "" reads it (hint.FitPRM).
const PRMPromptFile = "prm_prompt.txt"

// ReadConfig reads DIR/config.json (or the file itself when path names a file).
func ReadConfig(path string) (*Config, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("model config %s not found: point --model at a HuggingFace folder that holds config.json", path)
		}
		return nil, fmt.Errorf("reading model config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes and validates config.json bytes.
func ParseConfig(data []byte) (*Config, error) {
	var r rawConfig
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("invalid config.json: %w", err)
	}
	c := &Config{
		Family:           Family(strings.ToLower(r.ModelType)),
		VocabSize:        r.VocabSize,
		HiddenSize:       r.HiddenSize,
		IntermediateSize: r.IntermediateSize,
		NumLayers:        r.NumLayers,
		NumHeads:         r.NumHeads,
		NumKVHeads:       r.NumKVHeads,
		HeadDim:          r.HeadDim,
		RMSNormEps:       r.RMSNormEps,
		RopeTheta:        r.RopeTheta,
		MaxPositions:     r.MaxPositions,
		BOSTokenID:       r.BOSTokenID,
		DType:            r.TorchDType,
	}
	if c.DType == "" {
		c.DType = r.DType
	}
	if c.DType == "" {
		c.DType = "float32"
	}
	if c.Family == "" && len(r.Architectures) > 0 {
		switch {
		case strings.HasPrefix(r.Architectures[0], "Qwen3"):
			c.Family = Qwen3
		case strings.HasPrefix(r.Architectures[0], "Qwen2"):
			c.Family = Qwen2
		}
	}
	switch c.Family {
	case Qwen3:
		c.AttentionBias = r.AttentionBias != nil && *r.AttentionBias
	case Qwen2:
		c.AttentionBias = true
	default:
		return nil, fmt.Errorf("model_type %q is not supported: want qwen3 or qwen2 (or a Qwen3ForCausalLM / Qwen2ForCausalLM architecture)", r.ModelType)
	}
	if r.HiddenAct != "" && r.HiddenAct != "silu" {
		return nil, fmt.Errorf("hidden_act %q is not supported: want silu", r.HiddenAct)
	}
	if r.UseSlidingWindow {
		return nil, errors.New("use_sliding_window: true is not supported: set it to false")
	}
	rope := r.RopeParameters
	if rope == nil {
		rope = r.RopeScaling
	}
	if rope != nil {
		kind := rope.RopeType
		if kind == "" {
			kind = rope.Type
		}
		if kind != "" && kind != "default" {
			return nil, fmt.Errorf("rope type %q is not supported: only default RoPE is implemented", kind)
		}
		if c.RopeTheta == 0 {
			c.RopeTheta = rope.RopeTheta
		}
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000 // transformers' default when the config names none
	}
	if c.NumKVHeads == 0 {
		c.NumKVHeads = c.NumHeads
	}
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	c.TieWordEmbeddings = r.TieWordEmbeddings == nil || *r.TieWordEmbeddings
	if len(r.EOSTokenID) > 0 && string(r.EOSTokenID) != "null" {
		var one int32
		if err := json.Unmarshal(r.EOSTokenID, &one); err == nil {
			c.EOSTokenIDs = []int32{one}
		} else if err := json.Unmarshal(r.EOSTokenID, &c.EOSTokenIDs); err != nil {
			return nil, fmt.Errorf("eos_token_id %s: want a number or a list of numbers", r.EOSTokenID)
		}
	}
	return c, c.Validate()
}

// Validate checks that the shape is usable and self-consistent.
func (c *Config) Validate() error {
	pos := []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumLayers}, {"num_attention_heads", c.NumHeads},
		{"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("%s is %d: want a positive integer", p.name, p.v)
		}
	}
	if c.NumHeads%c.NumKVHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumHeads, c.NumKVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim %d must be even for rotary embeddings", c.HeadDim)
	}
	return nil
}

// NumParams is the number of parameters, counting a tied embedding once.
func (c *Config) NumParams() int64 {
	var n int64
	for _, s := range ParamShapes(c) {
		n += int64(s.Size())
	}
	return n
}

// JSON renders the config as a transformers-5 style config.json.
func (c *Config) JSON() ([]byte, error) {
	arch := "Qwen3ForCausalLM"
	if c.Family == Qwen2 {
		arch = "Qwen2ForCausalLM"
	}
	m := map[string]any{
		"architectures":           []string{arch},
		"model_type":              string(c.Family),
		"vocab_size":              c.VocabSize,
		"hidden_size":             c.HiddenSize,
		"intermediate_size":       c.IntermediateSize,
		"num_hidden_layers":       c.NumLayers,
		"num_attention_heads":     c.NumHeads,
		"num_key_value_heads":     c.NumKVHeads,
		"head_dim":                c.HeadDim,
		"hidden_act":              "silu",
		"rms_norm_eps":            c.RMSNormEps,
		"max_position_embeddings": c.MaxPositions,
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"rope_parameters":         map[string]any{"rope_theta": c.RopeTheta, "rope_type": "default"},
		"rope_theta":              c.RopeTheta,
		"dtype":                   c.DType,
		"torch_dtype":             c.DType,
		"use_sliding_window":      false,
	}
	if c.Family == Qwen3 {
		m["attention_bias"] = c.AttentionBias
	}
	switch len(c.EOSTokenIDs) {
	case 0:
	case 1:
		m["eos_token_id"] = c.EOSTokenIDs[0]
	default:
		m["eos_token_id"] = c.EOSTokenIDs
	}
	if c.BOSTokenID != nil {
		m["bos_token_id"] = *c.BOSTokenID
	}
	return json.MarshalIndent(m, "", "  ")
}
