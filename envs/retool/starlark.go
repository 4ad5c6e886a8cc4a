package retool

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"go.starlark.net/lib/math"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Starlark runs code in an embedded Starlark interpreter (a Python dialect; integers are
// arbitrary precision): no install, no process, a step limit and a wall-clock limit. Extra
// builtins: pow(base, exp[, mod]) on integers and the math module.
type Starlark struct {
	Limits Limits
}

// Name is "starlark".
func (s *Starlark) Name() string { return "starlark" }

// NewSession returns a session; Starlark sessions keep the globals of earlier calls.
func (s *Starlark) NewSession() (Session, error) {
	return &starlarkSession{lim: s.Limits.withDefaults(), globals: starlark.StringDict{}}, nil
}

type starlarkSession struct {
	lim     Limits
	globals starlark.StringDict
}

var starlarkOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

func (s *starlarkSession) Run(ctx context.Context, code string) Result {
	start := time.Now()
	out := &truncating{limit: s.lim.MaxOutputBytes}
	th := &starlark.Thread{Name: "tool", Print: func(_ *starlark.Thread, msg string) {
		out.Write([]byte(msg + "\n"))
	}}
	th.SetMaxExecutionSteps(s.lim.MaxSteps)
	ctx, cancel := context.WithTimeout(ctx, s.lim.Timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			th.Cancel(ctx.Err().Error())
		case <-done:
		}
	}()
	predeclared := starlark.StringDict{"pow": starlark.NewBuiltin("pow", builtinPow), "math": math.Module}
	for k, v := range s.globals {
		predeclared[k] = v
	}
	globals, err := starlark.ExecFileOptions(starlarkOptions, th, "code.py", code, predeclared)
	close(done)
	res := Result{Duration: time.Since(start)}
	for k, v := range globals {
		s.globals[k] = v
	}
	switch {
	case err == nil:
		res.Status = StatusOK
		res.Output = out.String()
	case ctx.Err() != nil:
		res.Status, res.Detail = StatusTimeout, fmt.Sprintf("stopped after %s", s.lim.Timeout)
		res.Output = out.String()
	case th.ExecutionSteps() >= s.lim.MaxSteps:
		res.Status, res.Detail = StatusKilled, fmt.Sprintf("exceeded %d execution steps", s.lim.MaxSteps)
		res.Output = out.String()
	default:
		res.Status = StatusError
		msg := err.Error()
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			msg = ee.Backtrace()
		}
		res.Output = out.String() + lastLines(msg, 4)
	}
	return res
}

func (s *starlarkSession) Close() error { return nil }

// builtinPow is pow(base, exp[, mod]) on integers (exact, arbitrary precision).
func builtinPow(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var base, exp starlark.Int
	var mod starlark.Value = starlark.None
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &base, &exp, &mod); err != nil {
		return nil, err
	}
	e := exp.BigInt()
	if e.Sign() < 0 {
		return nil, fmt.Errorf("pow: negative exponent %s", e)
	}
	var m *big.Int
	if mod != starlark.None {
		mi, ok := mod.(starlark.Int)
		if !ok {
			return nil, fmt.Errorf("pow: mod must be an int, got %s", mod.Type())
		}
		m = mi.BigInt()
		if m.Sign() == 0 {
			return nil, errors.New("pow: mod is zero")
		}
	} else if e.BitLen() > 20 {
		return nil, fmt.Errorf("pow: exponent %s too large without a modulus", e)
	}
	r := new(big.Int).Exp(base.BigInt(), e, m)
	return starlark.MakeBigInt(r), nil
}
