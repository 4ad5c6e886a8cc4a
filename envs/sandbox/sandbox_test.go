//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// asNobody marks the copy of this test binary that TestSandboxAsNobody runs under uid 65534.
const asNobody = "AGENTRL_TEST_AS_NOBODY"

// needStrict returns a python executor under strict isolation. Where the machine refuses the
// isolation the test is skipped with the refusal, except in the run as nobody, which exists to
// test it.
func needStrict(t *testing.T, persistent bool, timeout time.Duration) *Python {
	t.Helper()
	if _, err := (Config{}).interpreter(); err != nil {
		t.Skipf("python3 is absent (CI installs it): %v", err)
	}
	p, err := NewPythonWith(Limits{Timeout: timeout, MaxMemoryMB: 256, MaxProcs: 32, MaxFileMB: 8, MaxOutputBytes: 2048}, persistent, Config{})
	if err != nil {
		if os.Getenv(asNobody) != "" {
			t.Fatal(err)
		}
		t.Skipf("strict isolation refused here: %v", err)
	}
	return p
}

// pidNamespaces lists the PID namespaces that have a process now.
func pidNamespaces() map[string]bool {
	seen := map[string]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err == nil {
			if ns := nsOf(pid); ns != "" {
				seen[ns] = true
			}
		}
	}
	return seen
}

// tmpEntries lists /tmp.
func tmpEntries() map[string]bool {
	seen := map[string]bool{}
	ents, _ := os.ReadDir(os.TempDir())
	for _, e := range ents {
		seen[e.Name()] = true
	}
	return seen
}

