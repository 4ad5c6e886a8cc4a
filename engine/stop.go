package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/train"
	"agentrl/store"
)

// The stopping model. Every way a run ends — Stop (the workbench's q and S, Ctrl-C, SIGTERM,
// SIGHUP through the command line), the last step, early stopping — goes through one plan, made
// the moment the stop is asked for or decided and announced at once as an event.Stopping:
//
//   - generation is abandoned: a rollout, scoring or evaluation in progress is dropped, and so is
//     the step it belongs to when its update has not begun; an abandoned evaluation records
//     nothing (no pass@k is stored for its step), only the run's end says it was dropped;
//   - an update in progress is finished when it has little left (finishWithin), else discarded:
//     the weights and AdamW moments go back to the host snapshot taken before it (snapshots are
//     taken when they are small, snapshotLimit; without one the update is always finished);
//   - after an update, the step is kept: its metrics and trajectories are stored and the run
//     ends with its checkpoint; a checkpoint being written is finished.
//
// The run then saves its last trained step (none when no step was), and records its status
// (stopped, or finished after the last step) with the reason, what the stop dropped and when.
// The store is never half-written: bbolt commits are atomic, and a checkpoint exists only once
// its manifest, written last, is (see store.SaveCheckpoint).

// finishWithin is how much of an update a stop waits for rather than discarding it.
const finishWithin = 2 * time.Second

// snapshotLimit bounds the host copy taken before each update so that a stop can discard it:
// parameters and both moments (the built-in model's take 7 MiB; a 0.6B model's 7 GiB, which is
// not copied, and its updates are finished when a stop comes).
const snapshotLimit = 512 << 20

// errStop is a step's error when a stop cut it short; the controller's trained step says what
// of it was kept.
var errStop = errors.New("engine: the run is stopping")

// stage is where the run is: a step and the phase in progress ("" between steps).
type stage struct {
	step  int
	phase string
}

