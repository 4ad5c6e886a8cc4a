package residency

import (
	"encoding/json"
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/model"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// LoadPolicy loads the policy and the reference model from a HuggingFace folder. Without LoRA
// they are two float32 copies (the reference stays frozen). With train.lora.rank > 0 the policy
// is the base in the compute dtype, frozen, plus float32 adapters (A from the run's seed, B = 0),
// and the reference is the same base tensors with the adapters off: one copy of the base serves
// rollout, training and the reference.
func LoadPolicy(backend compute.Backend, dir string, dt dtypes.DType, r *recipes.Recipe) (policy, reference *model.Model, err error) {
	opts := model.Options{Compute: dt}
	l := r.Train.LoRA
	if l.Rank == 0 {
		if policy, err = model.Load(backend, dir, opts); err != nil {
			return nil, nil, err
		}
		if reference, err = model.Load(backend, dir, opts); err != nil {
			return nil, nil, err
		}
		return policy, reference, nil
	}
	cfg, err := model.ReadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	base, err := model.LoadParams(dir, cfg)
	if err != nil {
		return nil, nil, err
	}
	return LoRAModels(backend, base, dt, r)
}

// LoRAModels is LoadPolicy's LoRA case on base parameters already loaded (taken over).
func LoRAModels(backend compute.Backend, base *model.Params, dt dtypes.DType, r *recipes.Recipe) (policy, reference *model.Model, err error) {
	l, opts := r.Train.LoRA, model.Options{Compute: dt}
	p, err := model.WithLoRA(base, model.LoRA{Rank: l.Rank, Alpha: l.Alpha, Targets: l.Targets}, uint64(r.Run.Seed), dt)
	if err != nil {
		return nil, nil, fmt.Errorf("train.lora: %w", err)
	}
	if policy, err = model.New(backend, p, opts); err != nil {
		return nil, nil, err
	}
	if reference, err = model.New(backend, p.Base(), opts); err != nil {
		return nil, nil, err
	}
	return policy, reference, nil
}

// AdapterConfig is PEFT's adapter_config.json for a LoRA policy, saved with each checkpoint so
// that `export --peft` writes it and a merged export knows the scale (lora_alpha ÷ r).
func AdapterConfig(l model.LoRA, baseModel string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"peft_type":               "LORA",
		"task_type":               "CAUSAL_LM",
		"r":                       l.Rank,
		"lora_alpha":              l.Alpha,
		"lora_dropout":            0.0,
		"target_modules":          l.Targets,
		"bias":                    "none",
		"fan_in_fan_out":          false,
		"base_model_name_or_path": baseModel,
		"inference_mode":          true,
		"init_lora_weights":       true,
		"modules_to_save":         nil,
		"use_rslora":              false,
		"use_dora":                false,
	}, "", "  ")
}

// SetWeights loads a checkpoint's weights into the policy: every parameter, or with LoRA the
// adapters only (the frozen base, shared with the reference model, stays as loaded).
func SetWeights(policy *model.Model, ts []*safetensors.Tensor, src string) error {
	p := policy.Params
	if p.Config.LoRA.Enabled() {
		return p.SetAdapters(ts, src)
	}
	return p.SetFromTensors(ts, src)
}

// CheckpointFiles are the files a checkpoint carries: the model folder's (modelFiles: config.json,
// the tokenizer) and, with LoRA, PEFT's adapter_config.json naming base (the model folder, "" for
// the built-in model). A LoRA checkpoint's weights are the base and the adapters (the base's
// chunks are stored once, however many checkpoints name them), so that export can write the
// merged model or the adapters alone.
func CheckpointFiles(policy *model.Model, modelFiles map[string][]byte, base string) map[string][]byte {
	l := policy.Params.Config.LoRA
	if !l.Enabled() {
		return modelFiles
	}
	files := make(map[string][]byte, len(modelFiles)+1)
	for k, v := range modelFiles {
		files[k] = v
	}
	if base == "" {
		base = "agentrl-builtin"
	}
	if js, err := AdapterConfig(l, base); err == nil {
		files[store.AdapterConfigFile] = js
	}
	return files
}

// ParamBytes is the size of the trained float32 parameters (a LoRA run's adapters, else the
// whole model) and of a LoRA run's frozen base in the dtype it is held in (0 without LoRA).
func ParamBytes(policy *model.Model) (trained, base int64) {
	p := policy.Params
	if !p.Config.LoRA.Enabled() {
		return p.Bytes(), 0
	}
	for i, s := range p.Specs {
		if model.IsAdapter(s.Name) {
			trained += 4 * int64(s.Size())
		} else {
			base += int64(p.Values[i].Memory())
		}
	}
	return trained, base
}
