package ui

import (
	"errors"
	"fmt"
)

// Controller receives the user's commands for the run being shown. The workbench calls it from
// tea commands, never from Update, so an implementation may block briefly or do I/O. A nil
// Controller is the read-only `view` of a finished run: the run-changing keys are hidden.
type Controller interface {
	Pause() error
	Resume() error
	// Stop asks the run to stop at its next safe point, recording reason, and returns what it
	// will do ("stopping now: the evaluation of step 0 is dropped; …"); "" when it has ended.
	Stop(reason string) (string, error)
	// MarkBest overrides the automatic choice of the best checkpoint.
	MarkBest(step int) error
	// Export writes a checkpoint out (e.g. as a HuggingFace folder) and says where.
	Export(step int) (string, error)
}

// Why the workbench stops a run, as the run records it.
const (
	ReasonQuit = "quit from the workbench" // q or ctrl+c on a live run
	ReasonStop = "stopped by the user"     // S, confirmed with y
)

// Action names a Controller command, for Supports.
type Action string

// The actions a Controller may support.
const (
	ActionPause    Action = "pause"
	ActionStop     Action = "stop"
	ActionMarkBest Action = "mark best"
	ActionExport   Action = "export"
)

// Funcs adapts plain functions to a Controller; a nil function is an unsupported command (its
// key is hidden, and calling it returns an error wrapping errors.ErrUnsupported).
type Funcs struct {
	PauseFn    func()
	ResumeFn   func()
	StopFn     func(reason string) string
	MarkBestFn func(step int) error
	ExportFn   func(step int) (string, error)
}

var _ Controller = Funcs{}

func unsupported(a Action) error {
	return fmt.Errorf("%s is not supported by this run: %w", a, errors.ErrUnsupported)
}

// Pause calls PauseFn.
func (f Funcs) Pause() error {
	if f.PauseFn == nil || f.ResumeFn == nil {
		return unsupported(ActionPause)
	}
	f.PauseFn()
	return nil
}

// Resume calls ResumeFn.
func (f Funcs) Resume() error {
	if f.PauseFn == nil || f.ResumeFn == nil {
		return unsupported(ActionPause)
	}
	f.ResumeFn()
	return nil
}

// Stop calls StopFn.
func (f Funcs) Stop(reason string) (string, error) {
	if f.StopFn == nil {
		return "", unsupported(ActionStop)
	}
	return f.StopFn(reason), nil
}

// MarkBest calls MarkBestFn.
func (f Funcs) MarkBest(step int) error {
	if f.MarkBestFn == nil {
		return unsupported(ActionMarkBest)
	}
	return f.MarkBestFn(step)
}

// Export calls ExportFn.
func (f Funcs) Export(step int) (string, error) {
	if f.ExportFn == nil {
		return "", unsupported(ActionExport)
	}
	return f.ExportFn(step)
}

// Supports reports whether the function behind a is set.
func (f Funcs) Supports(a Action) bool {
	switch a {
	case ActionPause:
		return f.PauseFn != nil && f.ResumeFn != nil
	case ActionStop:
		return f.StopFn != nil
	case ActionMarkBest:
		return f.MarkBestFn != nil
	case ActionExport:
		return f.ExportFn != nil
	}
	return false
}

// supports reports whether c can do a: never for nil, by its Supports method when it has one,
// else always.
func supports(c Controller, a Action) bool {
	if c == nil {
		return false
	}
	if s, ok := c.(interface{ Supports(Action) bool }); ok {
		return s.Supports(a)
	}
	return true
}
