package device

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/go-xla/pjrt"

	"agentrl/engine/compiles"
)

// CompileCacheOff turns the compilation cache off where a folder would be named.
const CompileCacheOff = "off"

// DefaultCompileCacheMax bounds the folder: past it, the executables used longest ago go.
const DefaultCompileCacheMax int64 = 16 << 30

// CompileCache keeps the XLA backend's compiled programs on disk between processes, one file per
// program (KEY.pjrt, KEY the pjrt.CompileConfig.CacheKey of the program), so that the second start
// of the same recipe on the same machine loads its programs instead of compiling them. It is the
// store behind go-xla's pjrt.CompilationCache (third_party/go-xla's patch 1) and counts what that
// did: hits (loaded), misses (compiled and stored) and failures. The Go backend compiles in
// milliseconds and has nothing worth keeping; only the XLA backend uses it.
type CompileCache struct {
	Dir string
	// Max bounds the folder's bytes (DefaultCompileCacheMax when 0): after a store that passes
	// it, the files loaded or stored longest ago are removed.
	Max int64

	hits, misses, failures atomic.Int64
	loaded, stored         atomic.Int64 // bytes
	loadSeconds            atomic.Int64 // nanoseconds spent loading hits
	mu                     sync.Mutex   // the folder's size bound
	lastErr                atomic.Pointer[string]
}

// CompileCacheStats is what a CompileCache did so far.
type CompileCacheStats struct {
	Dir         string  `json:"dir"`
	Hits        int64   `json:"hits"`
	Misses      int64   `json:"misses"`
	Failures    int64   `json:"failures,omitempty"`
	LoadedBytes int64   `json:"loaded_bytes,omitempty"`
	StoredBytes int64   `json:"stored_bytes,omitempty"`
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	LastFailure string  `json:"last_failure,omitempty"`
}

// String reads "compile cache DIR: 12 programs loaded (… MiB in … s), 3 compiled and stored (… MiB)",
// then the failures and the last one's words, if any.
func (s CompileCacheStats) String() string {
	t := fmt.Sprintf("compile cache %s: %d programs loaded (%.1f MiB in %.1f s), %d compiled and stored (%.1f MiB)", s.Dir, s.Hits,
		float64(s.LoadedBytes)/(1<<20), s.LoadSeconds, s.Misses, float64(s.StoredBytes)/(1<<20))
	if s.Failures > 0 {
		t += fmt.Sprintf("; %d failures, the last: %s", s.Failures, s.LastFailure)
	}
	return t
}

// DefaultCompileCacheDir is xla/ under the user's cache directory ($XDG_CACHE_HOME/agentrl-tui/xla or
// ~/.cache/agentrl-tui/xla on Linux), beside kernels.json.
func DefaultCompileCacheDir() string {
	return filepath.Join(filepath.Dir(DefaultKernelCache()), "xla")
}

