package model

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestBuiltinDir: away from the repository's root, the embedded files are unpacked once into the
// cache directory under a name of their contents, and found there the next time; an empty
// embedding is an error that names the --model way out.
func TestBuiltinDir(t *testing.T) {
	if HasConfig(BuiltinSourceDir) {
		t.Skipf("%s exists beside the test: BuiltinDir would return it", BuiltinSourceDir)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	embedded := fstest.MapFS{
		"config.json":    {Data: []byte(`{"model_type": "qwen3"}`)},
		"tokenizer.json": {Data: []byte(`{}`)},
	}
	dir, err := BuiltinDir(embedded)
	if err != nil {
		t.Fatal(err)
	}
	if !HasConfig(dir) {
		t.Fatalf("%s holds no config.json", dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json")); err != nil || string(b) != "{}" {
		t.Errorf("tokenizer.json %q, %v; want the embedded {}", b, err)
	}
	if again, err := BuiltinDir(embedded); err != nil || again != dir {
		t.Errorf("second call: %q, %v; want %q again", again, err, dir)
	}
	if _, err := BuiltinDir(fstest.MapFS{}); err == nil {
		t.Error("an empty embedding: no error")
	}
}
