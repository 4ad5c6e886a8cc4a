package engine

import (
	"agentrl/engine/diskspace"
	"agentrl/engine/event"
	"agentrl/engine/model"
)

// checkpointNeed estimates the room the next checkpoint takes in the store at its peak
// (diskspace.Need): the policy's weights as float32 (a LoRA run's frozen base only while the run
// has no checkpoint: its chunks are the same in every one, stored once), the AdamW moments when
// checkpoint.save_optimizer, ppo's value head, the model's files (once, like the base), and what
// bbolt rewrites of the chunks stored. Chunks another run stored already are counted too: an
// estimate from above.
func (c *Controller) checkpointNeed(stored bool) int64 {
	var sizes []int64
	lora := c.opts.Policy.Params.Config.LoRA.Enabled()
	for _, s := range c.opts.Policy.Params.Specs {
		if stored && lora && !model.IsAdapter(s.Name) {
			continue
		}
		sizes = append(sizes, 4*int64(s.Size()))
	}
	if c.recipe.Checkpoint.SaveOptimizer {
		for _, s := range c.trainer.TrainedSpecs() {
			sizes = append(sizes, 4*int64(s.Size()), 4*int64(s.Size()))
		}
	}
	if valueCoef(c.recipe) > 0 {
		_, values, _, _ := c.trainer.ValueHead()
		parts := int64(1)
		if c.recipe.Checkpoint.SaveOptimizer {
			parts = 3
		}
		for _, v := range values {
			sizes = append(sizes, parts*4*int64(v.Shape().Size()))
		}
	}
	if !stored {
		for _, f := range c.opts.ModelFiles {
			sizes = append(sizes, int64(len(f)))
		}
	}
	n, bytes, err := c.opts.Store.Chunks()
	if err != nil {
		n, bytes = 0, 0 // the write will say what is wrong with the store
	}
	return diskspace.Need(sizes, n, bytes)
}

// checkRoom is the space check before the checkpoint of step, which needs need bytes
// (diskspace.Check): nil when it fits, after a warning (an event.Error line) when it leaves less
// than the margin, else the refusal.
func (c *Controller) checkRoom(step int, need int64) error {
	warning, err := diskspace.Check(c.opts.Store, c.opts.hooks.space, c.opts.RunID, step, need)
	if warning != "" {
		c.emit(event.Error{Message: warning})
	}
	return err
}

// storeFailure is a run's error as it ends: a store write the disk failed under (full, read-only,
// an I/O error) becomes one line naming the store's path and the space left (store.WriteError);
// other errors are as they are.
func (c *Controller) storeFailure(err error) error {
	if err == nil || c.opts.Store == nil {
		return err
	}
	return c.opts.Store.WriteFailed(c.opts.RunID, err)
}
