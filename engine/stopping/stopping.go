// Package stopping is the stopping model of a run. Every way a run ends — a stop asked for (the
// workbench's q and S, Ctrl-C, SIGTERM, SIGHUP through the command line), the last step, early
// stopping — goes through one plan, made the moment the stop is asked for or decided and
// announced at once as an event.Stopping:
//
//   - generation is abandoned: a rollout, scoring or evaluation in progress is dropped, and so is
//     the step it belongs to when its update has not begun; an abandoned evaluation records
//     nothing (no pass@k is stored for its step), only the run's end says it was dropped;
//   - an update in progress is finished when it has little left (FinishWithin), else discarded:
//     the weights and AdamW moments go back to the host snapshot taken before it (snapshots are
//     taken when they are small, SnapshotLimit; without one the update is always finished);
//   - after an update, the step is kept: its metrics and trajectories are stored and the run
//     ends with its checkpoint; a checkpoint being written is finished.
//
// The run then saves its last trained step (none when no step was), and records its status
// (stopped, or finished after the last step) with the reason, what the stop dropped and when.
// The store is never half-written: bbolt commits are atomic, and a checkpoint exists only once
// its manifest, written last, is (see store.SaveCheckpoint).
//
// A Stopper keeps where the run is (Enter, Pass, the update's progress, the evaluation's) and
// makes the plan from it (Ask, Decide); the engine's Controller announces what it returns.
package stopping

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"agentrl/engine/event"
)

// FinishWithin is how much of an update a stop waits for rather than discarding it.
const FinishWithin = 2 * time.Second

// SnapshotLimit bounds the host copy taken before each update so that a stop can discard it:
// parameters and both moments (the built-in model's take 7 MiB; a 0.6B model's 7 GiB, which is
// not copied, and its updates are finished when a stop comes).
const SnapshotLimit = 512 << 20

// ErrStop is a step's error when a stop cut it short; the Stopper's trained step says what of it
// was kept.
var ErrStop = errors.New("engine: the run is stopping")

// stage is where the run is: a step and the phase in progress ("" between steps).
type stage struct {
	step  int
	phase string
}

// State is the stopping model's state: where the run is, the stop asked for or decided, and
// what the run has kept.
type State struct {
	at      stage
	req     *event.Stopping // nil until a stop is asked for or decided
	asked   bool            // req came from Ask, not from the run's own decision
	done    bool            // the last step finished without a stop: the run is finished
	ended   bool            // RunEnd is on its way: Ask does nothing more
	detail  string          // what the stop dropped, for the run's end
	trained int             // the last step whose update is complete
	saved   int             // the step of the latest checkpoint written by this run (or resumed from)
	cancel  context.CancelFunc
	// the update in progress: micro-batches done of total since start; canDrop when its
	// snapshot was taken
	updDone, updTotal int
	updStart          time.Time
	canDrop           bool
	lastTrain         float64 // seconds the last update took
	// the evaluation in progress: tasks with every sample finished, of all
	evalDone, evalTasks int
}

// Stopper holds a run's stopping model; its methods may be called from any goroutine.
type Stopper struct {
	// FinishWithin is how much of an update a stop waits for (FinishWithin; tests change it
	// before the run starts).
	FinishWithin time.Duration
	evalOnly     bool // an evaluation-only run: a stop keeps nothing but the run's end

	mu      sync.Mutex
	st      State
	discard atomic.Bool    // the update in progress is to be discarded
	outside sync.WaitGroup // stops asked for whose announcement is on its way
}

// New is the stopping model of a run that has not started; evalOnly for an evaluation-only run.
func New(evalOnly bool) *Stopper { return &Stopper{FinishWithin: FinishWithin, evalOnly: evalOnly} }

// Begin is the run's start: cancel abandons its generation when a stop's plan drops it.
func (s *Stopper) Begin(cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.cancel = cancel
}

// Resumed says the run continues from the checkpoint of step: trained and saved.
func (s *Stopper) Resumed(step int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.trained, s.st.saved = step, step
}