// OpenCompileCache makes dir (created if missing) the cache's folder; it fails when the folder
// cannot be created or written, naming it.
func OpenCompileCache(dir string) (*CompileCache, error) {
	if dir == "" {
		dir = DefaultCompileCacheDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("compile cache %s: %w (give another folder in backend.compile_cache or --compile-cache DIR, or off for none)", dir, err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("compile cache %s is not writable: %w (give another folder in backend.compile_cache or --compile-cache DIR, or off for none)", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return &CompileCache{Dir: dir}, nil
}

// useCompileCache opens the compilation cache that dir names (Request.CompileCache) and hands it to
// go-xla (every later XLA compilation goes through it) and to engine/compiles (which books its hits
// and misses by kind). It says which folder, or why there is none. A folder named that cannot be
// used is an error; the default folder that cannot be is only noted, and nothing is cached.
func useCompileCache(dir string) (*CompileCache, string, error) {
	if dir == CompileCacheOff {
		pjrt.SetCompilationCache(nil)
		compiles.UseCache(nil)
		return nil, "compile cache: off (backend.compile_cache: off); every program is compiled", nil
	}
	c, err := OpenCompileCache(dir)
	if err != nil {
		pjrt.SetCompilationCache(nil)
		compiles.UseCache(nil)
		if dir != "" {
			return nil, "", err
		}
		return nil, "compile cache: off, " + err.Error(), nil
	}
	pjrt.SetCompilationCache(c)
	compiles.UseCache(c)
	n, bytes := c.Size()
	return c, fmt.Sprintf("compile cache: %s (%d programs stored, %.1f MiB)", c.Dir, n, float64(bytes)/(1<<20)), nil
}

// Size is the number of programs stored and their bytes.
func (c *CompileCache) Size() (programs int, bytes int64) {
	files, total := c.programFiles()
	return len(files), total
}

// storedFile is one program in the folder: its file name, size and when it was last used.
type storedFile struct {
	name string
	size int64
	used time.Time
}

// programFiles lists the folder's programs and their bytes in all (none when it cannot be read).
func (c *CompileCache) programFiles() (files []storedFile, total int64) {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return nil, 0
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pjrt") {
			continue
		}
		if info, err := e.Info(); err == nil {
			files = append(files, storedFile{e.Name(), info.Size(), info.ModTime()})
			total += info.Size()
		}
	}
	return files, total
}

var cacheKeyRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (c *CompileCache) path(key string) (string, bool) {
	if !cacheKeyRE.MatchString(key) {
		return "", false
	}
	return filepath.Join(c.Dir, key+".pjrt"), true
}

// Load returns the executable stored under key and marks it used now.
func (c *CompileCache) Load(key string) ([]byte, bool) {
	p, ok := c.path(key)
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(p)
	if err != nil || len(data) == 0 {
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now) // used now: the size bound removes the least recently used
	return data, true
}

// Store writes data under key (replaceFile: a reader never sees part of one), then keeps the
// folder within Max.
func (c *CompileCache) Store(key string, data []byte) error {
	p, ok := c.path(key)
	if !ok {
		return fmt.Errorf("compile cache: key %q is not a SHA-256 in hex", key)
	}
	if err := replaceFile(p, data); err != nil {
		return err
	}
	c.trim(key)
	return nil
}

// trim removes the files used longest ago (never keep's) until the folder is within Max.
func (c *CompileCache) trim(keep string) {
	max := c.Max
	if max <= 0 {
		max = DefaultCompileCacheMax
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	files, total := c.programFiles()
	if total <= max {
		return
	}
	sort.Slice(files, func(i, j int) bool { return files[i].used.Before(files[j].used) })
	for _, f := range files {
		if total <= max {
			break
		}
		if f.name == keep+".pjrt" {
			continue
		}
		if err := os.Remove(filepath.Join(c.Dir, f.name)); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= f.size
		}
	}
}

// Observe counts what go-xla's cache did for one program.
func (c *CompileCache) Observe(ev pjrt.CacheEvent) {
	switch {
	case ev.Hit:
		c.hits.Add(1)
		c.loaded.Add(int64(ev.Bytes))
		c.loadSeconds.Add(int64(ev.Seconds * 1e9))
	default:
		c.misses.Add(1)
		c.stored.Add(int64(ev.Bytes))
	}
	if ev.Err != nil {
		c.failures.Add(1)
		s := ev.Err.Error()
		c.lastErr.Store(&s)
	}
}

// Counts are the hits and misses so far (engine/compiles books them by kind).
func (c *CompileCache) Counts() (hits, misses int64) {
	if c == nil {
		return 0, 0
	}
	return c.hits.Load(), c.misses.Load()
}

// Stats are the cache's totals so far.
func (c *CompileCache) Stats() CompileCacheStats {
	if c == nil {
		return CompileCacheStats{}
	}
	s := CompileCacheStats{Dir: c.Dir, Hits: c.hits.Load(), Misses: c.misses.Load(), Failures: c.failures.Load(),
		LoadedBytes: c.loaded.Load(), StoredBytes: c.stored.Load(), LoadSeconds: float64(c.loadSeconds.Load()) / 1e9}
	if p := c.lastErr.Load(); p != nil {
		s.LastFailure = *p
	}
	return s
}

var _ pjrt.CompilationCache = (*CompileCache)(nil)
