package retool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Python runs code in python3 subprocesses, each in a fresh temporary directory with a minimal
// environment and resource limits (address space, CPU time, processes, file size) that the code
// cannot raise. Run as root, each concurrent sandbox gets its own unprivileged uid, so the process
// limit binds and every process the code left behind is killed afterwards (kill -1 as that uid),
// and the child gets an empty network namespace (no network at all). Without root it falls back
// to killing the process group, and network isolation is off (see Isolation).
type Python struct {
	Interpreter string
	Limits      Limits
	Persistent  bool

	root  bool
	netns bool
	uids  chan int // free sandbox uids (root only)
}

// sandboxUIDBase is the first of the uids given to sandboxes when running as root.
const sandboxUIDBase = 61000

// NewPython finds a python3 the sandbox user can execute and probes what isolation works.
func NewPython(lim Limits, persistent bool) (*Python, error) {
	p := &Python{Limits: lim.withDefaults(), Persistent: persistent, root: os.Geteuid() == 0}
	for _, c := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if st, err := os.Stat(c); err == nil && st.Mode()&0o001 != 0 {
			p.Interpreter = c
			break
		}
	}
	if p.Interpreter == "" {
		path, err := exec.LookPath("python3")
		if err != nil {
			return nil, errors.New("executor python: no python3 found (install it, e.g. apt-get install python3, or use executor: starlark)")
		}
		p.Interpreter = path
	}
	if p.root {
		p.uids = make(chan int, 64)
		for i := 0; i < 64; i++ {
			p.uids <- sandboxUIDBase + i
		}
		p.netns = probeNetns(p.Interpreter)
	}
	return p, nil
}

// Name is "python".
func (p *Python) Name() string { return "python" }

// Isolation describes what the sandbox enforces on this machine.
func (p *Python) Isolation() string {
	parts := []string{"rlimits (memory, CPU, file size)", "fresh temp dir", "minimal environment"}
	if p.root {
		parts = append(parts, "per-sandbox uid (process limit, leftover processes killed)")
	} else {
		parts = append(parts, "process group kill (not root: no per-sandbox uid)")
	}
	if p.netns {
		parts = append(parts, "no network (empty network namespace)")
	} else {
		parts = append(parts, "network NOT isolated (network namespaces unavailable)")
	}
	return strings.Join(parts, ", ")
}

func probeNetns(python string) bool {
	cmd := exec.Command(python, "-c", "pass")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	return cmd.Run() == nil
}

// preamble sets hard and soft limits (the code cannot raise them) and then runs the code read
// from stdin (fresh mode) or serves framed requests (persistent mode).
const preamble = `
import os, sys, resource, traceback
def _lim(r, v):
    try: resource.setrlimit(r, (v, v))
    except Exception: pass
_lim(resource.RLIMIT_AS, %d << 20)
_lim(resource.RLIMIT_CPU, %d)
_lim(resource.RLIMIT_FSIZE, %d << 20)
_lim(resource.RLIMIT_NPROC, %d)
_lim(resource.RLIMIT_CORE, 0)
def _run(code, g):
    try:
        exec(compile(code, "<code>", "exec"), g)
        return 0
    except SystemExit as e:
        return 0 if e.code in (None, 0) else 1
    except BaseException:
        traceback.print_exc()
        return 1
if %s:
    ctl = os.fdopen(os.dup(1), "wb")
    inp = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDONLY); os.dup2(devnull, 0)
    g = {"__name__": "__main__"}
    n = 0
    while True:
        hdr = inp.readline()
        if not hdr:
            break
        code = inp.read(int(hdr)).decode("utf-8", "replace")
        n += 1
        path = "out%%d.txt" %% n
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(fd, 1); os.dup2(fd, 2); os.close(fd)
        rc = _run(code, g)
        sys.stdout.flush(); sys.stderr.flush()
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            data = f.read(%d)
        os.remove(path)
        ctl.write(b"%%d %%d %%d\n" %% (rc, size, len(data))); ctl.write(data); ctl.flush()
else:
    sys.exit(_run(sys.stdin.read(), {"__name__": "__main__"}))
`

