//go:build unix && !linux

package external

import "syscall"

// groupAlive reports whether the group still has a process (zombies included: without /proc
// they cannot be told apart, so the wait for them is bounded by the grace period).
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) != syscall.ESRCH }