// stopState is the stopping model's state, guarded by Controller.stopMu.
type stopState struct {
	at      stage
	req     *event.Stopping // nil until a stop is asked for or decided
	asked   bool            // req came from Stop, not from the run's own decision
	done    bool            // the last step finished without a stop: the run is finished
	ended   bool            // RunEnd is on its way: Stop does nothing more
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

// Stop asks the run to stop at its next safe point and returns what it will do (also emitted as
// an event.Stopping): e.g. "stopping now: the evaluation of step 0 is dropped (12 of 128 tasks
// done); no step is trained yet, so there is no checkpoint to save". reason is recorded as the
// run's stop reason. A later call returns the plan in force (an earlier Stop's, even once the run
// has ended, or the run's own decision to end while it ends); it returns "" once a run that was
// not asked to stop has ended (finished, stopped early, failed). A paused run is released so that
// it can stop.
func (c *Controller) Stop(reason string) string {
	c.stopMu.Lock()
	if c.stop.req != nil || c.stop.ended {
		msg := ""
		if c.stop.req != nil && (c.stop.asked || !c.stop.ended) {
			msg = c.stop.req.Message
		}
		c.stopMu.Unlock()
		return msg
	}
	s, drop := c.planLocked(reason)
	c.stop.req, c.stop.asked = &s, true
	c.outside.Add(1)
	cancel := c.stop.cancel
	c.stopMu.Unlock()
	defer c.outside.Done()
	if drop && cancel != nil {
		cancel()
	}
	c.Resume()
	c.emit(s)
	return s.Message
}

// stopping reports whether a stop was asked for or decided.
func (c *Controller) stopping() bool {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	return c.stop.req != nil
}

// planLocked decides what a stop asked for now does, from where the run is; drop says the
// generation in progress is to be abandoned. stopMu held.
func (c *Controller) planLocked(reason string) (s event.Stopping, drop bool) {
	st := &c.stop
	n := st.at.step
	s = event.Stopping{Step: n, Phase: st.at.phase, Reason: reason}
	keep := func(step int) string {
		s.Save = max(step, 0)
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
		if c.opts.Eval != nil {
			s.Message = fmt.Sprintf("stopping now: the evaluation of step %d is dropped%s; an evaluation run keeps nothing else", n, done)
			return s, true
		}
		s.Message = fmt.Sprintf("stopping now: the evaluation of step %d is dropped%s; ", n, done) + keep(st.trained)
		return s, true
	case event.PhaseRollout, event.PhasePRM, event.PhaseScore:
		st.detail = fmt.Sprintf("step %d was dropped during its %s, before its update", n, st.at.phase)
		s.Message = fmt.Sprintf("stopping now: step %d's %s is dropped; ", n, st.at.phase) + keep(st.trained)
		return s, true
	case event.PhaseReference, event.PhaseAdvantage:
		st.detail = fmt.Sprintf("step %d was dropped before its update", n)
		s.Message = fmt.Sprintf("stopping: step %d is dropped before its update; ", n) + keep(st.trained)
	case event.PhaseTrain:
		left := c.updateLeftLocked()
		if st.canDrop && left > c.finishWithin.Seconds() {
			c.discard.Store(true)
			st.detail = fmt.Sprintf("the update of step %d was discarded", n)
			s.Message = fmt.Sprintf("stopping now: the update of step %d is discarded (the weights go back to step %d); ", n, st.trained) + keep(st.trained)
			break
		}
		about := ""
		if !math.IsInf(left, 1) {
			about = fmt.Sprintf(" (about %.0fs)", max(1, math.Round(left)))
		}
		s.Message = fmt.Sprintf("stopping: finishing the update of step %d%s, then ", n, about) + keep(n)
	case event.PhaseSync, event.PhaseSave:
		s.Message = fmt.Sprintf("stopping: step %d is trained; ", n) + keep(st.trained)
	default:
		s.Message = "stopping: " + keep(st.trained)
	}
	return s, false
}

// updateLeftLocked estimates the seconds left in the update in progress: from its own pace once
// a micro-batch is done, else from the last update; +Inf when there is nothing to go by.
func (c *Controller) updateLeftLocked() float64 {
	st := &c.stop
	elapsed := time.Since(st.updStart).Seconds()
	switch {
	case st.updDone > 0 && st.updTotal > 0:
		return elapsed / float64(st.updDone) * float64(st.updTotal-st.updDone)
	case st.lastTrain > 0:
		return max(st.lastTrain-elapsed, 0)
	}
	return math.Inf(1)
}

// decide ends the run on the controller's own account (the last step, early stopping), announcing
// it as a stop asked for is; done marks the run finished rather than stopped.
func (c *Controller) decide(reason string, done bool) {
	c.stopMu.Lock()
	if c.stop.req != nil {
		c.stopMu.Unlock()
		return
	}
	s, _ := c.planLocked(reason)
	if done {
		s.Message = "finishing: " + s.Message[len("stopping: "):]
	}
	c.stop.req, c.stop.done = &s, done
	c.stopMu.Unlock()
	c.emit(s)
}

// enter marks the start of a phase of step. It reports false, entering nothing, when a stop is
// pending: the phase is skipped and the step ends there.
func (c *Controller) enter(step int, phase string) bool {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stop.req != nil {
		return false
	}
	c.stop.at = stage{step, phase}
	return true
}

// pass marks the start of a phase that runs even when a stop is pending (those after an update).
func (c *Controller) pass(step int, phase string) {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	c.stop.at = stage{step, phase}
}

// noteEval records how far the evaluation in progress is, for a stop's plan.
func (c *Controller) noteEval(done, tasks int) {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	c.stop.evalDone, c.stop.evalTasks = done, tasks
}

// update runs the step's update (run, which passes stop to the trainer's UpdateUntil), stoppable:
// it takes a host snapshot first when that is small, reports the update's progress for a stop's
// estimate, and when a stop discards it puts the snapshot back and returns errStop. Otherwise
// the step counts as trained from here on.
func (c *Controller) update(step int, run func(stop func(done, total int) bool) error) error {
	var snap *train.Snapshot
	if c.trainer.SnapshotBytes() <= snapshotLimit {
		var err error
		if snap, err = c.trainer.Snapshot(); err != nil {
			return err
		}
		defer func() {
			if snap != nil {
				snap.Free()
			}
		}()
	}
	c.stopMu.Lock()
	if c.stop.req != nil {
		c.stopMu.Unlock()
		return errStop
	}
	c.stop.at = stage{step, event.PhaseTrain}
	c.stop.updDone, c.stop.updTotal, c.stop.updStart, c.stop.canDrop = 0, 0, time.Now(), snap != nil
	c.stopMu.Unlock()
	err := run(func(done, total int) bool {
		c.stopMu.Lock()
		c.stop.updDone, c.stop.updTotal = done, total
		c.stopMu.Unlock()
		if c.onUpdate != nil {
			c.onUpdate(done, total)
		}
		return c.discard.Load()
	})
	if err != nil && !errors.Is(err, train.ErrStopped) {
		return err
	}
	c.stopMu.Lock()
	discard := c.discard.Load() // a discard decided after the last micro-batch began holds too
	if !discard {
		c.stop.trained, c.stop.at.phase = step, event.PhaseSync
		c.stop.lastTrain = time.Since(c.stop.updStart).Seconds()
	}
	c.stopMu.Unlock()
	if !discard {
		return nil
	}
	err = c.trainer.Restore(snap)
	snap = nil
	if err != nil {
		return err
	}
	return errStop
}

// finish records the run's end in the store and emits RunEnd: finished after the last step,
// stopped when a stop was asked for or decided, failed when err is not nil.
func (c *Controller) finish(err error) {
	c.stopMu.Lock()
	st := c.stop
	c.stop.ended = true
	c.stopMu.Unlock()
	c.outside.Wait() // a Stop emitting now goes before the end
	status, reason := "finished", fmt.Sprintf("all %d steps done", c.recipe.Run.MaxSteps)
	if e := c.opts.Eval; e != nil {
		reason = fmt.Sprintf("evaluated %s on %s", e.Of, e.Set)
	}
	if st.req != nil && !st.done {
		status, reason = "stopped", st.req.Reason
	} else if st.req != nil {
		reason = st.req.Reason
	}
	if err != nil {
		status, reason = "failed", err.Error()
	}
	end := event.RunEnd{Status: status, Reason: reason, BestStep: c.bestChoice(), Marked: c.manualBest.Load() > 0,
		Detail: st.detail, Step: st.trained, Checkpoint: st.saved, Evaluations: c.evals, EvalOnly: c.opts.Eval != nil}
	if c.opts.Store != nil {
		_ = c.updateRun(func(run *store.Run) {
			run.Status, run.StopReason, run.StopDetail, run.BestStep, run.Ended = status, reason, st.detail, end.BestStep, time.Now().UTC()
		})
	}
	c.end = end
	c.emit(end)
}

// End is the run's end as its RunEnd event said; valid once Run has returned.
func (c *Controller) End() event.RunEnd { return c.end }

// Abort ends the session at once, for a second Ctrl-C: the run is recorded as aborted (with the
// step it was in and its latest checkpoint) and the store is closed, which waits only for a
// write in progress (bbolt commits atomically; a checkpoint whose manifest is not written is not
// there). It returns what it recorded ("aborted during the train of step 12; the latest
// checkpoint is step 10"). The controller is left running: the process is about to exit.
func (s *Session) Abort(reason string) (string, error) {
	c := s.Controller
	c.stopMu.Lock()
	st := c.stop
	c.stop.ended = true
	c.stopMu.Unlock()
	where := "between steps"
	if st.at.phase != "" {
		where = fmt.Sprintf("during the %s of step %d", st.at.phase, st.at.step)
	}
	detail := fmt.Sprintf("aborted %s; the latest checkpoint is step %d", where, st.saved)
	if st.saved == 0 {
		detail = fmt.Sprintf("aborted %s; no checkpoint", where)
	}
	err := c.updateRun(func(run *store.Run) {
		run.Status, run.StopReason, run.StopDetail, run.Ended = "aborted", reason, detail, time.Now().UTC()
	})
	if cerr := s.Store.Close(); err == nil {
		err = cerr
	}
	return detail, err
}
