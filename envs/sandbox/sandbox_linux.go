//go:build linux

// Strict isolation on Linux: each python session runs in its own user, mount, PID, network, IPC
// and UTS namespaces, built by this package itself rather than by bubblewrap or Landlock.
//
// Why namespaces built in Go: they work as root and as an ordinary user wherever unprivileged
// user namespaces are enabled (every mainstream kernel since 3.8, on by default in Debian ≥ 11,
// Fedora, Arch; Ubuntu ≥ 23.10 restricts them through AppArmor), they give network isolation
// and a private /proc, which Landlock (kernel ≥ 5.13, and not enabled everywhere) does not, and
// they need no extra program: bubblewrap would do the same but is not installed by default, and
// one more runtime dependency is one more way for a run to fail on a new machine.
//
// How: the parent starts its own executable (through an fd of /proc/self/exe, so that a sandbox
// uid that cannot reach the binary's folder can still run it) with CLONE_NEWUSER|NEWNS|NEWPID|
// NEWNET|NEWIPC|NEWUTS and the caller's uid mapped to root inside (as root: a per-sandbox
// unprivileged uid, never host root). The child, recognised by the AGENTRL_SANDBOX_INIT
// variable in this package's init function before anything else runs, builds a new root on a
// tmpfs: read-only binds of /usr and the interpreter's prefixes, the interpreter's site-packages
// folders replaced by read-only views holding only the allowed modules, /dev/{null,zero,full,
// random,urandom}, a fresh /proc of the new PID namespace, a generated /etc, and a writable
// /work and /tmp on the same size-limited tmpfs. It pivots into it, detaches the old root,
// remounts the new root read-only, drops every capability (bounding set, securebits locked,
// no_new_privs), and runs the interpreter as its child while it stays PID 1 and reaps. The
// network namespace has only a loopback that is down. When the interpreter exits, the PID
// namespace (and every process the code left) dies with the init, and the tmpfs with the mount
// namespace: nothing is written on the host and nothing persists between sessions.

package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// initEnv marks the sandbox init: its value is the JSON nsSpec.
const initEnv = "AGENTRL_SANDBOX_INIT"

// Exit statuses of the init besides the interpreter's own.
const (
	exitSetup  = 125 // building the sandbox failed; stderr says which step
	exitSignal = 128 // + signal number: the interpreter was killed by a signal
)

// Paths inside the sandbox.
const (
	sandboxWork = "/work"
	sandboxTmp  = "/tmp"
)

// nsSpec is what the init needs to build the sandbox and start the interpreter.
type nsSpec struct {
	Base   []string // host paths bound read-only at the same place: /usr, the interpreter's prefixes
	Links  []string // top-level symlinks copied as they are, e.g. /lib -> usr/lib
	Hide   []string // site-packages folders replaced by an empty read-only folder …
	Allow  []string // … into which these files and folders are bound back read-only
	SizeMB int      // the writable tmpfs (/work and /tmp)
	Argv   []string // the interpreter's argv; Argv[0] is its path; empty: only check the setup
	Env    []string
}

func init() {
	// The sandbox's init is this package's binary started again (see the file comment); it must
	// take over before main runs, in the real binary and in test binaries alike.
	if v, ok := os.LookupEnv(initEnv); ok {
		sandboxInit(v)
	}
}

// sandboxInit builds the sandbox and runs the interpreter; it never returns.
func sandboxInit(specJSON string) {
	runtime.LockOSThread() // the capability drop and the fork below happen on this thread
	var spec nsSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		initFail("spec", err)
	}
	_ = os.Unsetenv(initEnv)
	syscall.CloseOnExec(3) // the binary's fd the parent passed
	tasks, err := buildRoot(spec)
	if err != nil {
		initFail("setup", err)
	}
	if err := dropPrivileges(); err != nil {
		initFail("drop privileges", err)
	}
	if len(spec.Argv) == 0 {
		os.Exit(0)
	}
	env := append(slices.Clip(spec.Env), "AGENTRL_BASE_TASKS="+strconv.Itoa(tasks))
	pid, err := syscall.ForkExec(spec.Argv[0], spec.Argv, &syscall.ProcAttr{Dir: sandboxWork, Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		initFail("start "+spec.Argv[0], err)
	}
	for { // PID 1: reap every orphan; leave with the interpreter (the kernel kills the rest)
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			os.Exit(exitSetup)
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			os.Exit(exitSignal + int(ws.Signal()))
		}
		os.Exit(ws.ExitStatus())
	}
}

func initFail(step string, err error) {
	fmt.Fprintf(os.Stderr, "sandbox: %s: %v\n", step, err)
	os.Exit(exitSetup)
}

