package store

import (
	"os"
	"path/filepath"
	"testing"

	"agentrl/store/safetensors"
)

// TestExportBF16Sharded exports the qwen3-tiny fixture as stored, in bf16, and in bf16 split into
// shards: the bf16 weights are half the bytes, each value the float32 one rounded to bf16, and the
// shards (at most 64 KiB each, a bigger tensor alone) come with an index that ReadDir follows to
// the same tensors as the single file.
func TestExportBF16Sharded(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.ImportHF(filepath.Join("..", "testdata", "fixtures", "qwen3-tiny"), "tiny", 0); err != nil {
		t.Fatal(err)
	}
	asStored, bf16, sharded := t.TempDir(), t.TempDir(), t.TempDir()
	if err := s.Export("tiny", 0, asStored); err != nil {
		t.Fatal(err)
	}
	if err := s.ExportWith("tiny", 0, bf16, ExportOptions{DType: safetensors.BF16}); err != nil {
		t.Fatal(err)
	}
	if err := s.ExportWith("tiny", 0, sharded, ExportOptions{DType: safetensors.BF16, ShardBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.ExportWith("tiny", 0, t.TempDir(), ExportOptions{DType: "I8"}); err == nil {
		t.Error("exporting as I8 gave no error")
	}
	read := func(dir string) *safetensors.File {
		f, err := safetensors.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	orig, half, shards := read(asStored), read(bf16), read(sharded)
	var origBytes, halfBytes int64
	for _, name := range orig.Names() {
		o, h, sh := orig.Tensors[name], half.Tensors[name], shards.Tensors[name]
		if h == nil || sh == nil {
			t.Fatalf("%s missing from a bf16 export", name)
		}
		origBytes += int64(len(o.Data))
		halfBytes += int64(len(h.Data))
		if h.DType != safetensors.BF16 || sh.DType != safetensors.BF16 || string(h.Data) != string(sh.Data) {
			t.Errorf("%s: dtypes %s and %s, or the sharded bytes differ from the single file's", name, h.DType, sh.DType)
		}
		ov, _ := o.Float32()
		hv, _ := h.Float32()
		for i := range ov {
			if want := safetensors.BF16ToFloat32(safetensors.Float32ToBF16(ov[i])); hv[i] != want {
				t.Fatalf("%s[%d] = %v; want %v (%v rounded to bf16)", name, i, hv[i], want, ov[i])
			}
		}
	}
	if halfBytes*2 != origBytes { // the fixture is float32
		t.Errorf("bf16 weights are %d bytes; want half of the float32 %d", halfBytes, origBytes)
	}
	if _, err := os.Stat(filepath.Join(sharded, safetensors.IndexFile)); err != nil {
		t.Errorf("no %s in the sharded export: %v", safetensors.IndexFile, err)
	}
	if m, _ := filepath.Glob(filepath.Join(sharded, "model-*-of-*.safetensors")); len(m) < 2 {
		t.Errorf("%d shards; want several at 64 KiB each", len(m))
	}
	if _, err := os.Stat(filepath.Join(sharded, "config.json")); err != nil {
		t.Errorf("the sharded export lacks config.json: %v", err)
	}
}
