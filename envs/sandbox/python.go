package sandbox

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Python runs code in python3 subprocesses with resource limits (address space, CPU time,
// processes, file size) that the code cannot raise, a minimal environment and an empty working
// folder. Under strict isolation (the default) each session runs in its own Linux namespaces
// (sandbox_linux.go): it sees only the interpreter, its standard library and the allowed
// modules, read-only, writes only its private /work and /tmp (a tmpfs gone with the session),
// has no network and sees no other process; the same as root and as an ordinary user.
//
// With isolation none, a session gets a fresh temporary folder on the host. Run as root, each
// concurrent sandbox then gets its own unprivileged uid, so the process limit binds and every
// process the code left behind is killed afterwards (kill -1 as that uid), and an empty network
// namespace. Without root it falls back to killing the process group and every process that
// carries the sandbox's environment marker or works in its folder, and the network is open.
type Python struct {
	Interpreter string
	Limits      Limits
	Persistent  bool

	sb      Config
	info    pyInfo
	strict  bool   // namespaces (sandbox_linux.go)
	spec    nsSpec // the strict sandbox's mounts, without the interpreter's argv
	root    bool   // sandboxes run under their own uids
	netns   bool
	uidBase int
	uids    chan int // free sandbox uids (root only)
	notes   []string
}

// uidBlock is how many sandboxes can exist at once as root (a persistent session holds one for
// its trajectory's life); a further one waits for a free uid or for its context.
const uidBlock = 1024

// NewPython is NewPythonWith with the default sandbox: strict isolation, the system python3.
func NewPython(lim Limits, persistent bool) (*Python, error) {
	return NewPythonWith(lim, persistent, Config{})
}

// NewPythonWith finds the interpreter and sets up the isolation sb asks for. Under strict
// isolation it fails, saying what is missing and how to enable it, when the machine cannot
// give it (CheckIsolation makes the same check).
func NewPythonWith(lim Limits, persistent bool, sb Config) (*Python, error) {
	sb = sb.withDefaults()
	if sb.Isolation != IsolationStrict && sb.Isolation != IsolationNone {
		return nil, fmt.Errorf("executor python: isolation %q is not one of strict, none", sb.Isolation)
	}
	interp, err := sb.interpreter()
	if err != nil {
		return nil, err
	}
	p := &Python{Interpreter: interp, Limits: lim.withDefaults(), Persistent: persistent, sb: sb}
	if p.info, err = interpreterInfo(interp, sb.Modules); err != nil {
		return nil, err
	}
	if sb.Isolation == IsolationStrict {
		return p, p.setupStrict()
	}
	if os.Geteuid() == 0 {
		// A block of uids no one else uses: high ones, chosen at random so that two executors
		// (or two processes) do not share a uid; low ones where the user namespace maps only 16 bits.
		for _, base := range uidBases() {
			if probe(p.Interpreter, base, 0) {
				p.root, p.uidBase = true, base
				break
			}
		}
		if !p.root {
			p.notes = append(p.notes, "running as root, but the child could not switch to a sandbox uid")
		}
	}
	if p.root {
		p.fillUIDs()
		p.netns = probe(p.Interpreter, p.uidBase, syscall.CLONE_NEWNET)
	}
	return p, nil
}

func uidBases() []int {
	return []int{1<<20 + rand.IntN(2000)*uidBlock, 61000 - uidBlock + rand.IntN(2)*uidBlock}
}

func (p *Python) fillUIDs() {
	p.uids = make(chan int, uidBlock)
	for i := 0; i < uidBlock; i++ {
		p.uids <- p.uidBase + i
	}
}

// setupStrict plans the sandbox's mounts, checks that the kernel builds it (as root under a
// sandbox uid, never host root) and that the interpreter runs inside.
func (p *Python) setupStrict() error {
	p.strict, p.netns = true, true
	spec, err := strictSpec(p.Interpreter, p.info, p.Limits)
	if err != nil {
		return err
	}
	p.spec = spec
	check := func(uid int) error { return probeNamespaces(spec, uid) }
	if p.sb.probe != nil {
		check = func(int) error { return p.sb.probe() }
	}
	if os.Geteuid() != 0 {
		if err := check(os.Getuid()); err != nil {
			return isolationRefused(err)
		}
	} else {
		var first error
		for _, base := range uidBases() {
			if err := check(base); err != nil {
				first = cmp.Or(first, err)
				continue
			}
			p.root, p.uidBase = true, base
			break
		}
		if !p.root {
			return isolationRefused(first)
		}
		p.fillUIDs()
	}
	r := (&freshSession{p: p}).Run(context.Background(), "pass")
	if r.Status != StatusOK {
		return fmt.Errorf("executor python: %s does not run inside the sandbox (%s %s): %s", p.Interpreter, r.Status, r.Detail, lastLines(r.Output, 4))
	}
	return nil
}

// strictSpec plans the mounts: /usr and the interpreter's prefixes read-only, top-level links
// such as /lib -> usr/lib as they are, and the site-packages folders reduced to the allowed
// modules.
func strictSpec(interp string, info pyInfo, lim Limits) (nsSpec, error) {
	spec := nsSpec{SizeMB: max(64, 4*lim.MaxFileMB), Hide: info.Sites, Allow: info.Allow}
	covered := func(path string) bool {
		return slices.ContainsFunc(spec.Base, func(b string) bool { return path == b || strings.HasPrefix(path, b+"/") })
	}
	add := func(path string) {
		if path == "" || path == "/" || covered(path) {
			return
		}
		if _, err := os.Stat(path); err == nil {
			spec.Base = append(spec.Base, path)
		}
	}
	add("/usr")
	for _, top := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		st, err := os.Lstat(top)
		switch {
		case err != nil:
		case st.Mode()&os.ModeSymlink != 0:
			spec.Links = append(spec.Links, top)
		case st.IsDir():
			add(top)
		}
	}
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return spec, fmt.Errorf("executor python: %w", err)
	}
	for _, d := range append(append([]string{filepath.Dir(interp), filepath.Dir(real)}, info.Prefixes...), info.Path...) {
		if d == "/" || strings.HasSuffix(d, ".zip") {
			continue
		}
		add(filepath.Clean(d))
	}
	for _, b := range spec.Base {
		if b == "/tmp" || strings.HasPrefix(b, "/tmp/") || b == "/proc" || strings.HasPrefix(b, "/proc/") {
			return spec, fmt.Errorf("executor python: the interpreter's folder %s cannot be bound into the sandbox (its /tmp and /proc are its own); install the interpreter elsewhere", b)
		}
	}
	return spec, nil
}