// Ask asks the run to stop at its next safe point: the plan, to announce (announce true; then
// Announced once it is announced), e.g. "stopping now: the evaluation of step 0 is dropped (12 of
// 128 tasks done); no step is trained yet, so there is no checkpoint to save". A plan that drops
// the generation in progress cancels it. A later call returns, not to announce, the plan in force
// (an earlier Ask's, even once the run has ended, or the run's own decision to end while it
// ends); its Message is "" once a run that was not asked to stop has ended.
func (s *Stopper) Ask(reason string) (plan event.Stopping, announce bool) {
	s.mu.Lock()
	if s.st.req != nil || s.st.ended {
		var in event.Stopping
		if s.st.req != nil && (s.st.asked || !s.st.ended) {
			in.Message = s.st.req.Message
		}
		s.mu.Unlock()
		return in, false
	}
	plan, drop := s.planLocked(reason)
	s.st.req, s.st.asked = &plan, true
	s.outside.Add(1)
	cancel := s.st.cancel
	s.mu.Unlock()
	if drop && cancel != nil {
		cancel()
	}
	return plan, true
}

// Announced says the plan Ask returned to announce went out.
func (s *Stopper) Announced() { s.outside.Done() }

// Stopping reports whether a stop was asked for or decided.
func (s *Stopper) Stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.req != nil
}

// planLocked decides what a stop asked for now does, from where the run is; drop says the
// generation in progress is to be abandoned. mu held.
func (s *Stopper) planLocked(reason string) (p event.Stopping, drop bool) {
	st := &s.st
	n := st.at.step
	p = event.Stopping{Step: n, Phase: st.at.phase, Reason: reason}
	keep := func(step int) string {
		p.Save = max(step, 0)
		switch {
		case step <= 0:
			return "no step is trained yet, so there is no checkpoint to save"
		case step == st.saved:
			return fmt.Sprintf("the checkpoint of step %d is kept", step)
		}
		return fmt.Sprintf("saving step %d", step)
	}
	switch st.at.phase {
	case event.PhaseEval:
		done := ""
		if st.evalTasks > 0 {
			done = fmt.Sprintf(" (%d of %d tasks done)", st.evalDone, st.evalTasks)
		}
		st.detail = fmt.Sprintf("the evaluation of step %d was dropped%s", n, done)
		if s.evalOnly {
			p.Message = fmt.Sprintf("stopping now: the evaluation of step %d is dropped%s; an evaluation run keeps nothing else", n, done)
			return p, true
		}
		p.Message = fmt.Sprintf("stopping now: the evaluation of step %d is dropped%s; ", n, done) + keep(st.trained)
		return p, true
	case event.PhaseRollout, event.PhasePRM, event.PhaseScore:
		st.detail = fmt.Sprintf("step %d was dropped during its %s, before its update", n, st.at.phase)
		p.Message = fmt.Sprintf("stopping now: step %d's %s is dropped; ", n, st.at.phase) + keep(st.trained)
		return p, true
	case event.PhaseReference, event.PhaseAdvantage:
		st.detail = fmt.Sprintf("step %d was dropped before its update", n)
		p.Message = fmt.Sprintf("stopping: step %d is dropped before its update; ", n) + keep(st.trained)
	case event.PhaseTrain:
		left := s.updateLeftLocked()
		if st.canDrop && left > s.FinishWithin.Seconds() {
			s.discard.Store(true)
			st.detail = fmt.Sprintf("the update of step %d was discarded", n)
			p.Message = fmt.Sprintf("stopping now: the update of step %d is discarded (the weights go back to step %d); ", n, st.trained) + keep(st.trained)
			break
		}
		about := ""
		if !math.IsInf(left, 1) {
			about = fmt.Sprintf(" (about %.0fs)", max(1, math.Round(left)))
		}
		p.Message = fmt.Sprintf("stopping: finishing the update of step %d%s, then ", n, about) + keep(n)
	case event.PhaseSync, event.PhaseSave:
		p.Message = fmt.Sprintf("stopping: step %d is trained; ", n) + keep(st.trained)
	default:
		p.Message = "stopping: " + keep(st.trained)
	}
	return p, false
}

// updateLeftLocked estimates the seconds left in the update in progress: from its own pace once
// a micro-batch is done, else from the last update; +Inf when there is nothing to go by.
func (s *Stopper) updateLeftLocked() float64 {
	st := &s.st
	elapsed := time.Since(st.updStart).Seconds()
	switch {
	case st.updDone > 0 && st.updTotal > 0:
		return elapsed / float64(st.updDone) * float64(st.updTotal-st.updDone)
	case st.lastTrain > 0:
		return max(st.lastTrain-elapsed, 0)
	}
	return math.Inf(1)
}

