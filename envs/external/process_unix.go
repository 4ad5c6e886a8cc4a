//go:build unix

package external

import (
	"os"
	"syscall"
	"time"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// groupAttr starts the agent as the leader of a new process group, so that everything it starts
// can be signalled at once.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to every process of the group; a group already gone is no error.
func signalGroup(pgid int, sig syscall.Signal) { _ = syscall.Kill(-pgid, sig) }

// exitStatus returns the exit code (-1 after a signal) and the signal's name ("" when it exited).
func exitStatus(ps *os.ProcessState) (int, string) {
	if ps == nil {
		return -1, ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, signalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
		syscall.SIGHUP: "SIGHUP", syscall.SIGILL: "SIGILL", syscall.SIGINT: "SIGINT",
		syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGSEGV: "SIGSEGV", syscall.SIGTERM: "SIGTERM", syscall.SIGUSR1: "SIGUSR1",
		syscall.SIGUSR2: "SIGUSR2", syscall.SIGXCPU: "SIGXCPU",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return "signal " + s.String()
}

// waitGroupGone waits, up to limit, until no live process is left in the group: a SIGKILL is
// delivered asynchronously, and the caller promises that nothing of the agent outlives Run.
func waitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for delay := 50 * time.Microsecond; groupAlive(pgid) && time.Now().Before(deadline); delay = min(2*delay, 10*time.Millisecond) {
		time.Sleep(delay)
	}
}