// buildRoot makes the new root on a tmpfs, pivots into it and returns how many tasks (threads)
// the init itself has, which count against the interpreter's process limit.
func buildRoot(spec nsSpec) (int, error) {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return 0, fmt.Errorf("make mounts private: %w", err)
	}
	root := "/tmp" // any folder serves as the mount point; it is hidden by the new root
	size := max(spec.SizeMB, 8)
	if err := syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%dm,nr_inodes=16384,mode=0755", size)); err != nil {
		return 0, fmt.Errorf("tmpfs: %w", err)
	}
	for _, p := range spec.Base {
		if err := bindRO(p, root+p); err != nil {
			return 0, err
		}
	}
	for _, l := range spec.Links {
		target, err := os.Readlink(l)
		if err != nil {
			return 0, err
		}
		if err := os.Symlink(target, root+l); err != nil {
			return 0, err
		}
	}
	for _, h := range spec.Hide {
		if _, err := os.Stat(root + h); err != nil {
			continue // not under a bound folder
		}
		if err := syscall.Mount("tmpfs", root+h, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=1m,mode=0755"); err != nil {
			return 0, fmt.Errorf("hide %s: %w", h, err)
		}
	}
	for _, a := range spec.Allow {
		if err := bindRO(a, root+a); err != nil {
			return 0, err
		}
	}
	for _, h := range spec.Hide {
		_ = syscall.Mount("", root+h, "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "")
	}
	// /dev: the harmless devices, bound from the host.
	if err := os.MkdirAll(root+"/dev", 0o755); err != nil {
		return 0, err
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		if err := os.WriteFile(root+"/dev/"+d, nil, 0o666); err != nil {
			return 0, err
		}
		if err := syscall.Mount("/dev/"+d, root+"/dev/"+d, "", syscall.MS_BIND, ""); err != nil {
			return 0, fmt.Errorf("bind /dev/%s: %w", d, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		_ = os.Symlink(target, root+"/dev/"+name)
	}
	// /proc of the new PID namespace: mounted before the old root goes (the kernel allows a new
	// proc only while a full one is visible). Without it the code simply has no /proc.
	tasks := 8
	if err := os.Mkdir(root+"/proc", 0o555); err != nil {
		return 0, err
	}
	if syscall.Mount("proc", root+"/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "") == nil {
		if n := procThreads(root + "/proc/self/status"); n > 0 {
			tasks = n + 4 // room for threads the Go runtime may add
		}
	}
	// /etc: generated; of the host's only what the loader needs.
	if err := os.Mkdir(root+"/etc", 0o755); err != nil {
		return 0, err
	}
	for name, text := range map[string]string{
		"passwd": "root:x:0:0:sandbox:/work:/bin/sh\n", "group": "root:x:0:\n",
		"hosts": "127.0.0.1 localhost\n", "hostname": "sandbox\n",
	} {
		if err := os.WriteFile(root+"/etc/"+name, []byte(text), 0o644); err != nil {
			return 0, err
		}
	}
	// The loader cache and Debian's alternatives (libblas.so.3 for numpy is a link through them).
	for _, f := range []string{"/etc/ld.so.cache", "/etc/alternatives"} {
		if _, err := os.Stat(f); err == nil {
			if err := bindRO(f, root+f); err != nil {
				return 0, err
			}
		}
	}
	// The writable part: /work and /tmp, each its own mount so that the root can go read-only.
	for _, d := range []string{sandboxWork, sandboxTmp} {
		if err := os.Mkdir(root+d, 0o777|os.ModeSticky); err != nil {
			return 0, err
		}
		if err := syscall.Mount(root+d, root+d, "", syscall.MS_BIND, ""); err != nil {
			return 0, fmt.Errorf("bind %s: %w", d, err)
		}
	}
	_ = syscall.Sethostname([]byte("sandbox"))
	// pivot_root(".", ".") stacks the old root under the new one; detaching it leaves nothing of
	// the host but the binds above.
	if err := syscall.Chdir(root); err != nil {
		return 0, err
	}
	if err := syscall.PivotRoot(".", "."); err != nil {
		return 0, fmt.Errorf("pivot_root: %w", err)
	}
	if err := syscall.Unmount(".", syscall.MNT_DETACH); err != nil {
		return 0, fmt.Errorf("detach the old root: %w", err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return 0, err
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		return 0, fmt.Errorf("read-only root: %w", err)
	}
	return tasks, syscall.Chdir(sandboxWork)
}

// bindRO binds the host path src at dst (created as a folder or an empty file) read-only,
// keeping the flags the kernel locks on mounts inherited from the host.
func bindRO(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if st.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.WriteFile(dst, nil, 0o644)
		}
	}
	if err != nil {
		return err
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV)
	var fs syscall.Statfs_t
	if syscall.Statfs(src, &fs) == nil {
		for st, ms := range map[int64]uintptr{0x8: syscall.MS_NOEXEC, 0x400: syscall.MS_NOATIME, 0x800: syscall.MS_NODIRATIME, 0x1000: syscall.MS_RELATIME} {
			if fs.Flags&st != 0 {
				flags |= ms
			}
		}
	}
	if err := syscall.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("read-only %s: %w", src, err)
	}
	return nil
}

