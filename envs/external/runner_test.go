//go:build unix

package external

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// runMany runs n agents through r at once and returns their results.
func runMany(t *testing.T, r *Runner, n int) []Result {
	t.Helper()
	results := make([]Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(context.Background(), testTask, "", "")
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	return results
}

// TestRunnerBoundsWorkers: with 2 workers, no agent ever sees more than 2 agents running.
func TestRunnerBoundsWorkers(t *testing.T) {
	r, err := NewRunner(Config{Command: []string{"./meet.sh", "count"}, Dir: "testdata",
		Env: map[string]string{"DIR": t.TempDir()}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Workers() != 2 {
		t.Errorf("Workers() = %d; want 2", r.Workers())
	}
	for i, res := range runMany(t, r, 6) {
		if !res.Usable() || res.Reward == nil {
			t.Fatalf("agent %d: %+v", i, res)
		}
		if *res.Reward < 1 || *res.Reward > 2 {
			t.Errorf("agent %d saw %v agents running; want 1 or 2 with 2 workers", i, *res.Reward)
		}
	}
}

// TestRunnerRunsWorkersAtOnce: two agents that each wait for the other both finish with 2
// workers (with 1 they would wait until their timeout).
func TestRunnerRunsWorkersAtOnce(t *testing.T) {
	r, err := NewRunner(Config{Command: []string{"./meet.sh", "meet"}, Dir: "testdata", Timeout: time.Minute,
		Env: map[string]string{"DIR": t.TempDir(), "WANT": "2"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range runMany(t, r, 2) {
		if !res.Usable() || res.Reward == nil || *res.Reward != 2 {
			t.Errorf("agent %d: %+v; want both agents to meet", i, res)
		}
	}
}

// TestRunnerCancelWhileQueued: a trajectory waiting for a worker gives up with its context and
// its agent never starts.
func TestRunnerCancelWhileQueued(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "started")
	r, err := NewRunner(Config{Command: []string{"sh", "-c", `touch "$DIR/ran-$$"; echo started > "$DIR/started"; sleep 1000`},
		Env: map[string]string{"DIR": dir}, Grace: 100 * time.Millisecond}, 1)
	if err != nil {
		t.Fatal(err)
	}
	first, stopFirst := context.WithCancel(context.Background())
	defer stopFirst()
	firstDone := make(chan error, 1)
	go func() {
		_, err := r.Run(first, testTask, "", "")
		firstDone <- err
	}()
	// Wait until the first agent holds the only worker.
	for {
		if _, err := os.Stat(fifo); err == nil {
			break
		}
		select {
		case err := <-firstDone:
			t.Fatalf("the first agent ended early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	second, stopSecond := context.WithCancel(context.Background())
	queued := make(chan struct{})
	var res Result
	go func() {
		defer close(queued)
		res, err = r.Run(second, testTask, "", "")
	}()
	stopSecond()
	<-queued
	if !errors.Is(err, context.Canceled) || res.Drop != DropCancelled || !strings.Contains(res.Dropped, "before the agent started") {
		t.Errorf("queued run: %+v, %v; want cancelled before the agent started", res, err)
	}
	stopFirst()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Errorf("first run: %v; want cancelled", err)
	}
	ran, _ := filepath.Glob(filepath.Join(dir, "ran-*"))
	if len(ran) != 1 {
		t.Errorf("%d agents started; want only the first", len(ran))
	}
}

func TestNewRunnerErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		workers int
		want    string
	}{
		{"no workers", Config{Command: []string{"sh"}}, 0, "0 workers; want at least 1"},
		{"reserved variable", Config{Command: []string{"sh"}, Env: map[string]string{"AGENTRL_TASK": "{}"}}, 1, "AGENTRL_TASK is set per trajectory by the workbench"},
		{"program missing", Config{Command: []string{"no-such-agent-program"}}, 1, "not on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewRunner(tt.cfg, tt.workers); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want an error containing %q", err, tt.want)
			}
		})
	}
}
