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
	"time"

	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
)

// Tally is what one kind of program cost: how many distinct programs were compiled and the
// seconds spent building and compiling them.
type Tally struct {
	Programs int     `json:"programs"`
	Seconds  float64 `json:"seconds"`
}

// Snapshot is a Counter's totals at one moment, by kind and in all.
type Snapshot struct {
	Programs int              `json:"programs"`
	Seconds  float64          `json:"seconds"`
	Kinds    map[string]Tally `json:"kinds,omitempty"`
}

// Sub is what was compiled between prev and s (prev taken earlier from the same Counter).
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{Programs: s.Programs - prev.Programs, Seconds: s.Seconds - prev.Seconds}
	for k, t := range s.Kinds {
		p := prev.Kinds[k]
		if t.Programs == p.Programs {
			continue
		}
		if d.Kinds == nil {
			d.Kinds = map[string]Tally{}
		}
		d.Kinds[k] = Tally{Programs: t.Programs - p.Programs, Seconds: t.Seconds - p.Seconds}
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
	return b.String()
}

// Counter counts compiled programs by kind. It is safe for concurrent use; the zero value is not
// ready, use NewCounter. A nil *Counter is valid and counts nothing.
type Counter struct {
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
	t0 := time.Now()
	if _, err := e.Compile(in...); err != nil {
		return err
	}
	d := time.Since(t0)
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