func procThreads(status string) int {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// dropPrivileges empties this thread's capabilities for good: the bounding and ambient sets,
// securebits that stop root (inside) from regaining them at exec, no_new_privs, and the init is
// not dumpable (the code cannot read its memory or environment).
func dropPrivileges() error {
	const (
		prSetDumpable    = 4
		prCapbsetDrop    = 24
		prSetSecurebits  = 28
		prSetNoNewPrivs  = 38
		prCapAmbient     = 47
		prCapAmbientClr  = 4
		securebitsLocked = 0x2f // NOROOT, NOROOT_LOCKED, NO_SETUID_FIXUP, its lock, KEEP_CAPS_LOCKED
	)
	prctl := func(op, arg uintptr) error {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, op, arg, 0, 0, 0, 0); e != 0 {
			return e
		}
		return nil
	}
	_ = prctl(prSetDumpable, 0)
	for c := uintptr(0); c < 64; c++ {
		if err := prctl(prCapbsetDrop, c); err != nil && err != syscall.EINVAL {
			return fmt.Errorf("bounding set: %w", err)
		}
	}
	_ = prctl(prCapAmbient, prCapAmbientClr)
	if err := prctl(prSetSecurebits, securebitsLocked); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	hdr := struct {
		version uint32
		pid     int32
	}{0x20080522, 0} // _LINUX_CAPABILITY_VERSION_3
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return prctl(prSetNoNewPrivs, 1)
}

// nsCommand is the parent side: a command that starts the init in fresh namespaces, mapping
// hostUID (the caller's own, or as root a sandbox uid) to root inside.
type nsCommand struct {
	cmd *exec.Cmd
	exe *os.File
}

const nsFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// newNSCommand prepares the init for spec; Close releases the binary's fd after Start.
func newNSCommand(ctx context.Context, spec nsSpec, hostUID int) (*nsCommand, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("open own executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, "/proc/self/fd/3")
	cmd.Args = []string{"agentrl-sandbox"}
	cmd.ExtraFiles = []*os.File{exe}
	cmd.Dir = "/"
	// HOME for the package inits of this binary that run before the init takes over (go-xla's
	// logs "$HOME is not defined" otherwise, and the line would open every observation); the
	// interpreter gets spec.Env.
	cmd.Env = []string{initEnv + "=" + string(data), "HOME=/"}
	gid := hostUID
	if hostUID == os.Getuid() {
		gid = os.Getgid()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  nsFlags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: hostUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		Setpgid:     true,
		Pdeathsig:   syscall.SIGKILL,
	}
	if hostUID != os.Getuid() {
		// Root handing the sandbox to another uid: the child switches to it (root inside is
		// that uid outside) and drops root's supplementary groups.
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	return &nsCommand{cmd: cmd, exe: exe}, nil
}

// nsOf returns the PID namespace of pid ("pid:[…]"), or "" when it is gone.
func nsOf(pid int) string {
	ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return ns
}

// nsProcs lists the live processes of the PID namespace ns with their pid inside it.
func nsProcs(ns string) map[int]int {
	procs := map[int]int{}
	if ns == "" {
		return procs
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || nsOf(pid) != ns {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		inner, live := 0, true
		for _, line := range strings.Split(string(data), "\n") {
			key, val, _ := strings.Cut(line, ":")
			f := strings.Fields(val)
			switch {
			case key == "State" && len(f) > 0:
				live = f[0] != "Z" && f[0] != "X"
			case key == "NSpid" && len(f) > 0:
				inner, _ = strconv.Atoi(f[len(f)-1])
			}
		}
		if live {
			procs[pid] = inner
		}
	}
	return procs
}

// probeNamespaces builds a sandbox (without an interpreter) under hostUID and reports why not.
func probeNamespaces(spec nsSpec, hostUID int) error {
	spec.Argv = nil
	nc, err := newNSCommand(context.Background(), spec, hostUID)
	if err != nil {
		return err
	}
	defer nc.exe.Close()
	out, err := nc.cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w (%s)", err, msg)
		}
		return err
	}
	return nil
}

// isolationHint names the kernel settings that commonly forbid unprivileged user namespaces.
func isolationHint() string {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	var hints []string
	if read("/proc/sys/kernel/unprivileged_userns_clone") == "0" {
		hints = append(hints, "unprivileged user namespaces are off: sudo sysctl -w kernel.unprivileged_userns_clone=1")
	}
	if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" {
		hints = append(hints, "AppArmor restricts unprivileged user namespaces (Ubuntu ≥ 23.10): sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give agentrl-tui an AppArmor profile with the userns permission")
	}
	if read("/proc/sys/user/max_user_namespaces") == "0" {
		hints = append(hints, "user.max_user_namespaces is 0: sudo sysctl -w user.max_user_namespaces=15000")
	}
	if len(hints) == 0 {
		hints = append(hints, "enable unprivileged user namespaces (kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, and in a container a seccomp profile that allows clone with CLONE_NEWUSER, e.g. docker --security-opt seccomp=unconfined)")
	}
	return strings.Join(hints, "; ")
}
