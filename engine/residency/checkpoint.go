package residency

import (
	"fmt"

	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
	"agentrl/engine/train"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// MomentTensors yields, one at a time, the AdamW moments of tr's trained tensors (a LoRA run's:
// the adapters') when withMoments (checkpoint.save_optimizer), then the tensors after (ppo's
// value head), for a checkpoint (store.SaveCheckpointFrom).
func MomentTensors(tr *train.Trainer, withMoments bool, after []*safetensors.Tensor) store.TensorSource {
	var specs []model.ParamSpec
	if withMoments {
		specs = tr.TrainedSpecs()
	}
	m, v, _ := tr.Moments()
	i := 0 // 2·spec + (0: m, 1: v)
	return func() (*safetensors.Tensor, error) {
		if i < 2*len(specs) {
			spec, t, prefix := specs[i/2], m[i/2], "m."
			if i%2 == 1 {
				t, prefix = v[i/2], "v."
			}
			i++
			return MomentTensor(prefix+spec.Name, spec.Dims, t)
		}
		if j := i - 2*len(specs); j < len(after) {
			i++
			return after[j], nil
		}
		return nil, nil
	}
}

// ValueHeadTensors are ppo's value head of tr as it goes in the checkpoint's optimizer-state file
// (it is not part of the HuggingFace model): its weights always, its AdamW moments withMoments
// (checkpoint.save_optimizer).
func ValueHeadTensors(tr *train.Trainer, withMoments bool) ([]*safetensors.Tensor, error) {
	var out []*safetensors.Tensor
	names, values, m, v := tr.ValueHead()
	for i, name := range names {
		parts := []struct {
			prefix string
			t      *tensors.Tensor
		}{{"", values[i]}}
		if withMoments {
			parts = append(parts, struct {
				prefix string
				t      *tensors.Tensor
			}{"m.", m[i]}, struct {
				prefix string
				t      *tensors.Tensor
			}{"v.", v[i]})
		}
		for _, p := range parts {
			vals, err := tensors.CopyFlatData[float32](p.t)
			if err != nil {
				return nil, err
			}
			st, err := safetensors.FromFloat32(p.prefix+name, p.t.Shape().Dimensions, vals, safetensors.F32)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// RestoreValueHead loads ppo's value head of tr (and its moments, when saved) from a checkpoint's
// optimizer-state tensors (store.Checkpoint.Moments) read from src.
func RestoreValueHead(tr *train.Trainer, ts []*safetensors.Tensor, src string) error {
	byName := map[string]*safetensors.Tensor{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	names, cur, _, _ := tr.ValueHead()
	get := func(name string, like *tensors.Tensor) (*tensors.Tensor, error) {
		t, ok := byName[name]
		if !ok {
			return nil, nil
		}
		vals, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", src, name, err)
		}
		return tensors.FromFlatDataAndDimensions(vals, like.Shape().Dimensions...), nil
	}
	var values, m, v []*tensors.Tensor
	for i, name := range names {
		w, err := get(name, cur[i])
		if err != nil {
			return err
		}
		if w == nil {
			return fmt.Errorf("%s: the value head %s is missing; it was saved by a run without algorithm.name: ppo", src, name)
		}
		values = append(values, w)
		mt, err := get("m."+name, cur[i])
		if err != nil {
			return err
		}
		vt, err := get("v."+name, cur[i])
		if err != nil {
			return err
		}
		if mt != nil && vt != nil {
			m, v = append(m, mt), append(v, vt)
		}
	}
	if len(m) != len(names) {
		m, v = nil, nil // moments start from zero
	}
	return tr.SetValueHead(values, m, v)
}

// RestoreMoments loads tr's AdamW moments and update count (adamStep) from a checkpoint's
// optimizer-state tensors (store.Checkpoint.Moments) read from src, when the checkpoint saved
// them; without them the moments are left as they are.
func RestoreMoments(tr *train.Trainer, ts []*safetensors.Tensor, adamStep int, src string) error {
	byName := map[string]*safetensors.Tensor{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	// The model's moments are there when the checkpoint saved the optimizer (ppo's value head
	// is kept in the same file, so the file alone says nothing).
	if _, saved := byName["m."+tr.TrainedSpecs()[0].Name]; saved {
		var m, v []*tensors.Tensor
		for _, spec := range tr.TrainedSpecs() { // a LoRA run's: the adapters
			for _, pre := range []string{"m.", "v."} {
				t, ok := byName[pre+spec.Name]
				if !ok {
					return fmt.Errorf("%s: optimizer moment %s%s is missing", src, pre, spec.Name)
				}
				tt, err := MomentFrom(t, spec.Dims, src)
				if err != nil {
					return err
				}
				if pre == "m." {
					m = append(m, tt)
				} else {
					v = append(v, tt)
				}
			}
		}
		if err := tr.SetMoments(m, v, adamStep); err != nil {
			return err
		}
	}
	return nil
}
