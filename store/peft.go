package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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

// mergeLoRA is safetensors.MergeLoRA with the checkpoint named in its error.
func mergeLoRA(weights []*safetensors.Tensor, scale float64, src string) ([]*safetensors.Tensor, error) {
	out, err := safetensors.MergeLoRA(weights, scale)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return out, nil
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
		if safetensors.IsAdapter(t.Name) {
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
