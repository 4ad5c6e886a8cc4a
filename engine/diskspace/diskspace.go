// Package diskspace is the check a run makes before each checkpoint: the room its store has
// (store.Space: the free space of the store's folder's file system, statfs, and the pages free
// inside the bbolt file) against what the checkpoint needs (Need). With less than it needs, the
// run refuses the checkpoint before writing any of it and stops with one line (store.WriteError:
// the path, the bytes needed, the bytes free; the last good checkpoint intact); with less than it
// needs plus a margin (Margin) it warns first and writes it. A write the disk fails anyway
// (another process filled it, a read-only remount, an I/O error) stops the run with the same kind
// of line (store.SaveCheckpointFrom); so does any other store write that fails for the disk's
// sake (store.WriteFailed).
package diskspace

import (
	"fmt"

	"agentrl/store"
)

// Measure measures a store's room; nil is the store's own (store.Store.Space). A test replaces it
// to play a disk of any size.
type Measure func(*store.Store) (store.Space, error)

// bboltPage is bbolt's page: a chunk, stored as an overflow value, takes one more for its header.
const bboltPage = 4096

// Margin is the room beyond a checkpoint's own below which the run warns before writing it: a
// tenth of the checkpoint and 64 MiB, for the step's trajectories and metrics, bbolt's pages and
// what else writes to the disk meanwhile.
func Margin(need int64) int64 { return need/10 + 64<<20 }

// Room is the verdict of the space check.
type Room int

const (
	RoomOK   Room = iota // the checkpoint and the margin fit
	RoomLow              // the checkpoint fits, not the margin: warn
	RoomNone             // the checkpoint does not fit: refuse it
)

// For is the space check: need bytes against the free space sp.
func For(need int64, sp store.Space) Room {
	switch free := sp.Free(); {
	case free < need:
		return RoomNone
	case free < need+Margin(need):
		return RoomLow
	}
	return RoomOK
}

// StoredBytes estimates what a checkpoint of tensors of these byte sizes adds to the store file:
// the bytes, one bbolt page per 4 MiB chunk, and the manifest's line for each chunk and tensor.
func StoredBytes(sizes []int64) int64 {
	var n int64
	for _, b := range sizes {
		chunks := max(1, (b+store.ChunkSize-1)/store.ChunkSize)
		n += b + chunks*(bboltPage+72) + 256
	}
	return n
}

// RewriteBytes estimates what bbolt rewrites while it stores a checkpoint of tensors of these byte
// sizes in a store holding stored chunks of storedBytes: a leaf keeps at least two values, and
// each chunk added lands (by its hash) in a leaf whose other chunks are written again in the same
// transaction; their old pages are free from the next one. So the room a checkpoint takes at its
// peak is its own bytes and its largest transaction's rewrite: two stored chunks (of the stored
// chunks' mean size) for each chunk of the transaction with the most chunks (the store commits
// about 64 MiB at a time), at most every chunk stored. The built-in model's checkpoint (7.7 MB in
// 61 chunks, one transaction) rewrites about the checkpoint before it; a 4B model's (4 MiB chunks,
// 16 to a transaction), 128 MiB; a LoRA run's adapters (small chunks, hundreds to a transaction,
// next to the frozen base's 4 MiB ones), gigabytes.
func RewriteBytes(sizes []int64, stored int, storedBytes int64) int64 {
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

// Need is the room a checkpoint of tensors (and files) of these byte sizes takes at its peak in a
// store holding stored chunks of storedBytes: its bytes and bbolt's pages for each chunk
// (StoredBytes), what bbolt rewrites of the chunks stored (RewriteBytes), and 1 MiB for the
// manifest's transaction and the tree above the chunks.
func Need(sizes []int64, stored int, storedBytes int64) int64 {
	return StoredBytes(sizes) + RewriteBytes(sizes, stored, storedBytes) + 1<<20
}

// Check is the space check before the checkpoint of step of run runID, which needs need bytes,
// measured by measure (nil: the store's own): nil when it fits, with a warning to show when it
// leaves less than the margin or the free space is unknown; else the refusal. Chunks that no
// checkpoint names (a crash's, an earlier failed checkpoint's) are collected before a refusal.
func Check(st *store.Store, measure Measure, runID string, step int, need int64) (warning string, err error) {
	if measure == nil {
		measure = (*store.Store).Space
	}
	sp, err := measure(st)
	if err != nil {
		return fmt.Sprintf("disk: the free space for the store %s is unknown (%v); writing the checkpoint of step %d (%s) unchecked",
			st.Path(), err, step, store.HumanBytes(need)), nil
	}
	v := For(need, sp)
	if v == RoomNone {
		if n, err := st.GC(); err == nil && n > 0 {
			if again, err := measure(st); err == nil {
				sp, v = again, For(need, again)
			}
		}
	}
	switch v {
	case RoomNone:
		return "", st.NoRoom(runID, step, need, sp, nil)
	case RoomLow:
		return lowDiskLine(st.Path(), step, need, sp), nil
	}
	return "", nil
}

// lowDiskLine is the warning before a checkpoint that fits with less than the margin to spare.
func lowDiskLine(path string, step int, need int64, sp store.Space) string {
	return fmt.Sprintf("disk space low: the store %s has %s free and the checkpoint of step %d needs %s, less than %s to spare "+
		"(the margin kept for the step's other writes): free space there, or keep fewer checkpoints (checkpoint.keep_last, keep_best), before the disk fills",
		path, store.Bytes(sp.Free()), step, store.Bytes(need), store.HumanBytes(Margin(need)))
}
