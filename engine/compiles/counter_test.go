package compiles_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/compiles"
	"agentrl/engine/device"
)

func backend(t *testing.T) compute.Backend {
	t.Helper()
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExecCountsEachSignatureOnce calls one executable with a sequence of argument shapes and
// checks the programs counted after each call: a new shape signature compiles once, a repeated one
// never again, however the argument is passed (tensor, Go value, donated tensor), and GoMLX builds
// exactly the programs counted (Call finds the one Compile made).
func TestExecCountsEachSignatureOnce(t *testing.T) {
	b := backend(t)
	c := compiles.NewCounter()
	builds := 0 // GoMLX builds the graph once per program it compiles
	x, err := compiles.NewExec(b, c, "add", func(a, y *Node) *Node { builds++; return Add(a, y) })
	if err != nil {
		t.Fatal(err)
	}
	defer x.Finalize()
	vec := func(n int) *tensors.Tensor { return tensors.FromFlatDataAndDimensions(make([]float32, n), n) }
	tests := []struct {
		name string
		args func() []any
		want int
	}{
		{"[2]+[2]", func() []any { return []any{vec(2), vec(2)} }, 1},
		{"[2]+[2] again", func() []any { return []any{vec(2), vec(2)} }, 1},
		{"[3]+[3]", func() []any { return []any{vec(3), vec(3)} }, 2},
		{"Go slices [3]", func() []any { return []any{[]float32{1, 2, 3}, []float32{4, 5, 6}} }, 2},
		{"donated [3]", func() []any { return []any{compiles.Donate(vec(3)), vec(3)} }, 2},
		{"scalars", func() []any { return []any{float32(1), float32(2)} }, 3},
		{"[2]+scalar broadcast", func() []any { return []any{vec(2), float32(2)} }, 4},
	}
	for _, tt := range tests {
		out, err := x.Call(tt.args()...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		out[0].FinalizeAll()
		s := c.Snapshot()
		if s.Programs != tt.want || s.Kinds["add"].Programs != tt.want || builds != tt.want {
			t.Errorf("after %s: got %d programs (kind add: %d), %d graphs built; want %d", tt.name, s.Programs, s.Kinds["add"].Programs, builds, tt.want)
		}
	}
	if s := c.Snapshot(); s.Seconds <= 0 {
		t.Errorf("compile seconds = %v; want > 0", s.Seconds)
	}
}

// TestNilCounter: without a Counter an Exec runs as graph.Exec does, and Counter.Compile still
// compiles.
func TestNilCounter(t *testing.T) {
	b := backend(t)
	x, err := compiles.NewExec(b, nil, "neg", func(a *Node) *Node { return Neg(a) })
	if err != nil {
		t.Fatal(err)
	}
	defer x.Finalize()
	out, err := x.Call(compiles.Donate(tensors.FromFlatDataAndDimensions([]float32{1, -2}, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if got := tensors.MustCopyFlatData[float32](out[0]); got[0] != -1 || got[1] != 2 {
		t.Errorf("got %v; want [-1 2]", got)
	}
	var c *compiles.Counter
	if err := c.Compile(x.Exec, "neg", tensors.FromScalar(float32(1)).Shape()); err != nil {
		t.Fatal(err)
	}
	if s := c.Snapshot(); s.Programs != 0 || s.Kinds != nil {
		t.Errorf("nil counter snapshot = %+v; want empty", s)
	}
}

func TestSnapshot(t *testing.T) {
	prev := compiles.Snapshot{Programs: 3, Seconds: 1, Kinds: map[string]compiles.Tally{"decode": {Programs: 2, Seconds: 0.5}, "train": {Programs: 1, Seconds: 0.5}}}
	now := compiles.Snapshot{Programs: 5, Seconds: 2, Kinds: map[string]compiles.Tally{"decode": {Programs: 2, Seconds: 0.5}, "train": {Programs: 2, Seconds: 1}, "reference": {Programs: 1, Seconds: 0.5}}}
	d := now.Sub(prev)
	if d.Programs != 2 || d.Seconds != 1 || len(d.Kinds) != 2 || d.Kinds["train"].Programs != 1 || d.Kinds["reference"].Programs != 1 {
		t.Errorf("Sub = %+v; want 2 programs in 1 s: train 1, reference 1", d)
	}
	tests := []struct {
		s    compiles.Snapshot
		want string
	}{
		{now, "5 programs (decode 2, reference 1, train 2), 2.0 s"},
		{compiles.Snapshot{Programs: 1, Seconds: 0.04, Kinds: map[string]compiles.Tally{"sync": {Programs: 1, Seconds: 0.04}}}, "1 program (sync 1), 0.0 s"},
		{compiles.Snapshot{}, "0 programs, 0.0 s"},
		{compiles.Snapshot{Programs: 3, Seconds: 0.4, CacheHits: 2, CacheMisses: 1}, "3 programs, 0.4 s, cache 2 hits 1 miss"},
		{compiles.Snapshot{Programs: 2, Seconds: 9, CacheHits: 1, CacheMisses: 1}, "2 programs, 9.0 s, cache 1 hit 1 miss"},
		{compiles.Snapshot{Programs: 2, Seconds: 9, CacheMisses: 2}, "2 programs, 9.0 s, cache 0 hits 2 misses"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("String() = %q; want %q", got, tt.want)
		}
	}
}

// fakeCache counts as go-xla's compilation cache would: the test bumps it while a program is
// being built, which is inside the Counter's Compile (GoMLX builds the graph, then compiles it).
type fakeCache struct{ hits, misses atomic.Int64 }

func (f *fakeCache) Counts() (int64, int64) { return f.hits.Load(), f.misses.Load() }

// TestCacheHitsByKind: with a compilation cache in use, each program's hit or miss is booked under
// the kind of the executable that compiled it, in the snapshot, its difference (Sub) and its
// String; programs compiled from several goroutines at once are still booked each once, under
// their own kind; without a cache nothing is booked.
func TestCacheHitsByKind(t *testing.T) {
	b := backend(t)
	f := &fakeCache{}
	compiles.UseCache(f)
	defer compiles.UseCache(nil)
	c := compiles.NewCounter()
	hitOn := map[int]bool{2: true, 3: true} // the vector lengths whose programs the "cache" has
	mk := func(kind string, op func(*Node) *Node) *compiles.Exec {
		x, err := compiles.NewExec(b, c, kind, func(a *Node) *Node {
			if hitOn[a.Shape().Dimensions[0]] {
				f.hits.Add(1)
			} else {
				f.misses.Add(1)
			}
			return op(a)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(x.Finalize)
		return x
	}
	decode, train := mk("decode", Neg), mk("train", Abs)
	call := func(x *compiles.Exec, n int) {
		out, err := x.Call(make([]float32, n))
		if err != nil {
			t.Error(err)
			return
		}
		out[0].FinalizeAll()
	}
	call(decode, 2) // hit
	call(decode, 2) // no program: nothing booked
	first := c.Snapshot()
	var wg sync.WaitGroup
	for _, n := range []int{3, 4, 5} { // decode: hit, miss, miss; train: the same, at once
		wg.Add(2)
		go func() { defer wg.Done(); call(decode, n) }()
		go func() { defer wg.Done(); call(train, n) }()
	}
	wg.Wait()
	s := c.Snapshot()
	want := map[string]compiles.Tally{"decode": {Programs: 4, CacheHits: 2, CacheMisses: 2}, "train": {Programs: 3, CacheHits: 1, CacheMisses: 2}}
	for k, w := range want {
		g := s.Kinds[k]
		if g.Programs != w.Programs || g.CacheHits != w.CacheHits || g.CacheMisses != w.CacheMisses {
			t.Errorf("%s: %d programs, %d hits, %d misses; want %d, %d, %d", k, g.Programs, g.CacheHits, g.CacheMisses, w.Programs, w.CacheHits, w.CacheMisses)
		}
	}
	if s.CacheHits != 3 || s.CacheMisses != 4 {
		t.Errorf("totals %d hits %d misses; want 3, 4", s.CacheHits, s.CacheMisses)
	}
	if d := s.Sub(first); d.CacheHits != 2 || d.CacheMisses != 4 || d.Kinds["decode"].CacheHits != 1 {
		t.Errorf("Sub = %+v; want 2 hits (decode 1), 4 misses", d)
	}
	compiles.UseCache(nil)
	call(train, 6)
	if g := c.Snapshot().Kinds["train"]; g.Programs != 4 || g.CacheMisses != 2 {
		t.Errorf("without a cache: train %+v; want a 4th program booked without a miss", g)
	}
}
