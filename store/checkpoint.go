package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"agentrl/store/safetensors"
)

// ChunkSize is the size of the content-addressed pieces tensors are cut into.
const ChunkSize = 4 << 20

// txBytes bounds the chunk bytes written per transaction (bbolt copies a transaction's values
// at commit; small transactions keep that copy cheap).
const txBytes = 64 << 20

// TensorRef names a stored tensor and its chunks.
type TensorRef struct {
	Name   string            `json:"name"`
	DType  safetensors.DType `json:"dtype"`
	Shape  []int             `json:"shape"`
	Bytes  int64             `json:"bytes"`
	Chunks []string          `json:"chunks"` // hex sha256 of each chunk, in order
}

// FileRef names a stored file (config.json, tokenizer.json, …) by its chunks.
type FileRef struct {
	Name   string   `json:"name"`
	Bytes  int64    `json:"bytes"`
	Chunks []string `json:"chunks"`
}

// Manifest describes one checkpoint. It is written last: a checkpoint exists once its manifest does.
type Manifest struct {
	Run          string             `json:"run"`
	Step         int                `json:"step"`
	Created      time.Time          `json:"created"`
	Metrics      map[string]float64 `json:"metrics,omitempty"`
	RecipeHash   string             `json:"recipe_hash,omitempty"`
	DataPosition int64              `json:"data_position"`
	RNG          []byte             `json:"rng,omitempty"`
	Tensors      []TensorRef        `json:"tensors"`
	Optimizer    []TensorRef        `json:"optimizer,omitempty"` // AdamW moments, when saved
	Files        []FileRef          `json:"files,omitempty"`
	Bytes        int64              `json:"bytes"` // tensor bytes (before deduplication)
}

// Checkpoint is what a caller saves or loads: the manifest fields plus the data.
type Checkpoint struct {
	Manifest
	Weights  []*safetensors.Tensor
	Moments  []*safetensors.Tensor
	FileData map[string][]byte // e.g. "config.json", "tokenizer.json"
}

// chunker collects chunks and flushes them in bounded transactions, skipping ones present.
type chunker struct {
	s       *Store
	pending map[string][]byte
	size    int
	fresh   []string // pending chunks added since the last detach, still slices of their caller's buffer
}

func (c *chunker) add(data []byte) ([]string, error) {
	var hashes []string
	for off := 0; off < len(data) || (off == 0 && len(data) == 0); off += ChunkSize {
		end := min(off+ChunkSize, len(data))
		sum := sha256.Sum256(data[off:end])
		h := hex.EncodeToString(sum[:])
		hashes = append(hashes, h)
		if _, dup := c.pending[h]; !dup {
			c.pending[h] = data[off:end]
			c.size += end - off
			c.fresh = append(c.fresh, h)
		}
		if c.size >= txBytes {
			if err := c.flush(); err != nil {
				return nil, err
			}
		}
		if len(data) == 0 {
			break
		}
	}
	return hashes, nil
}

// detach copies the chunks still waiting for their transaction out of the buffers they were cut
// from, so that a streamed tensor's buffer is free once it has been added (at most txBytes copied).
func (c *chunker) detach() {
	for _, h := range c.fresh {
		if d, ok := c.pending[h]; ok {
			c.pending[h] = bytes.Clone(d)
		}
	}
	c.fresh = c.fresh[:0]
}

func (c *chunker) flush() error {
	if len(c.pending) == 0 {
		return nil
	}
	if err := c.s.writeFault(c.size); err != nil { // a test's full disk (FaultEnv)
		c.pending, c.size, c.fresh = map[string][]byte{}, 0, c.fresh[:0]
		return err
	}
	err := c.s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bBlobs)
		for h, d := range c.pending {
			k, _ := hex.DecodeString(h)
			if b.Get(k) != nil {
				continue // already stored by an earlier checkpoint
			}
			if err := b.Put(k, d); err != nil {
				return err
			}
		}
		return nil
	})
	c.pending, c.size, c.fresh = map[string][]byte{}, 0, c.fresh[:0]
	return err
}

// TensorSource yields a checkpoint's tensors one at a time (SaveCheckpointFrom): the next one, or
// nil at the end.
type TensorSource func() (*safetensors.Tensor, error)

// Tensors is a TensorSource over tensors already in memory.
func Tensors(ts []*safetensors.Tensor) TensorSource {
	i := 0
	return func() (*safetensors.Tensor, error) {
		if i == len(ts) {
			return nil, nil
		}
		i++
		return ts[i-1], nil
	}
}

// SaveCheckpoint stores a checkpoint whose tensors are all in memory (SaveCheckpointFrom).
func (s *Store) SaveCheckpoint(cp *Checkpoint) error {
	return s.SaveCheckpointFrom(cp.Manifest, Tensors(cp.Weights), Tensors(cp.Moments), cp.FileData)
}

