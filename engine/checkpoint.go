package engine

import (
	"context"
	"errors"

	"agentrl/engine/event"
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
	metrics := c.best.Metrics()
	metrics["adam_step"] = float64(adamStep)
	man := store.Manifest{Run: c.opts.RunID, Step: step, RecipeHash: c.recipe.Hash(),
		DataPosition: int64(step * c.recipe.Rollout.TasksPerStep), Metrics: metrics}
	// The tensors are made one at a time as the store asks for them: the host holds one tensor
	// (and the store's 64 MiB of chunks waiting for their transaction), not the whole checkpoint.
	var all int64
	weightSrc, weightBytes := c.opts.Policy.Params.Stream(safetensors.F32)
	var head []*safetensors.Tensor
	if valueCoef(c.recipe) > 0 {
		var err error
		if head, err = residency.ValueHeadTensors(c.trainer, c.recipe.Checkpoint.SaveOptimizer); err != nil {
			return err
		}
	}
	momentSrc := residency.MomentTensors(c.trainer, c.recipe.Checkpoint.SaveOptimizer, head)
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
	c.emit(event.Checkpoint{Step: step, Bytes: all, WeightBytes: weights, Best: step == c.best.Step()})
	if !final && c.recipe.Checkpoint.KeepLast > 0 {
		return c.retain()
	}
	return nil
}

// retain applies checkpoint retention (keep_last, keep_best), never deleting the step the user
// marked best.
func (c *Controller) retain() error {
	var pinned []int
	if m := c.best.Marked(); m > 0 {
		pinned = append(pinned, m)
	}
	_, err := c.opts.Store.Retain(c.opts.RunID, "best", c.recipe.Checkpoint.KeepBest, c.recipe.Checkpoint.KeepLast, pinned...)
	return err
}
