package engine

import (
	"errors"
	"fmt"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/stopping"
	"agentrl/engine/train"
	"agentrl/store"
)

// Stop asks the run to stop at its next safe point and returns what it will do (also emitted as
// an event.Stopping): e.g. "stopping now: the evaluation of step 0 is dropped (12 of 128 tasks
// done); no step is trained yet, so there is no checkpoint to save". reason is recorded as the
// run's stop reason. A later call returns the plan in force (an earlier Stop's, even once the run
// has ended, or the run's own decision to end while it ends); it returns "" once a run that was
// not asked to stop has ended (finished, stopped early, failed). A paused run is released so that
// it can stop. See engine/stopping for what a stop keeps.
func (c *Controller) Stop(reason string) string {
	s, announce := c.stop.Ask(reason)
	if !announce {
		return s.Message
	}
	defer c.stop.Announced()
	c.Resume()
	c.emit(s)
	return s.Message
}

// decide ends the run on the controller's own account (the last step, early stopping), announcing
// it as a stop asked for is; done marks the run finished rather than stopped.
func (c *Controller) decide(reason string, done bool) {
	if s, ok := c.stop.Decide(reason, done); ok {
		c.emit(s)
	}
}

// update runs the step's update (run, which passes stop to the trainer's UpdateUntil), stoppable:
// it takes a host snapshot first when that is small, reports the update's progress for a stop's
// estimate, and when a stop discards it puts the snapshot back and returns stopping.ErrStop.
// Otherwise the step counts as trained from here on.
func (c *Controller) update(step int, run func(stop func(done, total int) bool) error) error {
	var snap *train.Snapshot
	if c.trainer.SnapshotBytes() <= stopping.SnapshotLimit {
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
	if err := c.stop.BeginUpdate(step, snap != nil); err != nil {
		return err
	}
	err := run(func(done, total int) bool {
		c.stop.UpdateProgress(done, total)
		c.opts.hooks.updating(done, total)
		return c.stop.Discarding()
	})
	if err != nil && !errors.Is(err, train.ErrStopped) {
		return err
	}
	if !c.stop.EndUpdate(step) {
		return nil
	}
	err = c.trainer.Restore(snap)
	snap = nil
	if err != nil {
		return err
	}
	return stopping.ErrStop
}

// finish records the run's end in the store and emits RunEnd: finished after the last step,
// stopped when a stop was asked for or decided, failed when err is not nil.
func (c *Controller) finish(err error) {
	st := c.stop.End()
	c.stop.Wait() // a Stop emitting now goes before the end
	finished := fmt.Sprintf("all %d steps done", c.recipe.Run.MaxSteps)
	if e := c.opts.Eval; e != nil {
		finished = fmt.Sprintf("evaluated %s on %s", e.Of, e.Set)
	}
	status, reason := st.Outcome(finished, err)
	end := event.RunEnd{Status: status, Reason: reason, BestStep: c.best.Choice(), Marked: c.best.Marked() > 0,
		Detail: st.Detail(), Step: st.Trained(), Checkpoint: st.Saved(), Evaluations: c.evals, EvalOnly: c.opts.Eval != nil}
	if c.opts.Store != nil {
		_ = c.updateRun(func(run *store.Run) {
			run.Status, run.StopReason, run.StopDetail, run.BestStep, run.Ended = status, reason, st.Detail(), end.BestStep, time.Now().UTC()
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
	detail := c.stop.End().AbortDetail()
	err := c.updateRun(func(run *store.Run) {
		run.Status, run.StopReason, run.StopDetail, run.Ended = "aborted", reason, detail, time.Now().UTC()
	})
	if cerr := s.Store.Close(); err == nil {
		err = cerr
	}
	return detail, err
}