// Name is "python".
func (p *Python) Name() string { return "python" }

// Isolation describes what the sandbox enforces on this machine.
func (p *Python) Isolation() string {
	var parts []string
	if p.strict {
		parts = append(parts, "strict: own user, mount, PID, network, IPC and UTS namespaces",
			"reads only the interpreter, its standard library and allowed modules (read-only)",
			"writes only its private /work and /tmp (gone after the session)",
			"no network", "no other processes visible", "no capabilities",
			"rlimits (memory, CPU, processes, file size)")
		if p.root {
			parts = append(parts, "per-sandbox uid")
		}
	} else {
		parts = append(parts, "NONE (env.sandbox.isolation: none): the code can read every file this user can", "rlimits (memory, CPU, file size)", "fresh temp dir", "minimal environment")
		if p.root {
			parts = append(parts, "per-sandbox uid (process limit, leftover processes killed)")
		} else {
			parts = append(parts, "not root: process limit counts all of this user's processes; leftovers found by process group, environment marker and directory")
		}
		if p.netns {
			parts = append(parts, "no network (empty network namespace)")
		} else {
			parts = append(parts, "network NOT isolated")
		}
	}
	if note := p.info.moduleNote(); note != "" {
		parts = append(parts, note)
	}
	return strings.Join(append(parts, p.notes...), ", ")
}

// Strict reports whether the sandbox runs under strict isolation.
func (p *Python) Strict() bool { return p.strict }

// Modules lists the allowed modules that import in the interpreter and those that are missing.
func (p *Python) Modules() (ok []string, missing map[string]string) { return p.info.OK, p.info.Missing }

// probe reports whether python3 starts under uid with the clone flags.
func probe(python string, uid int, cloneflags uintptr) bool {
	cmd := exec.Command(python, "-I", "-c", "pass")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags,
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), NoSetGroups: true}}
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
_lim(resource.RLIMIT_NPROC, %d + int(os.environ.pop("AGENTRL_BASE_TASKS", "0")))
_lim(resource.RLIMIT_CORE, 0)
def _run(code, g):
    try:
        exec(compile(code, "<code>", "exec"), g)
        return 0
    except SystemExit as e:
        return 0 if e.code in (None, 0) else 1
    except BaseException as e:
        sys.stdout.flush()  # what the code printed comes before its traceback
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)  # without this frame
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

