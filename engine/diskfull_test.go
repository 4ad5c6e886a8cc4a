package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/diskspace"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// diskTestController is a controller on a small model (2 layers, hidden 128, the built-in
// tokenizer's vocabulary) with a store in a temporary folder, saving AdamW moments; its events
// go to a buffered channel the test reads.
func diskTestController(t *testing.T) (*Controller, *store.Store, chan event.Event) {
	t.Helper()
	return storeController(t, "disk", "3", func(vocab int) *model.Config {
		return &model.Config{Family: model.Qwen3, VocabSize: vocab, HiddenSize: 128, IntermediateSize: 256, NumLayers: 2,
			NumHeads: 2, NumKVHeads: 1, HeadDim: 64, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true}
	})
}

// storeController is a controller of run id on a random model of shape(the built-in tokenizer's
// vocabulary), policy and reference, with a store in a temporary folder, a small CPU recipe of
// maxSteps steps that saves AdamW moments, and its events on a buffered channel.
func storeController(t *testing.T, id, maxSteps string, shape func(vocab int) *model.Config) (*Controller, *store.Store, chan event.Event) {
	t.Helper()
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := shape(tok.VocabSize())
	policy, err := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reference, err := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	over := noEval(map[string]string{"run.max_steps": maxSteps, "rollout.tasks_per_step": "2", "rollout.group_size": "2",
		"rollout.max_new_tokens": "8", "rollout.max_total_tokens": "96", "env.tasks.train_size": "8", "env.tasks.heldout_size": "4",
		"eval.heldout_tasks": "2", "eval.n_samples": "2", "eval.ks": "1,2", "eval.validation_tasks": "2", "eval.validation_samples": "2",
		"checkpoint.save_optimizer": "true"})
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: over})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	events := make(chan event.Event, 256)
	c, err := New(Options{Recipe: r, RecipePath: "retool.yaml", RunID: id, Policy: policy, Reference: reference,
		Tokenizer: tok, Store: st, Events: events, Backend: "go", ModelFiles: map[string][]byte{"config.json": []byte(`{"model":"test"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, st, events
}

// drained is the events waiting in ch.
func drained(ch chan event.Event) []event.Event {
	var out []event.Event
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// playDisk makes c's space check see a disk with free bytes (nothing inside the store file).
func playDisk(c *Controller, free int64) {
	c.opts.hooks.space = func(s *store.Store) (store.Space, error) {
		return store.Space{Dir: filepath.Dir(s.Path()), Disk: free}, nil
	}
}

// allocated is the bytes the file at path takes on its disk (st_blocks: bbolt grows its file
// sparsely), failing the test when it cannot be read.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// TestCheckpointNeedCoversWhatIsWritten: the estimate of a checkpoint (weights, AdamW moments, the
// model's file) is at least its tensors' bytes and what writing it takes from the disk (the store
// file's allocated blocks, plus the pages it took from those free inside the file). Three
// checkpoints of noise of the same sizes, each making bbolt rewrite chunks stored before it, grow
// the file by no more than the estimate less the room free inside it before, and by at least half
// of that less 1 MiB (the estimate is from above, not far above).
func TestCheckpointNeedCoversWhatIsWritten(t *testing.T) {
	c, st, _ := diskTestController(t)
	for step := 1; step <= 2; step++ {
		need := c.checkpointNeed(c.lastSaved > 0)
		before, _ := st.Space()
		blocks := allocated(t, st.Path())
		if err := c.save(context.Background(), step, true); err != nil {
			t.Fatal(err)
		}
		after, _ := st.Space()
		took := allocated(t, st.Path()) - blocks + before.InFile - after.InFile
		m, err := st.Manifest("disk", step)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("checkpoint %d: %s of tensors; estimated %s, took %s of the disk", step, store.HumanBytes(m.Bytes), store.Bytes(need), store.Bytes(took))
		if need < took || need < m.Bytes {
			t.Errorf("checkpoint %d: estimated %d bytes; it took %d of the disk and holds %d of tensors", step, need, took, m.Bytes)
		}
	}
	// The weights did not change and the untrained moments are zeros: the chunks above were mostly
	// stored once. Checkpoints of noise of the same sizes share none, and each makes bbolt rewrite
	// chunks stored before it.
	rng := rand.New(rand.NewPCG(1, 2))
	for step := 1; step <= 3; step++ {
		var sizes []int64
		var noise []*safetensors.Tensor
		for i, spec := range c.opts.Policy.Params.Specs {
			for k := range 3 { // the weight and its two moments
				d := make([]byte, 4*spec.Size())
				for j := range d {
					d[j] = byte(rng.Uint32())
				}
				noise = append(noise, &safetensors.Tensor{Name: fmt.Sprintf("%d.%d", i, k), DType: safetensors.F32, Shape: []int{spec.Size()}, Data: d})
				sizes = append(sizes, int64(len(d)))
			}
		}
		n, bytes, err := st.Chunks()
		if err != nil {
			t.Fatal(err)
		}
		need := diskspace.Need(sizes, n, bytes)
		before, _ := st.Space()
		blocks := allocated(t, st.Path())
		if err := st.SaveCheckpoint(&store.Checkpoint{Manifest: store.Manifest{Run: "noise", Step: step}, Weights: noise}); err != nil {
			t.Fatal(err)
		}
		grew := allocated(t, st.Path()) - blocks
		t.Logf("checkpoint %d of noise, %s of tensors, %d chunks stored before: estimated %s; the file grew %s, %s free in it before",
			step, store.HumanBytes(diskspace.StoredBytes(sizes)), n, store.Bytes(need), store.Bytes(grew), store.HumanBytes(before.InFile))
		if need < grew+before.InFile || need > 2*(grew+before.InFile)+2<<20 {
			t.Errorf("checkpoint %d of noise: estimated %d bytes; the file grew %d with %d free in it (want the estimate between that and twice it)", step, need, grew, before.InFile)
		}
	}
}

// TestCheckpointRefusedWithoutRoom plays a disk one byte short of the second checkpoint: the save
// is refused before anything is written, with one line naming the store's path, the bytes needed
// and free, and the first checkpoint, intact; the store's chunks are as before. With room for the
// checkpoint but not the margin, the save warns (one event.Error line) and writes it.
func TestCheckpointRefusedWithoutRoom(t *testing.T) {
	c, st, events := diskTestController(t)
	if err := c.save(context.Background(), 1, true); err != nil {
		t.Fatal(err)
	}
	drained(events)
	blobs, _ := st.BlobCount()
	need := c.checkpointNeed(true)
	playDisk(c, need-1)
	err := c.save(context.Background(), 2, true)
	var we *store.WriteError
	if !errors.As(err, &we) || !we.Refused || we.Need != need || we.Space.Free() != need-1 || we.Last != 1 || we.Step != 2 {
		t.Fatalf("save without room: %v (%+v); want a refusal of step 2 needing %d with %d free, step 1 intact", err, we, need, need-1)
	}
	msg := err.Error()
	t.Logf("refused: %s", msg)
	for _, w := range []string{st.Path(), store.Bytes(need), store.Bytes(need-1) + " free", "nothing was written", "checkpoint of step 1 is intact", "agentrl-tui resume --store " + st.Path() + " disk"} {
		if !strings.Contains(msg, w) {
			t.Errorf("the refusal %q lacks %q", msg, w)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("the refusal spans lines: %q", msg)
	}
	if _, err := st.Manifest("disk", 2); err == nil {
		t.Error("a refused checkpoint was stored")
	}
	if n, _ := st.BlobCount(); n != blobs {
		t.Errorf("%d chunks after the refusal; %d before", n, blobs)
	}
	if err := st.Verify("disk", 1); err != nil {
		t.Error(err)
	}
	for _, e := range drained(events) {
		if _, ok := e.(event.Checkpoint); ok {
			t.Errorf("a refused checkpoint was announced: %+v", e)
		}
	}

	playDisk(c, need+diskspace.Margin(need)/2)
	if err := c.save(context.Background(), 2, true); err != nil {
		t.Fatalf("with room for the checkpoint but not its margin: %v", err)
	}
	var warned []string
	for _, e := range drained(events) {
		if w, ok := e.(event.Error); ok {
			warned = append(warned, w.Message)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "disk space low") || !strings.Contains(warned[0], st.Path()) ||
		!strings.Contains(warned[0], store.Bytes(need)) || !strings.Contains(warned[0], "checkpoint of step 2") {
		t.Errorf("warnings before a checkpoint that leaves less than the margin: %q; want one naming the path, step 2 and %d bytes", warned, need)
	} else {
		t.Logf("warned: %s", warned[0])
	}
	if err := st.Verify("disk", 2); err != nil {
		t.Error(err)
	}
}

// TestCheckpointDiskFailsMidWrite injects ENOSPC into the store's second checkpoint (the space
// check passes: the disk fills under the write): the save fails with one line carrying the
// estimate of what the checkpoint needs and the space measured after the failure; the first
// checkpoint loads, no chunk of the second is left. The run's end makes any store write the disk
// failed (here a bare ENOSPC from a metrics write) such a line, and leaves other errors alone.
func TestCheckpointDiskFailsMidWrite(t *testing.T) {
	c, st, _ := diskTestController(t)
	if err := c.save(context.Background(), 1, true); err != nil {
		t.Fatal(err)
	}
	restore := store.InjectFault(syscall.ENOSPC, 0)
	defer restore()
	err := c.save(context.Background(), 2, true)
	var we *store.WriteError
	if !errors.As(err, &we) || we.Refused || we.Cause != store.CauseNoSpace || we.Need != c.checkpointNeed(true) || we.Last != 1 || we.Step != 2 {
		t.Fatalf("a checkpoint the disk failed: %v (%+v)", err, we)
	}
	t.Logf("failed: %s", err)
	if !strings.Contains(err.Error(), store.Bytes(we.Need)) || !strings.Contains(err.Error(), st.Path()) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("the failure %q does not name the bytes needed and the path, or unwrap to ENOSPC", err)
	}
	restore()
	if err := st.Verify("disk", 1); err != nil {
		t.Error(err)
	}
	all, _ := st.Checkpoints("disk")
	if len(all) != 1 {
		t.Errorf("%d checkpoints after the failure; want 1", len(all))
	}

	bare := &fs.PathError{Op: "write", Path: st.Path(), Err: syscall.ENOSPC}
	if err := c.storeFailure(bare); !errors.As(err, &we) || we.Step != 0 || we.Last != 1 || !strings.Contains(err.Error(), "a store write failed in the store "+st.Path()) {
		t.Errorf("storeFailure(ENOSPC) = %v", err)
	}
	other := errors.New("the tokenizer broke")
	if err := c.storeFailure(other); err != other {
		t.Errorf("storeFailure changed an error that is not the disk's: %v", err)
	}
}
