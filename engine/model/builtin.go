package model

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// BuiltinSourceDir is where the built-in small model lives in the source tree, relative to the
// repository's root (`make builtin` rebuilds it); the binary embeds a copy of it.
const BuiltinSourceDir = "testdata/builtin"

// BuiltinDir returns a folder holding the built-in model, for Load: the source tree's when the
// process runs from the repository's root (so a freshly rebuilt model is used at once), else the
// files of embedded (the binary's copy: config.json, model.safetensors, tokenizer.json at its
// root), unpacked once into the user's cache directory under a name derived from their contents.
func BuiltinDir(embedded fs.FS) (string, error) {
	if HasConfig(BuiltinSourceDir) {
		return BuiltinSourceDir, nil
	}
	h := sha256.New()
	names, err := fs.Glob(embedded, "*")
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", fmt.Errorf("the built-in model is missing from this binary and there is no %s here; give --model DIR", BuiltinSourceDir)
	}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := fs.ReadFile(embedded, n)
		if err != nil {
			return "", err
		}
		files[n] = b
		h.Write([]byte(n))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agentrl-tui", "builtin-"+hex.EncodeToString(h.Sum(nil))[:12])
	if HasConfig(dir) {
		return dir, nil
	}
	// Unpack into a fresh folder and rename it into place, so a concurrent start never sees half.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("unpacking the built-in model: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "unpack-")
	if err != nil {
		return "", fmt.Errorf("unpacking the built-in model: %w", err)
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(tmp, n), b, 0o644); err != nil {
			os.RemoveAll(tmp)
			return "", fmt.Errorf("unpacking the built-in model: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if HasConfig(dir) {
			return dir, nil // another process unpacked it first
		}
		return "", fmt.Errorf("unpacking the built-in model: %w", err)
	}
	return dir, nil
}

// HasConfig reports whether dir holds a config.json, as every model folder does (the built-in
// model's unpacked copy included).
func HasConfig(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "config.json"))
	return err == nil
}