// script is the preamble for a sandbox allowed nproc processes (threads included) for its user.
func (p *Python) script(nproc int, persistent bool) string {
	l := p.Limits
	return fmt.Sprintf(preamble, l.MaxMemoryMB, int(l.Timeout.Seconds())+1, l.MaxFileMB, nproc, map[bool]string{false: "False", true: "True"}[persistent], l.MaxOutputBytes)
}

// sandbox is one python process's resources: uid, temp dir (isolation none), environment
// marker, and under strict isolation its PID namespace.
type sandbox struct {
	p      *Python
	uid    int
	dir    string
	token  string // AGENTRL_SANDBOX value, inherited by the sandbox's processes
	ns     string // strict: the PID namespace, "pid:[…]"
	interp int    // strict, persistent: the interpreter's pid (outside), once known
	exe    interface{ Close() error }
}

func (p *Python) newSandbox(ctx context.Context) (*sandbox, error) {
	s := &sandbox{p: p, uid: -1, token: fmt.Sprintf("%016x", rand.Uint64())}
	if !p.strict {
		dir, err := os.MkdirTemp("", "agentrl-py-")
		if err != nil {
			return nil, fmt.Errorf("executor python: temp dir: %w", err)
		}
		s.dir = dir
	}
	if p.root {
		select {
		case s.uid = <-p.uids:
		case <-ctx.Done():
			s.release()
			return nil, fmt.Errorf("executor python: all %d sandboxes are busy: %w", uidBlock, ctx.Err())
		}
		if s.dir != "" {
			if err := os.Chown(s.dir, s.uid, s.uid); err != nil {
				s.release()
				return nil, fmt.Errorf("executor python: chown %s: %w", s.dir, err)
			}
		}
	}
	return s, nil
}

// command starts the interpreter: one program from stdin, or (persistent) a framed-request loop.
func (s *sandbox) command(ctx context.Context, persistent bool) (*exec.Cmd, error) {
	nproc := s.p.Limits.MaxProcs
	if s.p.strict {
		uid := os.Getuid()
		if s.uid >= 0 {
			uid = s.uid
		}
		spec := s.p.spec
		spec.Argv = []string{s.p.Interpreter, "-I", "-c", s.p.script(nproc, persistent)}
		// One thread per BLAS and OpenMP pool: the pool runs executions in parallel, and a
		// thread per core in every sandbox would hit the process limit.
		spec.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + sandboxWork, "TMPDIR=" + sandboxTmp, "LANG=C.UTF-8",
			"PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8", "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"}
		nc, err := newNSCommand(ctx, spec, uid)
		if err != nil {
			return nil, fmt.Errorf("executor python: %w", err)
		}
		s.exe = nc.exe
		cmd := nc.cmd
		cmd.Cancel = func() error { return syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		return cmd, nil
	}
	if s.uid < 0 {
		// RLIMIT_NPROC counts every task of the user, this process's threads included.
		nproc += userTasks(os.Getuid())
	}
	cmd := exec.CommandContext(ctx, s.p.Interpreter, "-I", "-c", s.p.script(nproc, persistent))
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + s.dir, "TMPDIR=" + s.dir, "LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8", "AGENTRL_SANDBOX=" + s.token}
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
	return cmd, nil
}

// started records what a started command's sandbox is: its PID namespace (strict).
func (s *sandbox) started(cmd *exec.Cmd) {
	if s.exe != nil {
		s.exe.Close()
		s.exe = nil
	}
	if s.p.strict && cmd.Process != nil {
		s.ns = nsOf(cmd.Process.Pid)
	}
}

