package sandbox

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.starlark.net/starlark"
)

func run(t *testing.T, ex Executor, code string) Result {
	t.Helper()
	s, err := ex.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.Run(context.Background(), code)
}

func TestPoolClose(t *testing.T) {
	pool := NewPool(1)
	s, _ := (&Starlark{}).NewSession()
	block := make(chan struct{})
	started := make(chan struct{})
	slow := sessionFunc(func(ctx context.Context, code string) Result {
		close(started)
		<-block
		return Result{Status: StatusOK}
	})
	done := make(chan Result)
	go func() { done <- pool.Run(context.Background(), slow, "") }()
	<-started
	waiting := make(chan Result)
	go func() { waiting <- pool.Run(context.Background(), s, "print(1)") }()
	pool.Close()
	if r := <-waiting; r.Status != StatusKilled || !strings.Contains(r.Detail, "closed") {
		t.Errorf("a call waiting on a closed pool: %+v", r)
	}
	close(block)
	if r := <-done; r.Status != StatusOK {
		t.Errorf("the running call: %+v", r)
	}
	if r := pool.Run(context.Background(), s, "print(1)"); r.Status != StatusKilled {
		t.Errorf("a call after Close ran: %+v", r)
	}
	pool.Close() // idempotent
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := NewPool(1).Run(ctx, s, "print(1)"); r.Status != StatusKilled || !strings.Contains(r.Detail, "cancelled") {
		t.Errorf("cancelled context: %+v", r)
	}
}

// TestPoolBoundsConcurrency runs 64 executions through a pool of 2 and checks that at most 2 ran
// at once (counted, not timed).
func TestPoolBoundsConcurrency(t *testing.T) {
	pool := NewPool(2)
	var mu sync.Mutex
	cur, peak := 0, 0
	counting := sessionFunc(func(ctx context.Context, code string) Result {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		s, _ := (&Starlark{}).NewSession()
		r := s.Run(ctx, code)
		mu.Lock()
		cur--
		mu.Unlock()
		return r
	})
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := pool.Run(context.Background(), counting, "s = 0\nfor i in range(20000):\n    s += i\nprint(s)"); r.Status != StatusOK {
				t.Errorf("%+v", r)
			}
		}()
	}
	wg.Wait()
	if peak > 2 {
		t.Errorf("%d executions ran at once through a pool of 2", peak)
	}
}

type sessionFunc func(ctx context.Context, code string) Result

func (f sessionFunc) Run(ctx context.Context, code string) Result { return f(ctx, code) }
func (f sessionFunc) Close() error                                { return nil }

// BenchmarkExecutors runs 64 concurrent trajectories' executions through a pool of 2 (the CPU
// count) for each executor and reports executions per second. starlark-unguarded runs the same
// code through plain go.starlark.net (no rewrite, no budget) as the reference for the guard's
// cost; python-persistent makes 4 calls per session (one interpreter start per 4 calls).
func BenchmarkExecutors(b *testing.B) {
	code := "s = 0\nfor i in range(1000):\n    s += i * i\nprint(s % 97)"
	for _, tc := range []struct {
		name, executor, session string
		calls                   int
	}{
		{"starlark", "starlark", "fresh", 1},
		{"starlark-unguarded", "", "", 1},
		{"python-fresh", "python", "fresh", 1},
		{"python-persistent", "python", "persistent", 4},
	} {
		b.Run(tc.name, func(b *testing.B) {
			newSession := func() (Session, error) { return unguardedSession{}, nil }
			if tc.executor != "" {
				ex, err := NewExecutor(tc.executor, Limits{Timeout: 10 * time.Second}, tc.session)
				if err != nil {
					b.Skip(err)
				}
				newSession = ex.NewSession
			}
			pool := NewPool(2)
			defer pool.Close()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for j := 0; j < 64; j++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s, err := newSession()
						if err != nil {
							b.Error(err)
							return
						}
						defer s.Close()
						for k := 0; k < tc.calls; k++ {
							if r := pool.Run(context.Background(), s, code); r.Status != StatusOK || r.Output != "19\n" {
								b.Errorf("%+v", r)
							}
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(64*tc.calls*b.N)/time.Since(start).Seconds(), "executions/s")
		})
	}
}

// unguardedSession runs code with plain go.starlark.net: the benchmark's reference.
type unguardedSession struct{}

func (unguardedSession) Run(ctx context.Context, code string) Result {
	var out strings.Builder
	th := &starlark.Thread{Print: func(_ *starlark.Thread, msg string) { out.WriteString(msg + "\n") }}
	th.SetMaxExecutionSteps(10_000_000)
	if _, err := starlark.ExecFileOptions(starlarkOptions, th, "code.py", code, nil); err != nil {
		return Result{Status: StatusError, Output: err.Error()}
	}
	return Result{Status: StatusOK, Output: out.String()}
}

func (unguardedSession) Close() error { return nil }
