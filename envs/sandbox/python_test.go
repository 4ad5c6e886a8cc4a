package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests' time limits for one execution. Code that must be stopped (an infinite loop, a fork
// bomb) gets hostileTimeout, so the test ends soon; code that must finish, or be stopped by
// another limit, gets finishTimeout, which only a hung sandbox reaches: on a loaded machine an
// interpreter that printed its result can take seconds to exit, and a 3-second limit then turned
// a finished execution into a timeout (seen at a load average of 25).
const (
	hostileTimeout = 3 * time.Second
	finishTimeout  = 2 * time.Minute
)

// timeoutFor is the limit for code expected to end with one of statuses.
func timeoutFor(statuses []Status) time.Duration {
	if slices.Contains(statuses, StatusTimeout) {
		return hostileTimeout
	}
	return finishTimeout
}

func needPython(t *testing.T, timeout time.Duration) *Python {
	t.Helper()
	p, err := NewPython(Limits{Timeout: timeout, MaxMemoryMB: 256, MaxProcs: 32, MaxFileMB: 8, MaxOutputBytes: 2048}, false)
	if err != nil {
		t.Skipf("python3 is absent (CI installs it): %v", err)
	}
	return p
}

// TestPythonHostileCode runs each kind of hostile code for real under small limits: each must end
// with a clear result, the run goes on, and no process is left behind.
func TestPythonHostileCode(t *testing.T) {
	p := needPython(t, finishTimeout)
	quick := needPython(t, hostileTimeout)
	t.Logf("isolation: %s", p.Isolation())
	t.Setenv("AGENTRL_TEST_SECRET", "hunter2")
	marker := fmt.Sprintf("agentrl-orphan-%d", time.Now().UnixNano())
	for _, tc := range []struct {
		name     string
		code     string
		statuses []Status
		output   string
	}{
		{"ok", "print(sum(i*i for i in range(10)))", []Status{StatusOK}, "285"},
		{"exception", "x = 1/0", []Status{StatusError}, "ZeroDivisionError"},
		{"output then exception", "print('before')\nx = 1/0", []Status{StatusError}, "before\nTraceback (most recent call last):\n  File \"<code>\", line 2, in <module>\nZeroDivisionError: division by zero"},
		{"infinite loop", "while True: pass", []Status{StatusTimeout, StatusKilled}, ""},
		{"fork bomb", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", []Status{StatusTimeout, StatusKilled, StatusError}, ""},
		{"allocate 10 GiB", "x = bytearray(10 * 1024**3)", []Status{StatusError}, "MemoryError"},
		{"print 100 MB", "import sys\nsys.stdout.write('x' * (100 * 1024 * 1024))", []Status{StatusOK, StatusError}, "output truncated"},
		{"write 10 GiB file", "f = open('big', 'wb')\nfor i in range(10 * 1024):\n    f.write(b'0' * (1024 * 1024))", []Status{StatusKilled, StatusError}, ""},
		{"orphan process", "import subprocess\nsubprocess.Popen(['sleep', '300', '" + marker + "'], start_new_session=True)\nprint('spawned')", []Status{StatusOK}, "spawned"},
		{"environment secrets", "import os\nprint(os.environ.get('AGENTRL_TEST_SECRET'), sorted(os.environ))", []Status{StatusOK}, "None"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := p
			if timeoutFor(tc.statuses) == hostileTimeout {
				ex = quick
			}
			r := run(t, ex, tc.code)
			if !slices.Contains(tc.statuses, r.Status) || !strings.Contains(r.Output, tc.output) {
				t.Errorf("got %s %q (%s); want one of %v with %q", r.Status, trunc(r.Output), r.Detail, tc.statuses, tc.output)
			}
			if strings.Contains(r.Output, "hunter2") {
				t.Error("the child saw the parent's environment")
			}
			if strings.Contains(r.Output, "in _run") {
				t.Errorf("the sandbox's own frame is in the traceback: %q", r.Output)
			}
			if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(out) > 0 {
				t.Errorf("a process outlived the call: pid %s", out)
			}
			if ex.root && uidsBusy(ex) {
				t.Error("a sandbox uid still has processes")
			}
		})
	}
	t.Run("network", func(t *testing.T) {
		r := run(t, p, "import socket\ns = socket.create_connection(('1.1.1.1', 53), timeout=1)\nprint('connected')")
		if p.netns && (r.Status != StatusError || strings.Contains(r.Output, "connected")) {
			t.Errorf("network reachable inside the sandbox: %s %q", r.Status, r.Output)
		}
		t.Logf("network attempt: %s %q", r.Status, trunc(r.Output))
	})
	if r := run(t, p, "print('still fine')"); r.Status != StatusOK {
		t.Errorf("after hostile code the executor no longer works: %+v", r)
	}
}

