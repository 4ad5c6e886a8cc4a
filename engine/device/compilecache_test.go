package device

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/go-xla/pjrt"
)

func key(c byte) string { return strings.Repeat(string(c), 64) }

// TestCompileCacheRoundTrip: what is stored under a key loads back byte for byte, a key never
// stored or not a SHA-256 in hex loads nothing (and cannot be stored: no file outside the folder),
// a store leaves no temporary file, and a second cache on the same folder (the next process)
// loads it.
func TestCompileCacheRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "xla")
	c, err := OpenCompileCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	exe := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 1000)
	if err := c.Store(key('a'), exe); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
		want      []byte
	}{
		{"stored", key('a'), exe},
		{"never stored", key('b'), nil},
		{"not hex", strings.Repeat("z", 64), nil},
		{"a path", "../" + key('a')[3:], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.Load(tc.key)
			if ok != (tc.want != nil) || !bytes.Equal(got, tc.want) {
				t.Errorf("Load(%q) = %d bytes, %v; want %d bytes", tc.key, len(got), ok, len(tc.want))
			}
		})
	}
	if err := c.Store("../escape", exe); err == nil {
		t.Error("Store of a key that is a path: no error")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != key('a')+".pjrt" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("folder holds %v; want only %s.pjrt", names, key('a'))
	}
	next, err := OpenCompileCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := next.Load(key('a')); !ok || !bytes.Equal(got, exe) {
		t.Error("a second cache on the folder does not load what the first stored")
	}
	if n, b := next.Size(); n != 1 || b != int64(len(exe)) {
		t.Errorf("Size = %d programs, %d bytes; want 1, %d", n, b, len(exe))
	}
}

// TestCompileCacheBound: past Max, the programs used longest ago go (a load counts as a use), and
// the one just stored stays even when it alone is over the bound.
func TestCompileCacheBound(t *testing.T) {
	c, err := OpenCompileCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c.Max = 250
	exe := make([]byte, 100)
	old := time.Now().Add(-time.Hour)
	for i, k := range []byte{'a', 'b'} {
		if err := c.Store(key(k), exe); err != nil {
			t.Fatal(err)
		}
		at := old.Add(time.Duration(i) * time.Minute) // a before b
		os.Chtimes(filepath.Join(c.Dir, key(k)+".pjrt"), at, at)
	}
	c.Load(key('a')) // a is now the most recently used
	if err := c.Store(key('c'), exe); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[byte]bool{'a': true, 'b': false, 'c': true} {
		if _, ok := c.Load(key(k)); ok != want {
			t.Errorf("%c kept = %v; want %v", k, ok, want)
		}
	}
	c.Max = 50
	if err := c.Store(key('d'), exe); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Size(); n != 1 {
		t.Errorf("%d programs after storing one over the bound; want only it", n)
	}
	if _, ok := c.Load(key('d')); !ok {
		t.Error("the program just stored was removed")
	}
}

// TestCompileCacheCounts: Observe books hits, misses, bytes and failures as go-xla reports them,
// and Counts gives engine/compiles the hits and misses.
func TestCompileCacheCounts(t *testing.T) {
	c := &CompileCache{Dir: "x"}
	for _, ev := range []pjrt.CacheEvent{
		{Key: key('a'), Hit: true, Bytes: 10, Seconds: 0.5},
		{Key: key('b'), Bytes: 20, Seconds: 30},
		{Key: key('c'), Seconds: 30, Err: errors.New("storing the executable: disk full")},
		{Key: key('d'), Hit: true, Bytes: 5, Seconds: 0.25},
	} {
		c.Observe(ev)
	}
	s := c.Stats()
	want := CompileCacheStats{Dir: "x", Hits: 2, Misses: 2, Failures: 1, LoadedBytes: 15, StoredBytes: 20, LoadSeconds: 0.75, LastFailure: "storing the executable: disk full"}
	if s != want {
		t.Errorf("Stats = %+v; want %+v", s, want)
	}
	if got, want := s.String(), "compile cache x: 2 programs loaded (0.0 MiB in 0.8 s), 2 compiled and stored (0.0 MiB); 1 failures, the last: storing the executable: disk full"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	if h, m := c.Counts(); h != 2 || m != 2 {
		t.Errorf("Counts = %d, %d; want 2, 2", h, m)
	}
	if h, m := (*CompileCache)(nil).Counts(); h != 0 || m != 0 {
		t.Error("a nil cache counts something")
	}
}

// TestUseCompileCache: "off" turns the cache off; a folder named that cannot be made is an error
// naming it and the flag that changes it; the default folder that cannot be made only says so;
// and the Go backend's choice says it has no cache.
func TestUseCompileCache(t *testing.T) {
	defer useCompileCache(CompileCacheOff)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if c, note, err := useCompileCache(CompileCacheOff); c != nil || err != nil || !strings.Contains(note, "off") {
		t.Errorf("off: %v, %q, %v", c, note, err)
	}
	bad := filepath.Join(file, "xla") // under a regular file: never a folder
	if _, _, err := useCompileCache(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "--compile-cache") {
		t.Errorf("a folder that cannot be made: err %v; want one naming %s and --compile-cache", err, bad)
	}
	t.Setenv("XDG_CACHE_HOME", file) // the default folder is under it
	if c, note, err := useCompileCache(""); c != nil || err != nil || !strings.HasPrefix(note, "compile cache: off, ") {
		t.Errorf("default folder that cannot be made: %v, %q, %v; want no cache, a note, no error", c, note, err)
	}
	dir := t.TempDir()
	c, note, err := useCompileCache(dir)
	if err != nil || c == nil || c.Dir != dir || !strings.Contains(note, dir) {
		t.Errorf("a usable folder: %v, %q, %v", c, note, err)
	}
	g, err := openGo("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Cache != nil || !strings.Contains(g.CacheNote, "none") {
		t.Errorf("go backend: cache %v, note %q; want none", g.Cache, g.CacheNote)
	}
}
