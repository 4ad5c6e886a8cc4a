package engine

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/event"
	"agentrl/engine/residency"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// save writes a checkpoint of the policy (and, when asked, optimizer state) and applies retention.
func (c *Controller) save(_ context.Context, step int, final bool) error {
	if c.opts.Store == nil || step <= 0 || step == c.lastSaved {
		return nil
	}
	c.lastSaved = step
	ts, err := c.opts.Policy.Params.Tensors(safetensors.F32)
	if err != nil {
		return err
	}
	m, v, adamStep := c.trainer.Moments()
	cp := &store.Checkpoint{Manifest: store.Manifest{Run: c.opts.RunID, Step: step, RecipeHash: c.recipe.Hash(),
		DataPosition: int64(step * c.recipe.Rollout.TasksPerStep),
		Metrics:      map[string]float64{"best": c.best, "best_step": float64(c.bestStep), "since_best": float64(c.sinceBest), "adam_step": float64(adamStep)}},
		Weights: ts, FileData: residency.CheckpointFiles(c.opts.Policy, c.opts.ModelFiles, c.recipe.Model.Path)}
	if c.recipe.Checkpoint.SaveOptimizer {
		for i, spec := range c.trainer.TrainedSpecs() { // a LoRA run's: the adapters
			for _, pair := range []struct {
				prefix string
				t      *tensors.Tensor
			}{{"m.", m[i]}, {"v.", v[i]}} {
				st, err := residency.MomentTensor(pair.prefix+spec.Name, spec.Dims, pair.t)
				if err != nil {
					return err
				}
				cp.Moments = append(cp.Moments, st)
			}
		}
	}
	if valueCoef(c.recipe) > 0 {
		if err := c.saveValueHead(cp); err != nil {
			return err
		}
	}
	if err := c.opts.Store.SaveCheckpoint(cp); err != nil {
		return err
	}
	c.stopMu.Lock()
	c.stop.saved = step
	c.stopMu.Unlock()
	var weights, all int64
	for _, t := range ts {
		weights += int64(len(t.Data))
	}
	all = weights
	for _, t := range cp.Moments {
		all += int64(len(t.Data))
	}
	c.emit(event.Checkpoint{Step: step, Bytes: all, WeightBytes: weights, Best: step == c.bestStep})
	if !final && c.recipe.Checkpoint.KeepLast > 0 {
		var pinned []int
		if m := c.manualBest.Load(); m > 0 {
			pinned = append(pinned, int(m))
		}
		if _, err := c.opts.Store.Retain(c.opts.RunID, "best", c.recipe.Checkpoint.KeepBest, c.recipe.Checkpoint.KeepLast, pinned...); err != nil {
			return err
		}
	}
	return nil
}

// saveValueHead puts ppo's value head in the checkpoint's optimizer-state file (it is not part
// of the HuggingFace model): its weights always, its AdamW moments with checkpoint.save_optimizer.
func (c *Controller) saveValueHead(cp *store.Checkpoint) error {
	names, values, m, v := c.trainer.ValueHead()
	for i, name := range names {
		parts := []struct {
			prefix string
			t      *tensors.Tensor
		}{{"", values[i]}}
		if c.recipe.Checkpoint.SaveOptimizer {
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
				return err
			}
			st, err := safetensors.FromFloat32(p.prefix+name, p.t.Shape().Dimensions, vals, safetensors.F32)
			if err != nil {
				return err
			}
			cp.Moments = append(cp.Moments, st)
		}
	}
	return nil
}

// restoreValueHead loads ppo's value head (and its moments, when saved) from a checkpoint.
func (c *Controller) restoreValueHead(cp *store.Checkpoint, src string) error {
	byName := map[string]*safetensors.Tensor{}
	for _, t := range cp.Moments {
		byName[t.Name] = t
	}
	names, cur, _, _ := c.trainer.ValueHead()
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
	return c.trainer.SetValueHead(values, m, v)
}