// Decide ends the run on its own account (the last step, early stopping) with a plan to announce
// as a stop asked for is (ok false, nothing decided, when a stop is already in force); done marks
// the run finished rather than stopped.
func (s *Stopper) Decide(reason string, done bool) (plan event.Stopping, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.req != nil {
		return event.Stopping{}, false
	}
	plan, _ = s.planLocked(reason)
	if done {
		plan.Message = "finishing: " + plan.Message[len("stopping: "):]
	}
	s.st.req, s.st.done = &plan, done
	return plan, true
}

// Enter marks the start of a phase of step. It reports false, entering nothing, when a stop is
// pending: the phase is skipped and the step ends there.
func (s *Stopper) Enter(step int, phase string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.req != nil {
		return false
	}
	s.st.at = stage{step, phase}
	return true
}

// Pass marks the start of a phase that runs even when a stop is pending (those after an update).
func (s *Stopper) Pass(step int, phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.at = stage{step, phase}
}

// NoteEval records how far the evaluation in progress is, for a stop's plan.
func (s *Stopper) NoteEval(done, tasks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.evalDone, s.st.evalTasks = done, tasks
}

// BeginUpdate marks the start of step's update, which a stop may discard when canDrop (a
// snapshot to go back to was taken); ErrStop when a stop is pending: the update does not run.
func (s *Stopper) BeginUpdate(step int, canDrop bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.req != nil {
		return ErrStop
	}
	s.st.at = stage{step, event.PhaseTrain}
	s.st.updDone, s.st.updTotal, s.st.updStart, s.st.canDrop = 0, 0, time.Now(), canDrop
	return nil
}

// UpdateProgress records the update's progress, done micro-batches of total, for a stop's
// estimate of what is left.
func (s *Stopper) UpdateProgress(done, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.updDone, s.st.updTotal = done, total
}

// Discarding reports whether a stop discards the update in progress.
func (s *Stopper) Discarding() bool { return s.discard.Load() }

// EndUpdate marks the end of step's update: discarded when a stop discards it (one decided after
// its last micro-batch began included), else the step counts as trained from here on.
func (s *Stopper) EndUpdate(step int) (discarded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.discard.Load() {
		return true
	}
	s.st.trained, s.st.at.phase = step, event.PhaseSync
	s.st.lastTrain = time.Since(s.st.updStart).Seconds()
	return false
}

// NoteSaved records that the checkpoint of step is written.
func (s *Stopper) NoteSaved(step int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.saved = step
}

// LastSaved is the step of the latest checkpoint written by this run (or resumed from), 0 none.
func (s *Stopper) LastSaved() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.saved
}

// Trained is the last step whose update is complete.
func (s *Stopper) Trained() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.trained
}

// End marks the run's end on its way (Ask plans nothing more) and returns the state it ends in.
func (s *Stopper) End() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	s.st.ended = true
	return st
}

// Wait waits for the announcements of stops asked for before End: they go before the end.
func (s *Stopper) Wait() { s.outside.Wait() }

// Outcome is the status and reason a run ending in st records: finished (with reason finished)
// after the last step, stopped when a stop was asked for or decided, failed when err is not nil.
func (st State) Outcome(finished string, err error) (status, reason string) {
	status, reason = "finished", finished
	if st.req != nil && !st.done {
		status, reason = "stopped", st.req.Reason
	} else if st.req != nil {
		reason = st.req.Reason
	}
	if err != nil {
		status, reason = "failed", err.Error()
	}
	return status, reason
}

// Detail is what the stop dropped, for the run's end ("" nothing).
func (st State) Detail() string { return st.detail }

// Trained is the last step whose update is complete.
func (st State) Trained() int { return st.trained }

// Saved is the step of the latest checkpoint written by the run (or resumed from), 0 none.
func (st State) Saved() int { return st.saved }

// AbortDetail is what an abort of a run in st records: where it was and its latest checkpoint
// ("aborted during the train of step 12; the latest checkpoint is step 10").
func (st State) AbortDetail() string {
	where := "between steps"
	if st.at.phase != "" {
		where = fmt.Sprintf("during the %s of step %d", st.at.phase, st.at.step)
	}
	if st.saved == 0 {
		return fmt.Sprintf("aborted %s; no checkpoint", where)
	}
	return fmt.Sprintf("aborted %s; the latest checkpoint is step %d", where, st.saved)
}