func (p *Python) script() string {
	l := p.Limits
	persistent := "False"
	if p.Persistent {
		persistent = "True"
	}
	return fmt.Sprintf(preamble, l.MaxMemoryMB, int(l.Timeout.Seconds())+1, l.MaxFileMB, l.MaxProcs, persistent, l.MaxOutputBytes)
}

// sandbox is one python process's resources: uid, temp dir.
type sandbox struct {
	p   *Python
	uid int
	dir string
}

func (p *Python) newSandbox() (*sandbox, error) {
	s := &sandbox{p: p, uid: -1}
	dir, err := os.MkdirTemp("", "agentrl-py-")
	if err != nil {
		return nil, fmt.Errorf("executor python: temp dir: %w", err)
	}
	s.dir = dir
	if p.root {
		s.uid = <-p.uids
		if err := os.Chown(dir, s.uid, s.uid); err != nil {
			s.release()
			return nil, fmt.Errorf("executor python: chown %s: %w", dir, err)
		}
	}
	return s, nil
}

func (s *sandbox) command(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.p.Interpreter, "-I", "-S", "-c", s.p.script())
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + s.dir, "TMPDIR=" + s.dir, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8"}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if s.uid >= 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid), NoSetGroups: true}
		if s.p.netns {
			attr.Cloneflags = syscall.CLONE_NEWNET
		}
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	return cmd
}

// reap kills every process left by the sandbox: the process group, and as root every process of
// the sandbox uid (kill -1 sent by that uid reaches exactly its own processes).
func (s *sandbox) reap(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if s.uid < 0 {
		return
	}
	for i := 0; i < 5 && uidHasProcesses(s.uid); i++ {
		k := exec.Command("/bin/kill", "-9", "-1")
		k.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid), NoSetGroups: true}}
		_ = k.Run()
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *sandbox) release() {
	_ = os.RemoveAll(s.dir)
	if s.uid >= 0 {
		s.p.uids <- s.uid
		s.uid = -1
	}
}

// uidHasProcesses scans /proc for a live (not zombie) process whose real uid is uid.
func uidHasProcesses(uid int) bool {
	ents, _ := os.ReadDir("/proc")
	want := strconv.Itoa(uid)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		zombie := false
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "State:") {
				zombie = strings.Contains(line, "Z (zombie)") || strings.Contains(line, "X (dead)")
			}
			if strings.HasPrefix(line, "Uid:") && !zombie {
				f := strings.Fields(line)
				if len(f) > 1 && f[1] == want {
					return true
				}
				break
			}
		}
	}
	return false
}

// NewSession starts a session: fresh mode runs a new interpreter per call; persistent mode keeps
// one interpreter (and its variables) until Close or a timeout.
func (p *Python) NewSession() (Session, error) {
	if p.Persistent {
		return &persistentSession{p: p}, nil
	}
	return &freshSession{p: p}, nil
}

type freshSession struct{ p *Python }

func (f *freshSession) Close() error { return nil }

