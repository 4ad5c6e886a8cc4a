package ops_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/vectorstate"
	"github.com/gomlx/compute/support/testutil"
)

// TestExecuteLeavesVectorStateClean (agentrl patch 13): a graph whose ops run the backend's SIMD
// code (the float32 vector binary ops, vector exp and logistic, the small and the large matmul
// kernels) leaves the thread's upper vector state clean, as the CPU itself reports it (XINUSE):
// the executor clears it after each node. Executed inline (parallelism 0, sequential ops) on a
// locked thread, so that every kernel ran on the thread the test reads. Without the clearing
// the state is dirty here (checked when the patch was written), which on Intel CPUs makes all
// the scalar SSE code after it slower.
func TestExecuteLeavesVectorStateClean(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !vectorstate.MakeDirty() {
		t.Skip("this CPU has no AVX or cannot report XINUSE (XGETBV with ECX=1)")
	}
	if dirty, _ := vectorstate.UpperDirty(); !dirty {
		t.Skip("this CPU does not report dirty upper state after a 256-bit load")
	}
	vectorstate.Clear()
	b, err := gobackend.New("parallelism=0,ops_sequential")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()

	const m, k, n = 64, 256, 96 // large enough for the packed ("large") matmul kernels
	x := make([]float32, m*k)
	w := make([]float32, k*n)
	for i := range x {
		x[i] = float32(i%13) / 13
	}
	for i := range w {
		w[i] = float32(i%7)/7 - 0.5
	}
	dims := func(f compute.Function, v compute.Value, d ...int) compute.Value {
		r, err := f.Reshape(v, d...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		build func(f compute.Function, p []compute.Value) (compute.Value, error)
	}{
		{"add-mul", func(f compute.Function, p []compute.Value) (compute.Value, error) {
			s, err := f.Add(p[0], p[0])
			if err != nil {
				return nil, err
			}
			return f.Mul(s, p[0])
		}},
		{"exp", func(f compute.Function, p []compute.Value) (compute.Value, error) { return f.Exp(p[0]) }},
		{"logistic", func(f compute.Function, p []compute.Value) (compute.Value, error) { return f.Logistic(p[0]) }},
		{"matmul-large", func(f compute.Function, p []compute.Value) (compute.Value, error) {
			return f.DotGeneral(dims(f, p[0], m, k), []int{1}, nil, dims(f, p[1], k, n), []int{0}, nil, compute.DotGeneralConfig{})
		}},
		{"matmul-small-transposed", func(f compute.Function, p []compute.Value) (compute.Value, error) {
			return f.DotGeneral(dims(f, p[0], m, k), []int{1}, nil, dims(f, p[1], n, k), []int{1}, nil, compute.DotGeneralConfig{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Built by hand rather than by testutil.Exec1: its copy of the outputs into Go
			// slices runs the runtime's memmove, whose own VZEROUPPER would hide a dirty state.
			builder := b.Builder(tc.name)
			fn := builder.Main()
			var params []compute.Value
			var buffers []compute.Buffer
			for i, v := range [][]float32{x, w} {
				buf, err := testutil.ToBuffer(b, v)
				if err != nil {
					t.Fatal(err)
				}
				shape, _ := buf.Shape()
				p, err := fn.Parameter(fmt.Sprintf("x%d", i), shape, nil)
				if err != nil {
					t.Fatal(err)
				}
				params, buffers = append(params, p), append(buffers, buf)
			}
			out, err := tc.build(fn, params)
			if err == nil {
				err = fn.Return([]compute.Value{out}, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			exec, err := builder.Compile()
			if err != nil {
				t.Fatal(err)
			}
			vectorstate.Clear()
			if _, err := exec.Execute(buffers, nil, 0); err != nil {
				t.Fatal(err)
			}
			if dirty, _ := vectorstate.UpperDirty(); dirty {
				t.Errorf("upper vector state dirty after executing %s", tc.name)
			}
		})
	}
}
