package engine

import (
	"fmt"

	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/store"
)

// Before each checkpoint the run measures the room its store has (store.Space: the free space of
// the store's folder's file system, statfs, and the pages free inside the bbolt file) against
// what the checkpoint needs (checkpointNeed). With less than it needs, the run refuses the
// checkpoint before writing any of it and stops with one line (store.WriteError: the path, the
// bytes needed, the bytes free; the last good checkpoint intact); with less than it needs plus a
// margin (checkpointMargin) it warns first (an event.Error line) and writes it. A write the disk
// fails anyway (another process filled it, a read-only remount, an I/O error) stops the run
// with the same kind of line (store.SaveCheckpointFrom); so does any other store write that fails
// for the disk's sake (Controller.storeFailure).

// storeSpace measures a store's room; a test replaces it to play a disk of any size.
var storeSpace = func(s *store.Store) (store.Space, error) { return s.Space() }

// bboltPage is bbolt's page: a chunk, stored as an overflow value, takes one more for its header.
const bboltPage = 4096

// checkpointMargin is the room beyond a checkpoint's own below which the run warns before writing
// it: a tenth of the checkpoint and 64 MiB, for the step's trajectories and metrics, bbolt's pages
// and what else writes to the disk meanwhile.
func checkpointMargin(need int64) int64 { return need/10 + 64<<20 }

// room is the verdict of the space check.
type room int

const (
	roomOK   room = iota // the checkpoint and the margin fit
	roomLow              // the checkpoint fits, not the margin: warn
	roomNone             // the checkpoint does not fit: refuse it
)

// roomFor is the space check: need bytes against the free space sp.
func roomFor(need int64, sp store.Space) room {
	switch free := sp.Free(); {
	case free < need:
		return roomNone
	case free < need+checkpointMargin(need):
		return roomLow
	}
	return roomOK
}

// storedBytes estimates what a checkpoint of tensors of these byte sizes adds to the store file:
// the bytes, one bbolt page per 4 MiB chunk, and the manifest's line for each chunk and tensor.
func storedBytes(sizes []int64) int64 {
	var n int64
	for _, b := range sizes {
		chunks := max(1, (b+store.ChunkSize-1)/store.ChunkSize)
		n += b + chunks*(bboltPage+72) + 256
	}
	return n
}

// rewriteBytes estimates what bbolt rewrites while it stores a checkpoint of tensors of these byte
// sizes in a store holding stored chunks of storedBytes: a leaf keeps at least two values, and
// each chunk added lands (by its hash) in a leaf whose other chunks are written again in the same
// transaction; their old pages are free from the next one. So the room a checkpoint takes at its
// peak is its own bytes and its largest transaction's rewrite: two stored chunks (of the stored
// chunks' mean size) for each chunk of the transaction with the most chunks (the store commits
// about 64 MiB at a time), at most every chunk stored. The built-in model's checkpoint (7.7 MB in
// 61 chunks, one transaction) rewrites about the checkpoint before it; a 4B model's (4 MiB chunks,
// 16 to a transaction), 128 MiB; a LoRA run's adapters (small chunks, hundreds to a transaction,
// next to the frozen base's 4 MiB ones), gigabytes.
func rewriteBytes(sizes []int64, stored int, storedBytes int64) int64 {
	if stored == 0 {
		return 0
	}
	var most, chunks, inTx int64
	for _, b := range sizes {
		for left := b; ; left -= store.ChunkSize {
			chunks++
			inTx += min(left, store.ChunkSize)
			if inTx >= store.TxBytes {
				most, chunks, inTx = max(most, chunks), 0, 0
			}
			if left <= store.ChunkSize {
				break
			}
		}
	}
	most = max(most, chunks)
	return min(storedBytes, most*2*(storedBytes/int64(stored)))
}

// checkpointNeed estimates the room the next checkpoint takes in the store at its peak: the
// policy's weights as float32 (a LoRA run's frozen base only while the run has no checkpoint: its
// chunks are the same in every one, stored once), the AdamW moments when
// checkpoint.save_optimizer, ppo's value head, the model's files (once, like the base), bbolt's
// pages for each chunk, what bbolt rewrites of the chunks stored (rewriteBytes), and 1 MiB for the
// manifest's transaction and the tree above the chunks. Chunks another run stored already are
// counted too: an estimate from above.
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
	return storedBytes(sizes) + rewriteBytes(sizes, n, bytes) + 1<<20
}

// checkRoom is the space check before the checkpoint of step, which needs need bytes: nil when it
// fits (after a warning when it leaves less than the margin), else the refusal. Chunks that no
// checkpoint names (a crash's, an earlier failed checkpoint's) are collected before a refusal.
func (c *Controller) checkRoom(step int, need int64) error {
	sp, err := storeSpace(c.opts.Store)
	if err != nil {
		c.emit(event.Error{Message: fmt.Sprintf("disk: the free space for the store %s is unknown (%v); writing the checkpoint of step %d (%s) unchecked",
			c.opts.Store.Path(), err, step, store.HumanBytes(need))})
		return nil
	}
	v := roomFor(need, sp)
	if v == roomNone {
		if n, err := c.opts.Store.GC(); err == nil && n > 0 {
			if again, err := storeSpace(c.opts.Store); err == nil {
				sp, v = again, roomFor(need, again)
			}
		}
	}
	switch v {
	case roomNone:
		return c.opts.Store.NoRoom(c.opts.RunID, step, need, sp, nil)
	case roomLow:
		c.emit(event.Error{Message: lowDiskLine(c.opts.Store.Path(), step, need, sp)})
	}
	return nil
}

// lowDiskLine is the warning before a checkpoint that fits with less than the margin to spare.
func lowDiskLine(path string, step int, need int64, sp store.Space) string {
	return fmt.Sprintf("disk space low: the store %s has %s free and the checkpoint of step %d needs %s, less than %s to spare "+
		"(the margin kept for the step's other writes): free space there, or keep fewer checkpoints (checkpoint.keep_last, keep_best), before the disk fills",
		path, store.Bytes(sp.Free()), step, store.Bytes(need), store.HumanBytes(checkpointMargin(need)))
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