// SaveCheckpointFrom stores a checkpoint: chunks first (in transactions of at most 64 MiB,
// skipping chunks already stored), then the manifest in one last transaction. The weights and the
// moments (optimizer state; nil for none) come one tensor at a time, so a caller that makes each
// when asked holds one tensor, and at most 64 MiB of chunks waiting for their transaction, instead
// of the whole checkpoint. The manifest lists each group in name order, whatever the order given.
//
// A write that fails leaves the store as its last commit did: the chunks this checkpoint had
// committed are collected at once, and a failure of the disk (full, read-only, I/O) comes back as
// a *WriteError naming the store's path and the space left (diskspace.go).
func (s *Store) SaveCheckpointFrom(man Manifest, weights, moments TensorSource, files map[string][]byte) error {
	if man.Run == "" {
		return errors.New("store: checkpoint has no run id")
	}
	m := man
	if err := s.saveCheckpointFrom(&m, weights, moments, files); err != nil {
		var src *sourceError
		if errors.As(err, &src) { // the caller's tensor failed, not the store
			_, _ = s.GC()
			return src.err
		}
		return s.checkpointFailed(&m, err)
	}
	return nil
}

// sourceError is an error of a checkpoint's TensorSource, kept apart from the store's own.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }

func (s *Store) saveCheckpointFrom(mp *Manifest, weights, moments TensorSource, files map[string][]byte) error {
	c := &chunker{s: s, pending: map[string][]byte{}}
	m := mp
	m.Created = time.Now().UTC()
	m.Tensors, m.Optimizer, m.Files, m.Bytes = nil, nil, nil, 0
	refs := func(next TensorSource) ([]TensorRef, error) {
		var out []TensorRef
		for next != nil {
			t, err := next()
			if err != nil {
				return nil, &sourceError{err}
			}
			if t == nil {
				break
			}
			h, err := c.add(t.Data)
			if err != nil {
				return nil, err
			}
			out = append(out, TensorRef{Name: t.Name, DType: t.DType, Shape: t.Shape, Bytes: int64(len(t.Data)), Chunks: h})
			m.Bytes += int64(len(t.Data))
			c.detach()
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
	var err error
	if m.Tensors, err = refs(weights); err != nil {
		return err
	}
	if m.Optimizer, err = refs(moments); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h, err := c.add(files[n])
		if err != nil {
			return err
		}
		m.Files = append(m.Files, FileRef{Name: n, Bytes: int64(len(files[n])), Chunks: h})
	}
	if err := c.flush(); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		blobs := tx.Bucket(bBlobs)
		for _, h := range m.allChunks() { // never publish a manifest whose chunks are not all there
			k, _ := hex.DecodeString(h)
			if blobs.Get(k) == nil {
				return fmt.Errorf("chunk %s vanished before the manifest was published", h)
			}
		}
		b, err := stepBucket(tx, bCkpt, m.Run, true)
		if err != nil {
			return err
		}
		return b.Put(u64(uint64(m.Step)), data)
	})
}

func (m *Manifest) allChunks() []string {
	var out []string
	for _, group := range [][]TensorRef{m.Tensors, m.Optimizer} {
		for _, t := range group {
			out = append(out, t.Chunks...)
		}
	}
	for _, f := range m.Files {
		out = append(out, f.Chunks...)
	}
	return out
}

