// Package compiles counts the programs the engine compiles and the time spent compiling them.
// A GoMLX Exec compiles one program per distinct signature of input shapes; on XLA each one takes
// seconds, so a run must compile a fixed set of programs early and none later. A Counter is owned
// by whoever wants the budget (the controller for a run, a benchmark for itself) and handed to the
// parts that build executables; a nil Counter counts nothing.
package compiles

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
)

// Tally is what one kind of program cost: how many distinct programs were built and the seconds
// spent building and compiling them — or, with a compilation cache (UseCache), loading them: of
// the programs, CacheHits were loaded from the cache and CacheMisses compiled and stored in it.
type Tally struct {
	Programs    int     `json:"programs"`
	Seconds     float64 `json:"seconds"`
	CacheHits   int     `json:"cache_hits,omitempty"`
	CacheMisses int     `json:"cache_misses,omitempty"`
}

func (t Tally) sub(p Tally) Tally {
	return Tally{Programs: t.Programs - p.Programs, Seconds: t.Seconds - p.Seconds,
		CacheHits: t.CacheHits - p.CacheHits, CacheMisses: t.CacheMisses - p.CacheMisses}
}

// Snapshot is a Counter's totals at one moment, by kind and in all.
type Snapshot struct {
	Programs    int              `json:"programs"`
	Seconds     float64          `json:"seconds"`
	CacheHits   int              `json:"cache_hits,omitempty"`
	CacheMisses int              `json:"cache_misses,omitempty"`
	Kinds       map[string]Tally `json:"kinds,omitempty"`
}

// Sub is what was compiled between prev and s (prev taken earlier from the same Counter).
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Programs: s.Programs - prev.Programs, Seconds: s.Seconds - prev.Seconds,
		CacheHits: s.CacheHits - prev.CacheHits, CacheMisses: s.CacheMisses - prev.CacheMisses}
	for k, t := range s.Kinds {
		p := prev.Kinds[k]
		if t.Programs == p.Programs {
			continue
		}
		if d.Kinds == nil {
			d.Kinds = map[string]Tally{}
		}
		d.Kinds[k] = t.sub(p)
	}
	return d
}

// String reads "14 programs (decode 4, prefill 8, train 2), 3.2 s": kinds by name.
func (s Snapshot) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d program", s.Programs)
	if s.Programs != 1 {
		b.WriteByte('s')
	}
	if len(s.Kinds) > 0 {
		parts := make([]string, 0, len(s.Kinds))
		for _, k := range slices.Sorted(maps.Keys(s.Kinds)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.Kinds[k].Programs))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, ", %.1f s", s.Seconds)
	if s.CacheHits+s.CacheMisses > 0 {
		fmt.Fprintf(&b, ", cache %d hit", s.CacheHits)
		if s.CacheHits != 1 {
			b.WriteByte('s')
		}
		fmt.Fprintf(&b, " %d miss", s.CacheMisses)
		if s.CacheMisses != 1 {
			b.WriteString("es")
		}
	}
	return b.String()
}

// CacheCounts is a compilation cache's running totals of programs loaded (hits) and compiled
// (misses): engine/device's CompileCache, behind go-xla's.
type CacheCounts interface {
	Counts() (hits, misses int64)
}

type cacheSource struct{ CacheCounts }

var cache atomic.Pointer[cacheSource]

// UseCache makes every Counter book the compilation cache's hits and misses by kind (nil: there is
// no cache). The cache is the process's (go-xla has one), so while it is set a Counter compiles one
// program at a time and books the change of its totals over that compilation: with two
// compilations at once, either's change would hold both. Cache hits load in well under a second,
// and XLA compiles each program on every core.
func UseCache(c CacheCounts) {
	if c == nil {
		cache.Store(nil)
		return
	}
	cache.Store(&cacheSource{c})
}

// Counter counts compiled programs by kind. It is safe for concurrent use; the zero value is not
// ready, use NewCounter. A nil *Counter is valid and counts nothing.
type Counter struct {
	compile sync.Mutex // held over a compilation while a cache is in use (UseCache)
	mu      sync.Mutex
	kinds   map[string]Tally
	seconds float64                         // every kind's, summed in the order compiled
	seen    map[*graph.Exec]map[string]bool // signatures compiled, per executable
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	return &Counter{kinds: map[string]Tally{}, seen: map[*graph.Exec]map[string]bool{}}
}

// Compile makes sure e has a program for inputs of these shapes, compiling it now if it has none,
// and counts a compilation it has not counted before under kind, with the time e.Compile took
// (graph building and compilation, no execution). On a nil Counter it compiles, uncounted.
func (c *Counter) Compile(e *graph.Exec, kind string, in ...shapes.Shape) error {
	if c == nil {
		_, err := e.Compile(in...)
		return err
	}
	sig := signature(in)
	c.mu.Lock()
	done := c.seen[e][sig]
	c.mu.Unlock()
	if done {
		return nil
	}
	// Compiled outside the lock: other executables run (and compile) meanwhile. Two callers
	// compiling the same signature at once wait on one compilation in GoMLX; one counts it.
	var hits0, misses0, hits1, misses1 int64
	src := cache.Load()
	if src != nil {
		c.compile.Lock()
		defer c.compile.Unlock()
		hits0, misses0 = src.Counts()
	}
	t0 := time.Now()
	if _, err := e.Compile(in...); err != nil {
		return err
	}
	d := time.Since(t0)
	if src != nil {
		hits1, misses1 = src.Counts()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[e] == nil {
		c.seen[e] = map[string]bool{}
	}
	if !c.seen[e][sig] {
		c.seen[e][sig] = true
		t := c.kinds[kind]
		t.Programs++
		t.Seconds += d.Seconds()
		t.CacheHits += int(hits1 - hits0)
		t.CacheMisses += int(misses1 - misses0)
		c.kinds[kind] = t
		c.seconds += d.Seconds()
	}
	return nil
}

// Forget drops what the Counter knows of e's programs (call it when e is finalized, so that a
// later executable at the same address starts afresh). The totals stay.
func (c *Counter) Forget(e *graph.Exec) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, e)
}

// Snapshot returns the totals so far (empty for a nil Counter).
func (c *Counter) Snapshot() Snapshot {
	var s Snapshot
	if c == nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.kinds) > 0 {
		s.Kinds = maps.Clone(c.kinds)
	}
	for _, t := range c.kinds {
		s.Programs += t.Programs
		s.CacheHits += t.CacheHits
		s.CacheMisses += t.CacheMisses
	}
	s.Seconds = c.seconds // a running sum: never less than an earlier snapshot's
	return s
}

// signature is a key for a list of input shapes.
func signature(in []shapes.Shape) string {
	var b strings.Builder
	for _, s := range in {
		b.WriteString(s.String())
		b.WriteByte(';')
	}
	return b.String()
}