// TestSandboxBadInput runs each kind of hostile input under strict isolation as the current
// user: each is refused or contained with a clear status, the next execution still works, and
// nothing is left in /tmp or the process table. TestSandboxAsNobody runs it again as uid 65534.
func TestSandboxBadInput(t *testing.T) {
	p := needStrict(t, false, finishTimeout)
	quick := needStrict(t, false, hostileTimeout)
	t.Logf("uid %d, isolation: %s", os.Getuid(), p.Isolation())
	nsBefore, tmpBefore := pidNamespaces(), tmpEntries()

	const secret = "s3cret-hunter2"
	t.Setenv("AGENTRL_TEST_SECRET", secret)
	home := t.TempDir()
	files := map[string]string{
		"home":  filepath.Join(home, ".ssh", "id_ed25519"),
		"tasks": filepath.Join(t.TempDir(), "tasks.jsonl"),
		"store": filepath.Join(t.TempDir(), "runs", "agentrl.db"),
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	if project := os.Getenv("AGENTRL_TEST_PROJECT_FILE"); project != "" {
		files["project"] = project
	} else if abs, err := filepath.Abs("../../go.mod"); err == nil {
		files["project"] = abs
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	leak := fmt.Sprintf("agentrl-leak-%d", time.Now().UnixNano())

	type tc struct {
		name     string
		code     string
		statuses []Status
		want     string // in the output
	}
	cases := []tc{
		{"passwd is the sandbox's", "print(open('/etc/passwd').read())", []Status{StatusOK}, "root:x:0:0:sandbox:/work"},
		{"loopback port", fmt.Sprintf("import socket\nsocket.create_connection(('127.0.0.1', %d), timeout=2)\nprint('connected')", port), []Status{StatusError}, "Network is unreachable"},
		{"parent environ", fmt.Sprintf("print(open('/proc/%d/environ').read())", os.Getpid()), []Status{StatusError}, "FileNotFoundError"},
		{"init environ", "print(open('/proc/1/environ').read())", []Status{StatusError}, "PermissionError"},
		{"other processes", "import os\nprint(sorted(int(d) for d in os.listdir('/proc') if d.isdigit()))", []Status{StatusOK}, "[1, "},
		{"symlink to root", "import os\nos.symlink('/', 'root')\nprint(sorted(os.listdir('root')))\nprint(open('root" + files["home"] + "').read())", []Status{StatusError}, "FileNotFoundError"},
		{"write outside the work folder", "open('/usr/x', 'w')", []Status{StatusError}, "Read-only file system"},
		{"write /tmp", "open('/tmp/" + leak + "', 'w').write('x')\nprint('written')", []Status{StatusOK}, "written"},
		{"read /tmp of another execution", "print(open('/tmp/" + leak + "').read())", []Status{StatusError}, "FileNotFoundError"},
		{"fork bomb", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", []Status{StatusTimeout, StatusKilled, StatusError}, ""},
		{"memory bomb", "a = []\nwhile True: a.append(bytearray(10**7))", []Status{StatusError, StatusKilled}, ""},
		{"allocate 8 GiB", "x = bytearray(8 * 1024**3)", []Status{StatusError}, "MemoryError"},
		{"output flood", "while True: print('x' * 1000)", []Status{StatusTimeout, StatusKilled}, "output truncated"},
		{"fill the disk", "f = open('/tmp/big', 'wb')\nwhile True: f.write(b'0' * 2**20)", []Status{StatusError, StatusKilled}, ""},
	}
	for _, name := range []string{"home", "tasks", "store", "project"} {
		if f := files[name]; f != "" {
			cases = append(cases, tc{"read " + name + " file", fmt.Sprintf("print(open(%q).read())", f), []Status{StatusError}, "FileNotFoundError"})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex := p
			if timeoutFor(c.statuses) == hostileTimeout {
				ex = quick
			}
			r := run(t, ex, c.code)
			if !slices.Contains(c.statuses, r.Status) || !strings.Contains(r.Output, c.want) {
				t.Errorf("got %s %q (%s); want one of %v with %q", r.Status, trunc(r.Output), r.Detail, c.statuses, c.want)
			}
			if strings.Contains(r.Output, secret) {
				t.Errorf("the code read the secret: %q", trunc(r.Output))
			}
			if r := run(t, p, "print(6 * 7)"); r.Status != StatusOK || r.Output != "42\n" {
				t.Errorf("the next execution failed: %+v", r)
			}
		})
	}
	if n := accepted.Load(); n > 0 {
		t.Errorf("the loopback listener accepted %d connections from the sandbox", n)
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), leak)); err == nil {
		t.Errorf("/tmp/%s was written on the host", leak)
	}
	for name := range tmpEntries() {
		if !tmpBefore[name] && strings.HasPrefix(name, "agentrl") {
			t.Errorf("left in /tmp: %s", name)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for ns := range pidNamespaces() {
			if !nsBefore[ns] {
				left = append(left, ns)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left in sandbox PID namespaces %v", left)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSandboxNothingPersists: a persistent session keeps its variables and files within its
// trajectory; another session, alive at the same time or later, sees none of them.
func TestSandboxNothingPersists(t *testing.T) {
	p := needStrict(t, true, finishTimeout)
	ctx := context.Background()
	a, _ := p.NewSession()
	defer a.Close()
	if r := a.Run(ctx, "x = 7\nopen('/tmp/a', 'w').write('from a')\nopen('note', 'w').write('work a')"); r.Status != StatusOK {
		t.Fatalf("%+v", r)
	}
	b, _ := p.NewSession()
	defer b.Close()
	for _, code := range []string{"print(open('/tmp/a').read())", "print(open('/work/note').read())", "print(x)"} {
		if r := b.Run(ctx, code); r.Status != StatusError || strings.Contains(r.Output, "from a") || strings.Contains(r.Output, "work a") {
			t.Errorf("another trajectory saw %q: %s %q", code, r.Status, r.Output)
		}
	}
	if r := a.Run(ctx, "print(x, open('/tmp/a').read(), open('note').read())"); r.Status != StatusOK || r.Output != "7 from a work a\n" {
		t.Errorf("the trajectory lost its own state: %+v", r)
	}
}

// TestSandboxModules: numpy and sympy import when the interpreter has them; an installed
// package the sandbox does not allow does not.
func TestSandboxModules(t *testing.T) {
	p := needStrict(t, false, finishTimeout)
	ok, missing := p.Modules()
	t.Logf("modules ok %v, missing %v", ok, missing)
	if slices.Contains(ok, "numpy") {
		if r := run(t, p, "import numpy as np\nprint(int(np.arange(10).sum()), np.linalg.det(np.eye(3)))"); r.Status != StatusOK || r.Output != "45 1.0\n" {
			t.Errorf("numpy: %+v", r)
		}
	}
	if slices.Contains(ok, "sympy") {
		if r := run(t, p, "import sympy\nx = sympy.symbols('x')\nprint(sympy.factor(x**2 - 1), sympy.integrate(x, x))"); r.Status != StatusOK || r.Output != "(x - 1)*(x + 1) x**2/2\n" {
			t.Errorf("sympy: %+v", r)
		}
	}
	if len(ok) < len(DefaultModules) {
		t.Logf("not all of %v are installed (apt-get install python3-numpy python3-sympy)", DefaultModules)
	}
	// A package the host interpreter has but the sandbox does not allow stays out of reach.
	for _, other := range []string{"yaml", "requests", "six", "certifi"} {
		if slices.Contains(p.info.OK, other) || exec.Command(p.Interpreter, "-I", "-c", "import "+other).Run() != nil {
			continue
		}
		if r := run(t, p, "import "+other); r.Status != StatusError || !strings.Contains(r.Output, "ModuleNotFoundError") {
			t.Errorf("import %s (installed, not allowed): %+v", other, r)
		}
		break
	}
}

// TestSandboxRefusal: a machine without the namespaces refuses strict isolation with a message
// that says what is missing and the way out; isolation none runs without asking.
func TestSandboxRefusal(t *testing.T) {
	if _, err := (Config{}).interpreter(); err != nil {
		t.Skipf("python3 is absent: %v", err)
	}
	missing := func() error { return errors.New("fork/exec: operation not permitted") }
	_, err := NewPythonWith(Limits{}, false, Config{probe: missing})
	for _, want := range []string{"env.sandbox.isolation strict", "operation not permitted", "user namespaces", "env.sandbox.isolation: none"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v; want an error with %q", err, want)
		}
	}
	if _, err := NewExecutorWith("python", Limits{}, "fresh", Config{probe: missing}); err == nil {
		t.Error("NewExecutorWith ran without the isolation")
	}
	p, err := NewPythonWith(Limits{Timeout: 3 * time.Second}, false, Config{Isolation: IsolationNone, probe: missing})
	if err != nil {
		t.Fatalf("isolation none: %v", err)
	}
	if !strings.Contains(p.Isolation(), "NONE") {
		t.Errorf("isolation none does not say so: %q", p.Isolation())
	}
	if r := run(t, p, "print(1)"); r.Status != StatusOK {
		t.Errorf("isolation none: %+v", r)
	}
	if _, err := NewPythonWith(Limits{}, false, Config{Isolation: "loose"}); err == nil || !strings.Contains(err.Error(), `"loose"`) {
		t.Errorf("unknown isolation: %v", err)
	}
}

func TestSandboxWorkersAndQueue(t *testing.T) {
	if got := (Config{}).WorkerCount(); got != runtime.NumCPU() {
		t.Errorf("auto workers: got %d; want %d", got, runtime.NumCPU())
	}
	if got := (Config{Workers: 3}).WorkerCount(); got != 3 {
		t.Errorf("workers 3: got %d; want 3", got)
	}
	pool := NewPool(1)
	release, started := make(chan struct{}), make(chan struct{})
	slow := sessionFunc(func(ctx context.Context, code string) Result {
		close(started)
		<-release
		return Result{Status: StatusOK}
	})
	done := make(chan Result)
	go func() { done <- pool.Run(context.Background(), slow, "") }()
	<-started
	waiter := make(chan Result)
	fast := sessionFunc(func(ctx context.Context, code string) Result { return Result{Status: StatusOK} })
	go func() { waiter <- pool.Run(context.Background(), fast, "") }()
	time.Sleep(20 * time.Millisecond) // not needed for correctness: only makes the wait visible
	close(release)
	<-done
	r := <-waiter
	if r.Queued <= 0 || pool.QueueWait() < r.Queued {
		t.Errorf("queue wait: result %v, pool %v", r.Queued, pool.QueueWait())
	}
}

// TestSandboxAsNobody runs the sandbox tests again in a copy of this test binary under uid
// 65534, the unprivileged user most workbenches run as.
func TestSandboxAsNobody(t *testing.T) {
	if os.Getenv(asNobody) != "" {
		t.Skip("already nobody")
	}
	if os.Geteuid() != 0 {
		t.Skip("only root can start the tests as uid 65534 (as an ordinary user the tests above already ran unprivileged)")
	}
	if _, err := (Config{}).interpreter(); err != nil {
		t.Skipf("python3 is absent: %v", err)
	}
	dir, err := os.MkdirTemp("", "sandbox-nobody-") // t.TempDir's parent is closed to others
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	project, _ := filepath.Abs("../../go.mod")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^TestSandbox(BadInput|NothingPersists|Modules)$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=/tmp", "HOME=/nonexistent", asNobody + "=1", "AGENTRL_TEST_PROJECT_FILE=" + project}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid 65534:\n%s", out)
	if err != nil {
		t.Fatalf("the sandbox tests failed as uid 65534: %v", err)
	}
	if strings.Contains(string(out), "--- SKIP: TestSandboxBadInput") || !strings.Contains(string(out), "--- PASS: TestSandboxBadInput") {
		t.Error("TestSandboxBadInput did not run as uid 65534")
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