// Checkpoints lists a run's manifests in step order.
func (s *Store) Checkpoints(run string) ([]Manifest, error) {
	var out []Manifest
	err := s.forEach(bCkpt, run, func(_, v []byte) error {
		var m Manifest
		if err := json.Unmarshal(v, &m); err != nil {
			return fmt.Errorf("store %s: unreadable manifest in run %s: %w", s.path, run, err)
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

// Manifest returns one checkpoint's manifest.
func (s *Store) Manifest(run string, step int) (Manifest, error) {
	var m Manifest
	err := s.db.View(func(tx *bolt.Tx) error {
		b, _ := stepBucket(tx, bCkpt, run, false)
		var v []byte
		if b != nil {
			v = b.Get(u64(uint64(step)))
		}
		if v == nil {
			return fmt.Errorf("store %s: run %q has no checkpoint at step %d", s.path, run, step)
		}
		return json.Unmarshal(v, &m)
	})
	return m, err
}

// LatestCheckpoint returns the manifest with the highest step.
func (s *Store) LatestCheckpoint(run string) (Manifest, error) {
	all, err := s.Checkpoints(run)
	if err != nil {
		return Manifest{}, err
	}
	if len(all) == 0 {
		return Manifest{}, fmt.Errorf("store %s: run %q has no checkpoint", s.path, run)
	}
	return all[len(all)-1], nil
}

// LoadCheckpoint reads a checkpoint back, checking every chunk's hash.
func (s *Store) LoadCheckpoint(run string, step int) (*Checkpoint, error) {
	if live, _ := s.Live(); live {
		return nil, fmt.Errorf("store %s is being written by a running run, whose live snapshot holds no checkpoint tensors: load step %d once the run has stopped", s.path, step)
	}
	m, err := s.Manifest(run, step)
	if err != nil {
		return nil, err
	}
	cp := &Checkpoint{Manifest: m, FileData: map[string][]byte{}}
	err = s.db.View(func(tx *bolt.Tx) error {
		blobs := tx.Bucket(bBlobs)
		read := func(what string, n int64, chunks []string) ([]byte, error) {
			out := make([]byte, 0, n)
			for _, h := range chunks {
				k, err := hex.DecodeString(h)
				if err != nil {
					return nil, fmt.Errorf("%s: bad chunk id %q", what, h)
				}
				d := blobs.Get(k)
				if d == nil {
					return nil, fmt.Errorf("store %s: checkpoint %s/%d: %s is missing chunk %s", s.path, run, step, what, h)
				}
				if sum := sha256.Sum256(d); !bytes.Equal(sum[:], k) {
					return nil, fmt.Errorf("store %s: checkpoint %s/%d: %s chunk %s fails its hash check (corrupted data)", s.path, run, step, what, h)
				}
				out = append(out, d...)
			}
			if int64(len(out)) != n {
				return nil, fmt.Errorf("store %s: checkpoint %s/%d: %s has %d bytes, manifest says %d", s.path, run, step, what, len(out), n)
			}
			return out, nil
		}
		for _, group := range []struct {
			refs []TensorRef
			dst  *[]*safetensors.Tensor
		}{{m.Tensors, &cp.Weights}, {m.Optimizer, &cp.Moments}} {
			for _, t := range group.refs {
				d, err := read("tensor "+t.Name, t.Bytes, t.Chunks)
				if err != nil {
					return err
				}
				*group.dst = append(*group.dst, &safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: d})
			}
		}
		for _, f := range m.Files {
			d, err := read("file "+f.Name, f.Bytes, f.Chunks)
			if err != nil {
				return err
			}
			cp.FileData[f.Name] = d
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// Verify re-reads a checkpoint and checks every chunk hash.
func (s *Store) Verify(run string, step int) error {
	_, err := s.LoadCheckpoint(run, step)
	return err
}

// DeleteCheckpoint removes a manifest; its chunks go at the next GC.
func (s *Store) DeleteCheckpoint(run string, step int) error {
	return s.update(func(tx *bolt.Tx) error {
		b, _ := stepBucket(tx, bCkpt, run, false)
		if b == nil {
			return nil
		}
		return b.Delete(u64(uint64(step)))
	})
}

// Retain keeps the best k checkpoints of a run by metric (higher is better), the last n and
// the pinned steps (a checkpoint the user marked best), deletes the others and collects their
// chunks. It returns the deleted steps.
func (s *Store) Retain(run, metric string, bestK, lastN int, pinned ...int) ([]int, error) {
	all, err := s.Checkpoints(run)
	if err != nil {
		return nil, err
	}
	keep := map[int]bool{}
	for _, step := range pinned {
		keep[step] = true
	}
	for i := max(0, len(all)-lastN); i < len(all); i++ {
		keep[all[i].Step] = true
	}
	byMetric := append([]Manifest{}, all...)
	sort.SliceStable(byMetric, func(i, j int) bool { return byMetric[i].Metrics[metric] > byMetric[j].Metrics[metric] })
	for i := 0; i < bestK && i < len(byMetric); i++ {
		keep[byMetric[i].Step] = true
	}
	var deleted []int
	for _, m := range all {
		if !keep[m.Step] {
			if err := s.DeleteCheckpoint(run, m.Step); err != nil {
				return deleted, err
			}
			deleted = append(deleted, m.Step)
		}
	}
	_, err = s.GC()
	return deleted, err
}

// GC deletes chunks that no manifest references (left by deleted checkpoints or by a crash
// before a manifest was published). It returns how many it removed.
func (s *Store) GC() (int, error) {
	removed := 0
	err := s.update(func(tx *bolt.Tx) error {
		live := map[string]bool{}
		err := tx.Bucket(bCkpt).ForEach(func(run, _ []byte) error {
			return tx.Bucket(bCkpt).Bucket(run).ForEach(func(_, v []byte) error {
				var m Manifest
				if err := json.Unmarshal(v, &m); err != nil {
					return err
				}
				for _, h := range m.allChunks() {
					live[h] = true
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		var dead [][]byte
		_ = tx.Bucket(bBlobs).ForEach(func(k, _ []byte) error {
			if !live[hex.EncodeToString(k)] {
				dead = append(dead, append([]byte{}, k...))
			}
			return nil
		})
		for _, k := range dead {
			if err := tx.Bucket(bBlobs).Delete(k); err != nil {
				return err
			}
		}
		removed = len(dead)
		return nil
	})
	return removed, err
}

// BlobCount is the number of stored chunks (for tests and the UI's size column).
func (s *Store) BlobCount() (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bBlobs).Stats().KeyN
		return nil
	})
	return n, err
}

// ExportOptions say how Export writes the weights.
type ExportOptions struct {
	// DType converts every float tensor to this dtype (safetensors.BF16: half the bytes of the
	// stored float32, the dtype of Qwen's own checkpoints; F16; F32); "" writes them as stored.
	DType safetensors.DType
	// ShardBytes, when > 0, splits the weights into model-0000i-of-0000n.safetensors files of at
	// most this many bytes (a tensor bigger than that gets a file of its own) with
	// model.safetensors.index.json, HuggingFace's layout for big models; 0 writes one
	// model.safetensors.
	ShardBytes int64
}

// Export writes a checkpoint as a HuggingFace folder: config.json and the other stored files
// byte for byte, and model.safetensors (float tensors as stored). A LoRA run's checkpoint is
// written merged: each adapter pair folded into its projection (see peft.go).
func (s *Store) Export(run string, step int, dir string) error {
	return s.ExportWith(run, step, dir, ExportOptions{})
}

// ExportWith is Export with the weights converted and sharded as o says.
func (s *Store) ExportWith(run string, step int, dir string, o ExportOptions) error {
	switch o.DType {
	case "", safetensors.F32, safetensors.BF16, safetensors.F16:
	default:
		return fmt.Errorf("export: dtype %s is not one of F32, BF16, F16", o.DType)
	}
	cp, err := s.LoadCheckpoint(run, step)
	if err != nil {
		return err
	}
	src := fmt.Sprintf("store %s: checkpoint %s/%d", s.path, run, step)
	weights := cp.Weights
	if lc, ok, err := loraConfig(cp, src); err != nil {
		return err
	} else if ok {
		if weights, err = mergeLoRA(cp.Weights, lc.LoRAAlpha/float64(lc.R), src); err != nil {
			return err
		}
	}
	if o.DType != "" {
		if weights, err = convertFloats(weights, o.DType, src); err != nil {
			return err
		}
	}
	if err := safetensors.WriteDir(dir, map[string]string{"format": "pt"}, weights, o.ShardBytes); err != nil {
		return err
	}
	for name, data := range cp.FileData {
		if name == AdapterConfigFile {
			continue // the merged model has no adapters
		}
		if filepath.Base(name) != name {
			return fmt.Errorf("store %s: checkpoint %s/%d holds file %q with a path; refusing to write outside %s", s.path, run, step, name, dir)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("exporting %s: %w", name, err)
		}
	}
	return nil
}

// hfFiles are the non-weight files of a HuggingFace folder that a checkpoint carries.
var hfFiles = []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt"}

// ImportHF stores a HuggingFace folder (weights and its config/tokenizer files) as checkpoint
// step of run.
func (s *Store) ImportHF(dir, run string, step int) error {
	f, err := safetensors.ReadDir(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return fmt.Errorf("import %s: no config.json: a HuggingFace model folder needs one", dir)
	}
	cp := &Checkpoint{Manifest: Manifest{Run: run, Step: step}, FileData: map[string][]byte{}}
	for _, n := range f.Names() {
		cp.Weights = append(cp.Weights, f.Tensors[n])
	}
	for _, n := range hfFiles {
		if data, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			cp.FileData[n] = data
		}
	}
	return s.SaveCheckpoint(cp)
}

// convertFloats returns ts with every float tensor in dtype dt (rounded to nearest even); other
// tensors as they are.
func convertFloats(ts []*safetensors.Tensor, dt safetensors.DType, src string) ([]*safetensors.Tensor, error) {
	out := make([]*safetensors.Tensor, len(ts))
	for i, t := range ts {
		switch t.DType {
		case safetensors.F32, safetensors.BF16, safetensors.F16:
		default:
			out[i] = t
			continue
		}
		if t.DType == dt {
			out[i] = t
			continue
		}
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", src, t.Name, err)
		}
		if out[i], err = safetensors.FromFloat32(t.Name, t.Shape, v, dt); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", src, t.Name, err)
		}
	}
	return out, nil
}