func uidsBusy(p *Python) bool {
	return len(scanProcs(func(_ string, uid int) bool { return uid >= p.uidBase && uid < p.uidBase+uidBlock })) > 0
}

// trunc keeps the end of s, where a traceback says what went wrong.
func trunc(s string) string {
	if len(s) > 300 {
		return "…" + s[len(s)-300:]
	}
	return s
}

func TestPythonPersistent(t *testing.T) {
	needPython(t, finishTimeout)
	p, err := NewPython(Limits{Timeout: 2 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.NewSession()
	defer s.Close()
	ctx := context.Background()
	if r := s.Run(ctx, "x = 21"); r.Status != StatusOK {
		t.Fatalf("%+v", r)
	}
	if r := s.Run(ctx, "print(x * 2)"); r.Status != StatusOK || r.Output != "42\n" {
		t.Fatalf("variables not kept: %+v", r)
	}
	if r := s.Run(ctx, "import os\nos.system('echo from-child')"); !strings.Contains(r.Output, "from-child") {
		t.Errorf("child output not captured: %+v", r)
	}
	if r := s.Run(ctx, "print('first')\nprint(y)"); r.Status != StatusError || !strings.HasPrefix(r.Output, "first\nTraceback") || !strings.Contains(r.Output, "NameError") || strings.Contains(r.Output, "_run") {
		t.Errorf("error: %+v", r)
	}
	if r := s.Run(ctx, "while True: pass"); r.Status != StatusTimeout {
		t.Errorf("timeout: %+v", r)
	}
	if r := s.Run(ctx, "print(x)"); r.Status != StatusError || !strings.Contains(r.Output, "restarted") {
		t.Errorf("after a timeout the session should restart fresh with a notice: %+v", r)
	}
}

// TestPythonPersistentHostile: in a persistent session a process the call started does not
// outlive the call, and a fork bomb ends in a restart with nothing left behind.
func TestPythonPersistentHostile(t *testing.T) {
	needPython(t, finishTimeout)
	p, err := NewPython(Limits{Timeout: 2 * time.Second, MaxMemoryMB: 256, MaxProcs: 32}, true)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.NewSession()
	defer s.Close()
	ctx := context.Background()
	marker := fmt.Sprintf("agentrl-persistent-orphan-%d", time.Now().UnixNano())
	if r := s.Run(ctx, "import subprocess\nkeep = 7\nsubprocess.Popen(['sleep', '300', '"+marker+"'], start_new_session=True)\nprint('spawned')"); r.Status != StatusOK {
		t.Fatalf("%+v", r)
	}
	if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(out) > 0 {
		t.Errorf("a process outlived the call in a persistent session: pid %s", out)
	}
	if r := s.Run(ctx, "print(keep)"); r.Output != "7\n" {
		t.Errorf("the interpreter did not survive the cleanup: %+v", r)
	}
	r := s.Run(ctx, "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass")
	if r.Status != StatusTimeout && r.Status != StatusKilled {
		t.Errorf("fork bomb: %+v", r)
	}
	if p.root && uidsBusy(p) {
		t.Error("a sandbox uid still has processes after the fork bomb")
	}
	if r := s.Run(ctx, "print('after')"); r.Status != StatusOK || !strings.Contains(r.Output, "after") {
		t.Errorf("the session did not restart: %+v", r)
	}
}

// TestPythonSandboxesBusy: as root, a call that finds every sandbox uid taken waits for its
// context and says so.
func TestPythonSandboxesBusy(t *testing.T) {
	p := needPython(t, finishTimeout)
	if !p.root {
		t.Skip("sandbox uids exist only as root")
	}
	var held []int
	for len(p.uids) > 0 {
		held = append(held, <-p.uids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s, _ := p.NewSession()
	if r := s.Run(ctx, "print(1)"); r.Status != StatusError || !strings.Contains(r.Output, "sandboxes are busy") {
		t.Errorf("got %+v", r)
	}
	for _, u := range held {
		p.uids <- u
	}
	if r := s.Run(context.Background(), "print(1)"); r.Status != StatusOK {
		t.Errorf("after the uids came back: %+v", r)
	}
}
