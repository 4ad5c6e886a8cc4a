//go:build linux

package external

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid is a live process: not gone and not a zombie (an orphaned grandchild
// is reaped by init, not by us, so a killed one may linger as a zombie for a moment).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

// TestNoStrayProcesses: however the agent ends, Run returns with the agent reaped and the
// grandchild it started killed, and reports it as it should.
func TestNoStrayProcesses(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		timeout time.Duration
		cancel  bool
		drop    Drop
		err     error
	}{
		{name: "timeout", mode: "wait", timeout: time.Second, drop: DropTimeout},
		{name: "context cancelled", mode: "wait", cancel: true, drop: DropCancelled, err: context.Canceled},
		{name: "ignores SIGTERM", mode: "stubborn", timeout: time.Second, drop: DropTimeout},
		{name: "exits leaving a child that holds stdout", mode: "exit", drop: DropNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "pids")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Command: []string{"./grandchild.sh", tt.mode}, Dir: "testdata", Env: map[string]string{"FIFO": fifo},
				Timeout: tt.timeout, Grace: 10 * time.Second}
			if tt.mode == "stubborn" {
				cfg.Grace = 100 * time.Millisecond // it ignores SIGTERM: no point waiting long
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type outcome struct {
				res Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := Run(ctx, cfg, testTask, "", "")
				done <- outcome{res, err}
			}()
			pids := make(chan string, 1)
			go func() {
				data, _ := os.ReadFile(fifo) // blocks until the agent has written its pids
				pids <- string(data)
			}()
			// The agent writes its pids before it ends, but an agent that exits at once ("exit")
			// can be reaped before the reader goroutine has run: Run ending first is not a
			// failure unless the pids never come (the write to a FIFO returns only once a reader
			// has opened it, so they are in the pipe by then).
			var line string
			var o outcome
			ended := false
			select {
			case line = <-pids:
			case o = <-done:
				ended = true
				select {
				case line = <-pids:
				case <-time.After(30 * time.Second):
					t.Fatalf("the agent ended without writing its pids: %+v, %v", o.res, o.err)
				}
			}
			var agent, child int
			if _, err := fmt.Sscan(line, &agent, &child); err != nil {
				t.Fatalf("pids %q: %v", line, err)
			}
			if tt.cancel {
				if ended {
					t.Fatalf("the agent ended before it was cancelled: %+v, %v", o.res, o.err)
				}
				cancel()
			}
			if !ended {
				o = <-done
			}
			if !errors.Is(o.err, tt.err) || (tt.err == nil) != (o.err == nil) {
				t.Errorf("error %v; want %v", o.err, tt.err)
			}
			if o.res.Drop != tt.drop {
				t.Errorf("drop %q (%s); want %q", o.res.Drop, o.res.Dropped, tt.drop)
			}
			if alive(agent) {
				t.Errorf("the agent (pid %d) is still running after Run returned", agent)
			}
			if alive(child) {
				syscall.Kill(child, syscall.SIGKILL)
				t.Errorf("the agent's grandchild (pid %d) is still running after Run returned", child)
			}
			if tt.mode == "stubborn" && o.res.Signal != "SIGKILL" {
				t.Errorf("an agent that ignores SIGTERM ended by %q; want SIGKILL", o.res.Signal)
			}
		})
	}
}
