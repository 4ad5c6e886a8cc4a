//go:build !unix

package external

import (
	"os"
	"syscall"
	"time"
)

// Without process groups only the agent itself can be stopped; what it started may outlive it.

const (
	sigTerm = 0
	sigKill = 1
)

func groupAttr() *syscall.SysProcAttr { return nil }

func signalGroup(pid int, sig int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

func exitStatus(ps *os.ProcessState) (int, string) {
	if ps == nil {
		return -1, ""
	}
	return ps.ExitCode(), ""
}

func waitGroupGone(int, time.Duration) {}