// reap kills every process left by the sandbox: the process group, and then every live process
// that procs finds. Under strict isolation killing the init (pid) ends the whole PID namespace.
// As root, kill -1 sent by the sandbox uid reaches all of its processes at once, faster than a
// fork bomb can add more.
func (s *sandbox) reap(pid int) {
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	for i := 0; i < 50; i++ {
		left := s.procs()
		if len(left) == 0 {
			return
		}
		if s.uid >= 0 && !s.p.strict {
			k := exec.Command("/bin/kill", "-9", "-1")
			k.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid), NoSetGroups: true}}
			_ = k.Run()
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapStrays kills the sandbox's processes other than keep (a persistent interpreter), so
// that nothing a call started outlives it.
func (s *sandbox) reapStrays(keep int) {
	for i := 0; i < 20; i++ {
		var left []int
		if s.p.strict {
			procs := nsProcs(s.ns)
			if s.interp == 0 {
				// The interpreter is the oldest process after the init: every other one descends
				// from it, so has a higher pid inside (the init's threads take the pids between).
				first := 0
				for pid, inner := range procs {
					if inner > 1 && (first == 0 || inner < procs[first]) {
						first = pid
					}
				}
				s.interp = first
			}
			for pid, inner := range procs {
				if inner > 1 && pid != s.interp {
					left = append(left, pid)
				}
			}
		} else {
			left = slices.DeleteFunc(s.procs(), func(p int) bool { return p == keep })
		}
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *sandbox) release() {
	if s.exe != nil {
		s.exe.Close()
		s.exe = nil
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
	if s.uid >= 0 {
		s.p.uids <- s.uid
		s.uid = -1
	}
}

// procs lists the live (not zombie) processes of the sandbox: those of its PID namespace under
// strict isolation; else those of its uid as root; otherwise those whose environment carries
// its marker or whose working directory is inside its directory (a process that clears both
// escapes; see Isolation).
func (s *sandbox) procs() []int {
	if s.p.strict {
		var pids []int
		for pid := range nsProcs(s.ns) {
			pids = append(pids, pid)
		}
		return pids
	}
	return scanProcs(func(pid string, uid int) bool {
		if s.uid >= 0 {
			return uid == s.uid
		}
		if uid != os.Getuid() {
			return false
		}
		if env, err := os.ReadFile(filepath.Join("/proc", pid, "environ")); err == nil && strings.Contains(string(env), "AGENTRL_SANDBOX="+s.token) {
			return true
		}
		cwd, err := os.Readlink(filepath.Join("/proc", pid, "cwd"))
		return err == nil && (cwd == s.dir || strings.HasPrefix(cwd, s.dir+"/"))
	})
}

// scanProcs returns the pids of live processes for which match holds, given the pid and real uid.
func scanProcs(match func(pid string, uid int) bool) []int {
	var pids []int
	eachProc(func(pid int, uid, _ int, live bool) {
		if live && pid != os.Getpid() && match(strconv.Itoa(pid), uid) {
			pids = append(pids, pid)
		}
	})
	return pids
}

// userTasks counts the threads of uid's processes, zombies included (the kernel counts them
// against RLIMIT_NPROC until they are reaped).
func userTasks(uid int) int {
	n := 0
	eachProc(func(_ int, u, threads int, _ bool) {
		if u == uid {
			n += threads
		}
	})
	return n
}

// eachProc calls f with the pid, real uid, thread count and liveness (not a zombie) of every
// process.
func eachProc(f func(pid, uid, threads int, live bool)) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		uid, threads, live := -1, 1, true
		for _, line := range strings.Split(string(data), "\n") {
			key, val, _ := strings.Cut(line, ":")
			fields := strings.Fields(val)
			if len(fields) == 0 {
				continue
			}
			switch key {
			case "State":
				live = fields[0] != "Z" && fields[0] != "X"
			case "Uid":
				uid, _ = strconv.Atoi(fields[0])
			case "Threads":
				threads, _ = strconv.Atoi(fields[0])
			}
		}
		if uid >= 0 {
			f(pid, uid, threads, live)
		}
	}
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
	sb, err := f.p.newSandbox(ctx)
	if err != nil {
		return Result{Status: StatusError, Output: err.Error()}
	}
	defer sb.release()
	ctx, cancel := context.WithTimeout(ctx, f.p.Limits.Timeout)
	defer cancel()
	cmd, err := sb.command(ctx, false)
	if err != nil {
		return Result{Status: StatusError, Output: err.Error(), Duration: time.Since(start)}
	}
	out := &truncating{limit: f.p.Limits.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Stdin = strings.NewReader(code)
	err = cmd.Start()
	sb.started(cmd)
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
	case p.strict && errors.As(err, &ee) && ee.ExitCode() == exitSetup:
		res.Status, res.Detail = StatusError, "the sandbox could not be built"
	case p.strict && errors.As(err, &ee) && ee.ExitCode() > exitSignal:
		res.Status = StatusKilled
		res.Detail = "killed by " + syscall.Signal(ee.ExitCode()-exitSignal).String() + " (a resource limit)"
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

func (s *persistentSession) start(ctx context.Context) error {
	sb, err := s.p.newSandbox(ctx)
	if err != nil {
		return err
	}
	cmd, err := sb.command(context.Background(), true)
	if err != nil {
		sb.release()
		return err
	}
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
	err = cmd.Start()
	sb.started(cmd)
	if err != nil {
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
		if err := s.start(ctx); err != nil {
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
		if r.err == nil {
			s.sb.reapStrays(s.cmd.Process.Pid)
		}
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
