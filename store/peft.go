package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"agentrl/store/safetensors"
)

// A LoRA run's checkpoint holds the frozen base (its chunks stored once for every checkpoint
// that names them), the adapters — model.layers.{i}.{self_attn|mlp}.{proj}.lora_A.weight
// [r, in] and ….lora_B.weight [out, r] — and PEFT's adapter_config.json among its files. Export
// writes it merged (W + lora_alpha ÷ r · B·A, a plain HuggingFace model); ExportPEFT writes the
// adapters alone as a PEFT folder.

// AdapterConfigFile is PEFT's adapter configuration, carried by a LoRA run's checkpoints.
const AdapterConfigFile = "adapter_config.json"

// PEFTWeightsFile is the adapters' safetensors file in a PEFT folder.
const PEFTWeightsFile = "adapter_model.safetensors"

// peftPrefix is what PEFT puts before a module's name in its saved keys (PeftModel wraps the
// transformers model as base_model.model; the adapter name "default" is left out on save).
const peftPrefix = "base_model.model."

// adapterConfig is the part of adapter_config.json that merging reads.
type adapterConfig struct {
	PEFTType  string  `json:"peft_type"`
	R         int     `json:"r"`
	LoRAAlpha float64 `json:"lora_alpha"`
}

// loraConfig parses a checkpoint's adapter_config.json; ok is false when it has none (not a
// LoRA run).
func loraConfig(cp *Checkpoint, src string) (cfg adapterConfig, ok bool, err error) {
	data, ok := cp.FileData[AdapterConfigFile]
	if !ok {
		return cfg, false, nil
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, true, fmt.Errorf("%s: %s is unreadable: %w", src, AdapterConfigFile, err)
	}
	if cfg.PEFTType != "LORA" || cfg.R <= 0 || cfg.LoRAAlpha <= 0 {
		return cfg, true, fmt.Errorf("%s: %s has peft_type %q, r %d, lora_alpha %v; want LORA with r > 0 and lora_alpha > 0",
			src, AdapterConfigFile, cfg.PEFTType, cfg.R, cfg.LoRAAlpha)
	}
	return cfg, true, nil
}

// isAdapter reports whether a tensor name is a LoRA adapter's.
func isAdapter(name string) bool {
	return strings.HasSuffix(name, ".lora_A.weight") || strings.HasSuffix(name, ".lora_B.weight")
}

// mergeLoRA returns the checkpoint's base weights with each adapter pair merged into its
// projection, W + scale·B·A computed in float32 and stored in W's dtype; the adapters are left out.
func mergeLoRA(weights []*safetensors.Tensor, scale float64, src string) ([]*safetensors.Tensor, error) {
	byName := make(map[string]*safetensors.Tensor, len(weights))
	for _, t := range weights {
		byName[t.Name] = t
	}
	var out []*safetensors.Tensor
	for _, t := range weights {
		if isAdapter(t.Name) {
			continue
		}
		module := strings.TrimSuffix(t.Name, ".weight")
		a, b := byName[module+".lora_A.weight"], byName[module+".lora_B.weight"]
		if a == nil && b == nil {
			out = append(out, t)
			continue
		}
		merged, err := mergeOne(t, a, b, scale)
		if err != nil {
			return nil, fmt.Errorf("%s: merging the adapters of %s: %w", src, module, err)
		}
		out = append(out, merged)
	}
	return out, nil
}

// mergeOne computes W + scale·B·A for W [out, in], A [r, in], B [out, r].
func mergeOne(w, a, b *safetensors.Tensor, scale float64) (*safetensors.Tensor, error) {
	if a == nil || b == nil {
		return nil, fmt.Errorf("lora_A and lora_B come in pairs; one is missing")
	}
	if len(w.Shape) != 2 || len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, fmt.Errorf("shapes %v, A %v, B %v: want matrices", w.Shape, a.Shape, b.Shape)
	}
	out, in, r := w.Shape[0], w.Shape[1], a.Shape[0]
	if a.Shape[1] != in || b.Shape[0] != out || b.Shape[1] != r {
		return nil, fmt.Errorf("weight %v, A %v, B %v: want A [r, %d] and B [%d, r]", w.Shape, a.Shape, b.Shape, in, out)
	}
	wv, err := w.Float32()
	if err != nil {
		return nil, err
	}
	av, err := a.Float32()
	if err != nil {
		return nil, err
	}
	bv, err := b.Float32()
	if err != nil {
		return nil, err
	}
	for o := 0; o < out; o++ {
		row := wv[o*in : (o+1)*in]
		for k := 0; k < r; k++ {
			s := float32(scale) * bv[o*r+k]
			if s == 0 {
				continue
			}
			for i, x := range av[k*in : (k+1)*in] {
				row[i] += s * x
			}
		}
	}
	return safetensors.FromFloat32(w.Name, w.Shape, wv, w.DType)
}

// ExportPEFT writes a LoRA run's checkpoint as a PEFT adapter folder: adapter_config.json and
// adapter_model.safetensors with PEFT's keys (base_model.model.model.layers.{i}.….lora_A.weight).
// The base model is the one the run started from (base_model_name_or_path names it).
func (s *Store) ExportPEFT(run string, step int, dir string) error {
	cp, err := s.LoadCheckpoint(run, step)
	if err != nil {
		return err
	}
	src := fmt.Sprintf("store %s: checkpoint %s/%d", s.path, run, step)
	if _, ok, err := loraConfig(cp, src); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%s is not a LoRA run's (no %s): export it without --peft, as a merged HuggingFace folder", src, AdapterConfigFile)
	}
	var ts []*safetensors.Tensor
	for _, t := range cp.Weights {
		if isAdapter(t.Name) {
			c := *t
			c.Name = peftPrefix + t.Name
			ts = append(ts, &c)
		}
	}
	if len(ts) == 0 {
		return fmt.Errorf("%s has %s but no lora_A/lora_B tensors", src, AdapterConfigFile)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(dir, PEFTWeightsFile), map[string]string{"format": "pt"}, ts); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, AdapterConfigFile), cp.FileData[AdapterConfigFile], 0o644)
}
