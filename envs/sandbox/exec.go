// Package sandbox runs model-written code: the executors (Starlark, embedded and guarded; python3
// in subprocesses under resource limits and, by default, strict Linux-namespace isolation), their
// sessions, the Pool that bounds how many executions run at once, and the isolation checks that
// doctor and a run's start make. The ReTool environment (envs/retool) runs its tool calls
// through it, and so do the CLI (sft probe), engine/doctor, the engine (rollouts, SFT
// demonstrations, the hint-kind probe) and the agent example's tests.
//
// The package has an init function (sandbox_linux.go): a binary that links it becomes the
// sandbox's init when started again with the AGENTRL_SANDBOX_INIT variable.
package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Status says how a code execution ended.
type Status string

// Statuses.
const (
	StatusOK      Status = "ok"
	StatusError   Status = "error"   // the code raised (or failed to parse)
	StatusTimeout Status = "timeout" // wall-clock limit
	StatusKilled  Status = "killed"  // a resource limit (memory, CPU, processes, file size) ended it
)

// Limits bound one execution.
type Limits struct {
	Timeout        time.Duration // wall clock (default 5s)
	MaxOutputBytes int           // captured output kept (default 4096); the rest is cut with a marker
	MaxSteps       uint64        // Starlark execution steps (default 10,000,000)
	MaxMemoryMB    int           // python address space; Starlark allocation budget per call (default 512)
	MaxProcs       int           // python processes per sandbox user (default 16)
	MaxFileMB      int           // python largest file written (default 16)
}

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = 5 * time.Second
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = 4096
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = 10_000_000
	}
	if l.MaxMemoryMB <= 0 {
		l.MaxMemoryMB = 512
	}
	if l.MaxProcs <= 0 {
		l.MaxProcs = 16
	}
	if l.MaxFileMB <= 0 {
		l.MaxFileMB = 16
	}
	return l
}

// Result is one execution's outcome.
type Result struct {
	Output   string        // stdout (and for errors the last traceback lines), truncated
	Status   Status        // ok | error | timeout | killed
	Duration time.Duration // wall time
	Detail   string        // why it was killed or timed out, for people
	Queued   time.Duration // time spent waiting for a free worker of the Pool (tool_queue_s)
}

// Session runs a trajectory's code blocks one after another. A persistent session keeps
// variables between calls; a fresh one starts clean each time.
type Session interface {
	Run(ctx context.Context, code string) Result
	Close() error
}

// Executor starts sessions.
type Executor interface {
	Name() string
	NewSession() (Session, error)
}

// truncating collects output up to a limit and counts what it dropped.
type truncating struct {
	b       strings.Builder
	limit   int
	dropped int
}

func (t *truncating) Write(p []byte) (int, error) {
	room := t.limit - t.b.Len()
	if room <= 0 {
		t.dropped += len(p)
		return len(p), nil
	}
	if len(p) > room {
		t.b.Write(p[:room])
		t.dropped += len(p) - room
		return len(p), nil
	}
	t.b.Write(p)
	return len(p), nil
}

func (t *truncating) String() string {
	if t.dropped > 0 {
		return t.b.String() + fmt.Sprintf("\n[… output truncated: %d more bytes]", t.dropped)
	}
	return t.b.String()
}

// lastLines keeps the last n lines of s (the useful end of a traceback).
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Pool bounds how many executions run at once across all trajectories of a run. It is safe for
// concurrent use; Close makes later and waiting calls give up.
type Pool struct {
	sem    chan struct{}
	closed chan struct{}
	once   sync.Once
	waited atomic.Int64 // nanoseconds all calls spent waiting for a worker
}

// NewPool allows n concurrent executions (n ≤ 0: 2); a run sizes it with
// Config.WorkerCount (recipe env.sandbox.workers).
func NewPool(n int) *Pool {
	if n <= 0 {
		n = 2
	}
	return &Pool{sem: make(chan struct{}, n), closed: make(chan struct{})}
}

// Size is the number of executions that can run at once.
func (p *Pool) Size() int { return cap(p.sem) }

// QueueWait is the total time calls have spent waiting for a worker since the pool was made;
// the difference between two readings is a step's tool_queue_s. Each Result also carries its
// own wait in Queued.
func (p *Pool) QueueWait() time.Duration { return time.Duration(p.waited.Load()) }

// Run executes code in s once a place is free; a cancelled context or a closed pool gives up the
// wait with a killed result that says why.
func (p *Pool) Run(ctx context.Context, s Session, code string) Result {
	select {
	case <-p.closed:
		return Result{Status: StatusKilled, Detail: "the sandbox pool is closed"}
	default:
	}
	if err := ctx.Err(); err != nil {
		return Result{Status: StatusKilled, Detail: "cancelled while waiting for a sandbox: " + err.Error()}
	}
	start := time.Now()
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		p.waited.Add(int64(time.Since(start)))
		return Result{Status: StatusKilled, Detail: "cancelled while waiting for a sandbox: " + ctx.Err().Error(), Queued: time.Since(start)}
	case <-p.closed:
		return Result{Status: StatusKilled, Detail: "the sandbox pool is closed"}
	}
	queued := time.Since(start)
	p.waited.Add(int64(queued))
	defer func() { <-p.sem }()
	r := s.Run(ctx, code)
	r.Queued = queued
	return r
}

// Close stops the pool from starting executions; running ones finish. It is idempotent.
func (p *Pool) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

// NewExecutor returns the executor called name ("starlark" or "python") with the default
// sandbox (strict isolation, the system python3).
func NewExecutor(name string, lim Limits, session string) (Executor, error) {
	return NewExecutorWith(name, lim, session, Config{})
}

// NewExecutorWith returns the executor called name; the python executor runs under sb (the
// recipe's env.sandbox) and fails when the machine cannot give the isolation sb asks for.
func NewExecutorWith(name string, lim Limits, session string, sb Config) (Executor, error) {
	switch name {
	case "starlark":
		return &Starlark{Limits: lim.withDefaults()}, nil
	case "python":
		return NewPythonWith(lim, session == "persistent", sb)
	}
	return nil, fmt.Errorf("executor %q is not one of starlark, python", name)
}
