package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sync"
	"time"

	"go.starlark.net/lib/math"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Starlark runs code in an embedded Starlark interpreter (a Python dialect; integers are
// arbitrary precision): no install, no process. Each call has a step limit (Limits.MaxSteps), a
// wall-clock limit (Limits.Timeout) and an allocation budget (Limits.MaxMemoryMB, see
// starlark_guard.go). A session is a notebook: globals, including lists and dicts, stay
// mutable from one call to the next. Extra builtins: pow(base, exp[, mod]) on integers and the
// math module.
type Starlark struct {
	Limits Limits
}

// Name is "starlark".
func (s *Starlark) Name() string { return "starlark" }

// NewSession returns a session; Starlark sessions keep the globals of earlier calls.
func (s *Starlark) NewSession() (Session, error) {
	g := guardBuiltins()
	g["math"] = math.Module
	return &starlarkSession{lim: s.Limits.withDefaults(), globals: g}, nil
}

type starlarkSession struct {
	mu      sync.Mutex
	lim     Limits
	globals starlark.StringDict
}

var starlarkOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

// guardFrame matches what the guards add to an error: "Error in $+: …" reads as "Error: …".
var guardFrame = regexp.MustCompile(`Error in \$[^:]*: `)

func (s *starlarkSession) Run(ctx context.Context, code string) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	if len(code) > maxCodeBytes {
		return Result{Status: StatusError, Output: fmt.Sprintf("the code is %d bytes long; at most %d bytes are run", len(code), maxCodeBytes)}
	}
	f, err := starlarkOptions.Parse("code.py", code, 0)
	if err != nil {
		return Result{Status: StatusError, Output: lastLines(err.Error(), 4), Duration: time.Since(start)}
	}
	rewriteFile(f)

	out := &truncating{limit: s.lim.MaxOutputBytes}
	th := &starlark.Thread{Name: "tool", Print: func(_ *starlark.Thread, msg string) {
		out.Write([]byte(msg + "\n"))
	}}
	th.SetMaxExecutionSteps(s.lim.MaxSteps)
	bud := &allocBudget{limit: int64(s.lim.MaxMemoryMB) << 20}
	th.SetLocal(budgetKey, bud)
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
	err = starlark.ExecREPLChunk(f, th, s.globals)
	close(done)
	res := Result{Duration: time.Since(start), Output: out.String()}
	switch {
	case err == nil:
		res.Status = StatusOK
	case ctx.Err() != nil:
		res.Status, res.Detail = StatusTimeout, fmt.Sprintf("stopped after %s", s.lim.Timeout)
	case th.ExecutionSteps() >= s.lim.MaxSteps:
		res.Status, res.Detail = StatusKilled, fmt.Sprintf("exceeded %d execution steps", s.lim.MaxSteps)
	case bud.over != "":
		res.Status, res.Detail = StatusKilled, bud.over
	default:
		res.Status = StatusError
		msg := err.Error()
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			msg = ee.Backtrace()
		}
		res.Output += lastLines(guardFrame.ReplaceAllString(msg, "Error: "), 4)
	}
	return res
}

func (s *starlarkSession) Close() error { return nil }

// builtinPow is pow(base, exp[, mod]) on integers (exact, arbitrary precision), with the
// result and the work bounded so that one call cannot run for long.
func builtinPow(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var base, exp starlark.Int
	var mod starlark.Value = starlark.None
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &base, &exp, &mod); err != nil {
		return nil, err
	}
	bb, e := base.BigInt(), exp.BigInt()
	if e.Sign() < 0 {
		return nil, fmt.Errorf("negative exponent %s", e)
	}
	var m *big.Int
	if mod != starlark.None {
		mi, ok := mod.(starlark.Int)
		if !ok {
			return nil, fmt.Errorf("mod must be an int, got %s", mod.Type())
		}
		m = mi.BigInt()
		if m.Sign() == 0 {
			return nil, errors.New("mod is zero")
		}
		// Square-and-multiply: about exp-bits multiplications of mod-sized numbers.
		if mb := m.BitLen(); mb > 64 && e.BitLen()*mb > 1<<24 {
			return nil, fmt.Errorf("a %d-bit exponent with a %d-bit modulus is too much work", e.BitLen(), mb)
		}
		if e.BitLen() > maxIntBits {
			return nil, fmt.Errorf("the exponent has %d bits; at most %d", e.BitLen(), maxIntBits)
		}
	} else if bl := bb.BitLen(); bl > 1 {
		if e.BitLen() > 32 || int64(bl-1)*e.Int64() > maxIntBits {
			return nil, fmt.Errorf("the result would have more than %d bits (about 1.26 million digits); use pow(base, exp, mod) for modular powers", maxIntBits)
		}
	}
	r := new(big.Int).Exp(bb, e, m)
	if m != nil && m.Sign() < 0 && r.Sign() != 0 { // Python: the result takes the modulus's sign
		r.Add(r, m)
	}
	return starlark.MakeBigInt(r), nil
}