func (f *freshSession) Run(ctx context.Context, code string) Result {
	start := time.Now()
	sb, err := f.p.newSandbox()
	if err != nil {
		return Result{Status: StatusError, Output: err.Error()}
	}
	defer sb.release()
	ctx, cancel := context.WithTimeout(ctx, f.p.Limits.Timeout)
	defer cancel()
	cmd := sb.command(ctx)
	out := &truncating{limit: f.p.Limits.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Stdin = strings.NewReader(code)
	err = cmd.Start()
	if err != nil {
		return Result{Status: StatusError, Output: "executor python: " + err.Error(), Duration: time.Since(start)}
	}
	err = cmd.Wait()
	sb.reap(cmd.Process.Pid)
	return f.p.classify(ctx, err, out.String(), time.Since(start))
}

// classify turns a finished process into a Result.
func (p *Python) classify(ctx context.Context, err error, output string, d time.Duration) Result {
	res := Result{Output: output, Duration: d}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.Status, res.Detail = StatusTimeout, fmt.Sprintf("stopped after %s", p.Limits.Timeout)
	case err == nil:
		res.Status = StatusOK
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		res.Status = StatusError
		res.Output = lastLines(output, 6)
	case errors.As(err, &ee):
		res.Status = StatusKilled
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Detail = "killed by " + ws.Signal().String() + " (a resource limit)"
		} else {
			res.Detail = fmt.Sprintf("exited with status %d", ee.ExitCode())
		}
	default:
		res.Status, res.Detail = StatusError, err.Error()
	}
	return res
}

// persistentSession keeps one interpreter serving framed requests.
type persistentSession struct {
	p     *Python
	mu    sync.Mutex
	sb    *sandbox
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	reset string // notice for the next call after the interpreter was restarted
}

func (s *persistentSession) start() error {
	sb, err := s.p.newSandbox()
	if err != nil {
		return err
	}
	cmd := sb.command(context.Background())
	in, err := cmd.StdinPipe()
	if err != nil {
		sb.release()
		return err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		sb.release()
		return err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		sb.release()
		return fmt.Errorf("executor python: %w", err)
	}
	s.sb, s.cmd, s.in, s.out = sb, cmd, in, bufio.NewReader(outPipe)
	return nil
}

func (s *persistentSession) stop() {
	if s.cmd == nil {
		return
	}
	s.in.Close()
	s.sb.reap(s.cmd.Process.Pid)
	_ = s.cmd.Wait()
	s.sb.release()
	s.cmd = nil
}

func (s *persistentSession) Run(ctx context.Context, code string) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	if s.cmd == nil {
		if err := s.start(); err != nil {
			return Result{Status: StatusError, Output: err.Error()}
		}
	}
	notice := s.reset
	s.reset = ""
	type reply struct {
		rc, size int
		data     []byte
		err      error
	}
	ch := make(chan reply, 1)
	go func() {
		if _, err := fmt.Fprintf(s.in, "%d\n%s", len(code), code); err != nil {
			ch <- reply{err: err}
			return
		}
		var r reply
		var n int
		if _, r.err = fmt.Fscanf(s.out, "%d %d %d\n", &r.rc, &r.size, &n); r.err == nil {
			r.data = make([]byte, n)
			_, r.err = io.ReadFull(s.out, r.data)
		}
		ch <- r
	}()
	timer := time.NewTimer(s.p.Limits.Timeout)
	defer timer.Stop()
	res := Result{}
	select {
	case r := <-ch:
		res.Duration = time.Since(start)
		if r.err != nil { // the interpreter died: a resource limit
			s.stop()
			s.reset = "[the Python session was restarted; earlier variables are gone]\n"
			res.Status, res.Detail = StatusKilled, "the interpreter died (a resource limit)"
			return res
		}
		res.Output = string(r.data)
		if r.size > len(r.data) {
			res.Output += fmt.Sprintf("\n[… output truncated: %d more bytes]", r.size-len(r.data))
		}
		res.Status = StatusOK
		if r.rc != 0 {
			res.Status = StatusError
			res.Output = lastLines(res.Output, 6)
		}
	case <-timer.C:
		s.stop()
		s.reset = "[the Python session was restarted after a timeout; earlier variables are gone]\n"
		res.Status, res.Detail, res.Duration = StatusTimeout, fmt.Sprintf("stopped after %s", s.p.Limits.Timeout), time.Since(start)
	case <-ctx.Done():
		s.stop()
		res.Status, res.Detail, res.Duration = StatusKilled, "cancelled: "+ctx.Err().Error(), time.Since(start)
	}
	res.Output = notice + res.Output
	return res
}

func (s *persistentSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
	return nil
}
