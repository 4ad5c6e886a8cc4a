package cli

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Ways out of a run, and the exit status of each (the table in docs/stopping.md):
//
//   - q or ctrl+c in the workbench, S then y, the first Ctrl-C (SIGINT), the last step, early
//     stopping: the run stops at its next safe point (engine.Controller.Stop), saves its last
//     trained step and records why; exit 0.
//   - SIGTERM, SIGHUP: the same stop; exit 143 and 129 (128 + the signal), as a process ended
//     by that signal reports it, so that a supervisor sees it was stopped, not finished.
//   - a second signal (Ctrl-C, SIGTERM or SIGHUP) while the run stops: abort at once, recording
//     the run as aborted and closing the store between its writes; exit 128 + that signal (130
//     for Ctrl-C).
//   - the run fails: exit 1, after the error.

// stopSignals are the signals that stop a run.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// exitStatus is an error that only sets the process's exit status: what there was to say has been
// printed.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// signalReason is how a run records the signal that stopped it.
func signalReason(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "terminated (SIGTERM)"
	case syscall.SIGHUP:
		return "hung up (SIGHUP)"
	}
	return "interrupted (Ctrl-C)"
}

// signalName is sig as people name it.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return "Ctrl-C"
}

// signalStatus is the exit status for a run stopped by sig: 0 for the first Ctrl-C (a stop asked
// for at the keyboard), 128 + the signal otherwise.
func signalStatus(sig os.Signal, second bool) int {
	s, ok := sig.(syscall.Signal)
	switch {
	case !ok:
		return 1
	case s == syscall.SIGINT && !second:
		return 0
	}
	return 128 + int(s)
}

// stopper sees a run's process signals: the first asks the run to stop (stop, with the reason),
// a second aborts (abort, which returns what it did); aborted then gives the exit status.
type stopper struct {
	sigs    chan os.Signal
	stop    func(reason string)
	abort   func(reason string) string
	aborted chan int

	mu       sync.Mutex
	first    os.Signal
	aborting bool   // a second signal came: the process ends with aborted's status, whatever else ends
	ended    bool   // the run ended first and is being closed: a later signal changes nothing
	said     string // what abort did
}

// watch delivers the stop signals to s until the process ends.
func (s *stopper) watch() {
	for sig := range s.sigs {
		s.mu.Lock()
		if s.ended {
			// The run had ended when this signal was taken, and its session is being closed: an
			// abort now would close the store under the closing (and record nothing true).
			s.mu.Unlock()
			continue
		}
		first := s.first == nil
		if first {
			s.first = sig
		} else {
			s.aborting = true
		}
		s.mu.Unlock()
		if first {
			go s.stop(signalReason(sig)) // a stop may wait on a stalled stream; a second signal must not
			continue
		}
		reason := "aborted by a second " + signalName(sig)
		said := s.abort(reason)
		s.mu.Lock()
		s.said = reason + ": " + said
		s.mu.Unlock()
		s.aborted <- signalStatus(sig, true)
		return
	}
}

// endOrAbort is called when the run has ended: it reports whether a second signal came (the run
// aborts: wait for aborted), and otherwise marks the run ended, so that a signal taken from now on
// leaves the closing to the caller. Without the mark, a second signal taken just after the check
// aborted, and closed the store, while the caller closed it too.
func (s *stopper) endOrAbort() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.aborting {
		s.ended = true
	}
	return s.aborting
}

// status is the exit status of a run that ended by itself or on the first signal.
func (s *stopper) status() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		return 0
	}
	return signalStatus(s.first, false)
}
