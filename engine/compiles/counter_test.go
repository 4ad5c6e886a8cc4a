package compiles_test

import (
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
	prev := compiles.Snapshot{Programs: 3, Seconds: 1, Kinds: map[string]compiles.Tally{"decode": {2, 0.5}, "train": {1, 0.5}}}
	now := compiles.Snapshot{Programs: 5, Seconds: 2, Kinds: map[string]compiles.Tally{"decode": {2, 0.5}, "train": {2, 1}, "reference": {1, 0.5}}}
	d := now.Sub(prev)
	if d.Programs != 2 || d.Seconds != 1 || len(d.Kinds) != 2 || d.Kinds["train"].Programs != 1 || d.Kinds["reference"].Programs != 1 {
		t.Errorf("Sub = %+v; want 2 programs in 1 s: train 1, reference 1", d)
	}
	tests := []struct {
		s    compiles.Snapshot
		want string
	}{
		{now, "5 programs (decode 2, reference 1, train 2), 2.0 s"},
		{compiles.Snapshot{Programs: 1, Seconds: 0.04, Kinds: map[string]compiles.Tally{"sync": {1, 0.04}}}, "1 program (sync 1), 0.0 s"},
		{compiles.Snapshot{}, "0 programs, 0.0 s"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("String() = %q; want %q", got, tt.want)
		}
	}
}
