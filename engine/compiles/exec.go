package compiles

import (
	"fmt"
	"sync/atomic"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// Exec is a graph.Exec whose compilations a Counter sees: each call with a signature of input
// shapes it has not run before compiles that program first, timed and counted under the Exec's
// kind, then runs it as graph.Exec.Call would. Everything else is the embedded graph.Exec's.
type Exec struct {
	*graph.Exec
	backend compute.Backend
	to      atomic.Pointer[binding]
}

type binding struct {
	c    *Counter
	kind string
}

// NewExec is graph.NewExec whose compilations c counts under kind (c may be nil).
func NewExec[F graph.ExecGraphFn](backend compute.Backend, c *Counter, kind string, fn F) (*Exec, error) {
	e, err := graph.NewExec(backend, fn)
	if err != nil {
		return nil, err
	}
	return Wrap(e, backend, c, kind), nil
}

// Wrap counts e's compilations with c under kind; backend is e's (donated arguments move to it).
func Wrap(e *graph.Exec, backend compute.Backend, c *Counter, kind string) *Exec {
	x := &Exec{Exec: e, backend: backend}
	x.Count(c, kind)
	return x
}

// Count makes c count the Exec's compilations from now on, under kind (nil: none counted).
func (x *Exec) Count(c *Counter, kind string) {
	x.to.Store(&binding{c, kind})
}

// WithName names the executable (the graphs and errors carry the name) and returns x.
func (x *Exec) WithName(name string) *Exec {
	x.Exec.WithName(name)
	return x
}

// Donated marks a tensor whose device buffer a call may hand over to the computation (see
// graph.DonateTensorBuffer): pass Donate(t) among Call's arguments.
type Donated struct{ t *tensors.Tensor }

// Donate marks t's buffer as donated to the call it is passed to.
func Donate(t *tensors.Tensor) Donated { return Donated{t} }

// Call runs the program for the arguments' shapes, compiling (and counting) it first when it is
// new. Arguments are what graph.Exec.Call takes — tensors, Go values — and Donate(t) marks.
func (x *Exec) Call(args ...any) ([]*tensors.Tensor, error) {
	if b := x.to.Load(); b != nil && b.c != nil {
		in, err := Shapes(args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", x.Name(), err)
		}
		if err := b.c.Compile(x.Exec, b.kind, in...); err != nil {
			return nil, fmt.Errorf("%s: compiling: %w", x.Name(), err)
		}
	}
	in := args
	copied := false
	for i, a := range args {
		d, ok := a.(Donated)
		if !ok {
			continue
		}
		if !copied {
			in, copied = append([]any(nil), args...), true
		}
		buf, err := graph.DonateTensorBuffer(d.t, x.backend, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: donating argument %d: %w", x.Name(), i, err)
		}
		in[i] = buf
	}
	return x.Exec.Call(in...)
}

// Finalize releases the compiled programs; the Exec is not to be used afterwards.
func (x *Exec) Finalize() {
	if b := x.to.Load(); b != nil {
		b.c.Forget(x.Exec)
	}
	x.Exec.Finalize()
}

// Shapes are the input shapes graph.Exec.Call derives from args: a tensor's shape, a Go value's
// (a scalar or a multi-dimensional slice), a Donated tensor's; a lone []*tensors.Tensor stands
// for its elements.
func Shapes(args []any) ([]shapes.Shape, error) {
	if len(args) == 1 {
		if list, ok := args[0].([]*tensors.Tensor); ok {
			out := make([]shapes.Shape, len(list))
			for i, t := range list {
				out[i] = t.Shape()
			}
			return out, nil
		}
	}
	out := make([]shapes.Shape, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *tensors.Tensor:
			out[i] = v.Shape()
		case Donated:
			out[i] = v.t.Shape()
		default:
			s, err := shapes.FromAnyValue(a)
			if err != nil {
				return nil, fmt.Errorf("argument %d (%T): %w", i, a, err)
			}
			out[i] = s
		}
	}
	return out, nil
}
