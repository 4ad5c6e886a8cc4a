package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// Index file and single-file names as HuggingFace writes them.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// shardPattern matches the shard names WriteDir (and HuggingFace) produce.
const shardPattern = "model-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].safetensors"

// ReadFile reads and parses one .safetensors file (one read of the whole file; tensors slice
// into that buffer).
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading safetensors: %w", err)
	}
	return Parse(data, path)
}

// writeAtomic writes path through a temporary file in the same folder: write, fsync, mode
// 0644, rename, then fsync of the folder, so a crash leaves the old file or the new one.
func writeAtomic(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	err = write(tmp)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// syncDir makes a rename or removal in dir durable; file systems that cannot sync a folder
// are not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

// WriteFile writes a safetensors file atomically: a temporary file in the same folder, fsync,
// rename (mode 0644). Bad tensors are reported before anything is written.
func WriteFile(path string, metadata map[string]string, tensors []*Tensor) error {
	if _, err := sortedChecked(tensors); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return writeAtomic(path, func(w io.Writer) error { return Encode(w, metadata, tensors) })
}

// index is model.safetensors.index.json.
type index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// ReadDir reads a model folder: the shards named by model.safetensors.index.json when it
// exists, else model.safetensors, merged into one File. Sharded Files have Source = dir and
// each tensor's Source is its shard; metadata of all shards is merged.
func ReadDir(dir string) (*File, error) {
	idxPath := filepath.Join(dir, IndexFile)
	data, err := os.ReadFile(idxPath)
	if errors.Is(err, fs.ErrNotExist) {
		single := filepath.Join(dir, SingleFile)
		if _, err := os.Stat(single); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no weights in %s: expected %s or %s", dir, SingleFile, IndexFile)
		}
		return ReadFile(single)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", idxPath, err)
	}
	var idx index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %w", idxPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is empty or missing; it must map every tensor name to its shard file", idxPath)
	}
	shards := map[string][]string{}
	for name, shard := range idx.WeightMap {
		if shard == "" || shard == "." || shard == ".." || shard != filepath.Base(shard) {
			return nil, fmt.Errorf("%s: tensor %s: shard %q must be a file name in the same folder", idxPath, name, shard)
		}
		shards[shard] = append(shards[shard], name)
	}
	out := &File{Metadata: map[string]string{}, Tensors: map[string]*Tensor{}, Source: dir}
	shardNames := make([]string, 0, len(shards))
	for s := range shards {
		shardNames = append(shardNames, s)
	}
	sort.Strings(shardNames)
	for _, s := range shardNames {
		f, err := ReadFile(filepath.Join(dir, s))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s names shard %s, which is missing from %s", idxPath, s, dir)
			}
			return nil, err
		}
		names := shards[s]
		sort.Strings(names)
		for _, name := range names {
			if _, ok := f.Tensors[name]; !ok {
				return nil, fmt.Errorf("%s maps tensor %s to %s, which does not hold it", idxPath, name, s)
			}
		}
		for _, name := range f.Names() {
			t := f.Tensors[name]
			if prev, dup := out.Tensors[name]; dup {
				return nil, fmt.Errorf("tensor %s is in both %s and %s; a sharded model must hold each tensor once", name, prev.Source, t.Source)
			}
			out.Tensors[name] = t
		}
		for k, v := range f.Metadata {
			out.Metadata[k] = v
		}
	}
	return out, nil
}

// WriteDir writes tensors into dir (created if needed) as model.safetensors, or, when
// maxShardBytes > 0 and the tensor data exceeds it, as numbered shards
// (model-00001-of-00003.safetensors, each with the metadata) plus model.safetensors.index.json,
// as HuggingFace does: tensors in name order, a new shard when the next tensor would pass the
// limit (a tensor larger than the limit gets a shard of its own). Weight files of an earlier
// layout in dir (the other form, surplus shards) are removed afterwards so that ReadDir cannot
// pick up stale weights; each file is replaced atomically.
func WriteDir(dir string, metadata map[string]string, tensors []*Tensor, maxShardBytes int64) error {
	sorted, err := sortedChecked(tensors)
	if err != nil {
		return fmt.Errorf("writing weights to %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	var total int64
	for _, t := range sorted {
		total += int64(len(t.Data))
	}
	if maxShardBytes <= 0 || total <= maxShardBytes {
		if err := WriteFile(filepath.Join(dir, SingleFile), metadata, sorted); err != nil {
			return err
		}
		// The index takes precedence in ReadDir: drop it first, then its shards.
		return removeStale(dir, map[string]bool{SingleFile: true}, true)
	}
	var groups [][]*Tensor
	var cur []*Tensor
	var size int64
	for _, t := range sorted {
		if len(cur) > 0 && size+int64(len(t.Data)) > maxShardBytes {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, t)
		size += int64(len(t.Data))
	}
	groups = append(groups, cur)
	idx := index{Metadata: map[string]any{"total_size": total}, WeightMap: map[string]string{}}
	keep := map[string]bool{IndexFile: true}
	for i, g := range groups {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(groups))
		if err := WriteFile(filepath.Join(dir, name), metadata, g); err != nil {
			return err
		}
		keep[name] = true
		for _, t := range g {
			idx.WeightMap[t.Name] = name
		}
	}
	js, err := json.MarshalIndent(idx, "", "  ") // map keys come out sorted
	if err != nil {
		return fmt.Errorf("encoding %s: %w", IndexFile, err)
	}
	js = append(js, '\n')
	if err := writeAtomic(filepath.Join(dir, IndexFile), func(w io.Writer) error {
		_, err := w.Write(js)
		return err
	}); err != nil {
		return err
	}
	return removeStale(dir, keep, false)
}

// removeStale deletes the weight files in dir that WriteDir did not just write: the index
// (when dropIndex), model.safetensors and files named like shards, except those in keep.
func removeStale(dir string, keep map[string]bool, dropIndex bool) error {
	var stale []string
	if dropIndex {
		stale = append(stale, IndexFile)
	}
	if !keep[SingleFile] {
		stale = append(stale, SingleFile)
	}
	shards, err := filepath.Glob(filepath.Join(dir, shardPattern))
	if err != nil {
		return fmt.Errorf("listing old shards in %s: %w", dir, err)
	}
	for _, s := range shards {
		if !keep[filepath.Base(s)] {
			stale = append(stale, filepath.Base(s))
		}
	}
	removed := false
	for _, name := range stale {
		err := os.Remove(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing stale weights %s: %w", filepath.Join(dir, name), err)
		}
		removed = removed || err == nil
	}
	if removed {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("syncing %s: %w", dir, err)
		}
	}
	return nil
}
