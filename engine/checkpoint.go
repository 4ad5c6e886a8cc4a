package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/residency"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// save writes a checkpoint of the policy (and, when asked, optimizer state) and applies retention.
// It first checks that the store's disk has room for it (engine/diskspace): too little stops the run
// before anything is written; a write the disk fails stops it too, the last checkpoint intact.
func (c *Controller) save(_ context.Context, step int, final bool) error {
	if c.opts.Store == nil || step <= 0 || step == c.lastSaved {
		return nil
	}
	need := c.checkpointNeed(c.lastSaved > 0)
	if err := c.checkRoom(step, need); err != nil {
		return err
	}
	c.lastSaved = step
	_, _, adamStep := c.trainer.Moments()
	man := store.Manifest{Run: c.opts.RunID, Step: step, RecipeHash: c.recipe.Hash(),
		DataPosition: int64(step * c.recipe.Rollout.TasksPerStep),
		Metrics:      map[string]float64{"best": c.best, "best_step": float64(c.bestStep), "since_best": float64(c.sinceBest), "adam_step": float64(adamStep)}}
	// The tensors are made one at a time as the store asks for them: the host holds one tensor
	// (and the store's 64 MiB of chunks waiting for their transaction), not the whole checkpoint.
	var all int64
	weightSrc, weightBytes := c.opts.Policy.Params.Stream(safetensors.F32)
	head, err := c.valueHeadTensors()
	if err != nil {
		return err
	}
	momentSrc := c.momentTensors(head)
	countAll := func() (*safetensors.Tensor, error) {
		t, err := momentSrc()
		if t != nil {
			all += int64(len(t.Data))
		}
		return t, err
	}
	if err := c.opts.Store.SaveCheckpointFrom(man, weightSrc, countAll, residency.CheckpointFiles(c.opts.Policy, c.opts.ModelFiles, c.recipe.Model.Path)); err != nil {
		if we := (*store.WriteError)(nil); errors.As(err, &we) {
			we.Need = need // the store knows what it had written, the run what the checkpoint needs
		}
		return err
	}
	weights := *weightBytes
	all += weights
	c.stop.NoteSaved(step)
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

// momentTensors yields, one at a time, the AdamW moments of the trained tensors (a LoRA run's:
// the adapters') when checkpoint.save_optimizer, then the tensors after (ppo's value head).
func (c *Controller) momentTensors(after []*safetensors.Tensor) store.TensorSource {
	var specs []model.ParamSpec
	if c.recipe.Checkpoint.SaveOptimizer {
		specs = c.trainer.TrainedSpecs()
	}
	m, v, _ := c.trainer.Moments()
	i := 0 // 2·spec + (0: m, 1: v)
	return func() (*safetensors.Tensor, error) {
		if i < 2*len(specs) {
			spec, t, prefix := specs[i/2], m[i/2], "m."
			if i%2 == 1 {
				t, prefix = v[i/2], "v."
			}
			i++
			return residency.MomentTensor(prefix+spec.Name, spec.Dims, t)
		}
		if j := i - 2*len(specs); j < len(after) {
			i++
			return after[j], nil
		}
		return nil, nil
	}
}

// valueHeadTensors are ppo's value head as it goes in the checkpoint's optimizer-state file (it
// is not part of the HuggingFace model): its weights always, its AdamW moments with
// checkpoint.save_optimizer; none without a value head.
func (c *Controller) valueHeadTensors() ([]*safetensors.Tensor, error) {
	if valueCoef(c.recipe) <= 0 {
		return nil, nil
	}
	var out []*safetensors.Tensor
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
