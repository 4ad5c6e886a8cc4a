package external

import (
	"context"
	"fmt"
	"time"

	"agentrl/envs"
)

// Runner runs agents with one Config, at most a fixed number at once. It is safe for concurrent
// use: a trajectory's goroutine calls Run and waits for a worker.
type Runner struct {
	cfg   Config
	path  string
	slots chan struct{}
}

// NewRunner checks cfg (the program is found now, so that a wrong command fails before any
// trajectory) and bounds the agents running at once to workers (at least 1).
func NewRunner(cfg Config, workers int) (*Runner, error) {
	if workers < 1 {
		return nil, fmt.Errorf("external agents: %d workers; want at least 1", workers)
	}
	for k := range cfg.Env {
		switch k {
		case "OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTRL_TASK":
			return nil, fmt.Errorf("external agents: %s is set per trajectory by the workbench; remove it from the agent's environment", k)
		}
	}
	path, err := Resolve(cfg.Command, cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("external agents: %w", err)
	}
	return &Runner{cfg: cfg.withDefaults(), path: path, slots: make(chan struct{}, workers)}, nil
}

// Workers is the most agents that run at once.
func (r *Runner) Workers() int { return cap(r.slots) }

// Run waits for a worker, then runs the agent for task as the package's Run does. The wait ends
// with ctx (a DropCancelled result and ctx's error, the agent never started); Result.Queued is
// its length.
func (r *Runner) Run(ctx context.Context, task envs.Task, baseURL, apiKey string) (Result, error) {
	t0 := time.Now()
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return Result{ExitCode: -1, Queued: time.Since(t0), Drop: DropCancelled, Dropped: "cancelled before the agent started"}, ctx.Err()
	}
	defer func() { <-r.slots }()
	queued := time.Since(t0)
	res, err := run(ctx, r.cfg, r.path, task, baseURL, apiKey)
	res.Queued = queued
	return res, err
}
