package main

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// builtinModelDir is where the built-in small model lives in the source tree (`make builtin`
// rebuilds it). The binary carries a copy, so it runs from any directory.
const builtinModelDir = "testdata/builtin"

//go:embed testdata/builtin
var builtinFS embed.FS

// builtinModel returns a folder holding the built-in model: the source tree's when the binary runs
// from the repository (so a freshly rebuilt model is used at once), else the embedded copy,
// unpacked once into the user's cache directory under a name derived from its contents.
func builtinModel() (string, error) {
	if _, err := os.Stat(filepath.Join(builtinModelDir, "config.json")); err == nil {
		return builtinModelDir, nil
	}
	sub, err := fs.Sub(builtinFS, builtinModelDir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	names, err := fs.Glob(sub, "*")
	if err != nil {
		return "", err
	}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := fs.ReadFile(sub, n)
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
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
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
		if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr == nil {
			return dir, nil // another process unpacked it first
		}
		return "", fmt.Errorf("unpacking the built-in model: %w", err)
	}
	return dir, nil
}
