package stopping

import (
	"testing"
	"time"

	"agentrl/engine/event"
)

// TestStopPlan: what a stop announces and keeps, from where the run is when it is asked for.
func TestStopPlan(t *testing.T) {
	ago := func(s float64) time.Time { return time.Now().Add(-time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name    string
		st      State
		want    string
		save    int
		drop    bool
		discard bool
	}{
		{name: "start evaluation", st: State{at: stage{0, event.PhaseEval}, evalDone: 12, evalTasks: 128},
			want: "stopping now: the evaluation of step 0 is dropped (12 of 128 tasks done); no step is trained yet, so there is no checkpoint to save", drop: true},
		{name: "evaluation after a step", st: State{at: stage{15, event.PhaseEval}, trained: 15, saved: 10, evalDone: 3, evalTasks: 4},
			want: "stopping now: the evaluation of step 15 is dropped (3 of 4 tasks done); saving step 15", save: 15, drop: true},
		{name: "rollout", st: State{at: stage{12, event.PhaseRollout}, trained: 11, saved: 11},
			want: "stopping now: step 12's rollout is dropped; the checkpoint of step 11 is kept", save: 11, drop: true},
		{name: "reference", st: State{at: stage{3, event.PhaseReference}, trained: 2},
			want: "stopping: step 3 is dropped before its update; saving step 2", save: 2},
		{name: "update with much to go", st: State{at: stage{12, event.PhaseTrain}, trained: 11, canDrop: true, updDone: 1, updTotal: 8, updStart: ago(1)},
			want: "stopping now: the update of step 12 is discarded (the weights go back to step 11); saving step 11", save: 11, discard: true},
		{name: "update nearly done", st: State{at: stage{12, event.PhaseTrain}, trained: 11, canDrop: true, updDone: 7, updTotal: 8, updStart: ago(7)},
			want: "stopping: finishing the update of step 12 (about 1s), then saving step 12", save: 12},
		{name: "update without a snapshot", st: State{at: stage{12, event.PhaseTrain}, trained: 11, updDone: 1, updTotal: 8, updStart: ago(1)},
			want: "stopping: finishing the update of step 12 (about 7s), then saving step 12", save: 12},
		{name: "update not timed yet", st: State{at: stage{1, event.PhaseTrain}, canDrop: true, updStart: time.Now()},
			want: "stopping now: the update of step 1 is discarded (the weights go back to step 0); no step is trained yet, so there is no checkpoint to save", discard: true},
		{name: "sync", st: State{at: stage{12, event.PhaseSync}, trained: 12, saved: 10},
			want: "stopping: step 12 is trained; saving step 12", save: 12},
		{name: "between steps", st: State{at: stage{4, ""}, trained: 4, saved: 4},
			want: "stopping: the checkpoint of step 4 is kept", save: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Stopper{FinishWithin: FinishWithin, st: tc.st}
			s, drop := c.planLocked("terminated (SIGTERM)")
			if s.Message != tc.want || s.Save != tc.save || drop != tc.drop || c.discard.Load() != tc.discard {
				t.Errorf("got %q, save %d, drop %v, discard %v;\nwant %q, save %d, drop %v, discard %v",
					s.Message, s.Save, drop, c.discard.Load(), tc.want, tc.save, tc.drop, tc.discard)
			}
			if s.Step != tc.st.at.step || s.Phase != tc.st.at.phase || s.Reason != "terminated (SIGTERM)" {
				t.Errorf("announced %+v", s)
			}
		})
	}
}

// TestAskOnce: the first stop asked for is planned, announced and cancels the generation it drops;
// later ones, and the run's own decisions, return the plan in force without a second
// announcement, and once the run has ended a run that was not asked to stop plans nothing.
func TestAskOnce(t *testing.T) {
	s := New(false)
	cancelled := false
	s.Begin(func() { cancelled = true })
	if !s.Enter(3, event.PhaseRollout) {
		t.Fatal("a phase was not entered without a stop")
	}
	first, announce := s.Ask("quit")
	if !announce || !cancelled || first.Reason != "quit" || first.Message != "stopping now: step 3's rollout is dropped; no step is trained yet, so there is no checkpoint to save" {
		t.Fatalf("first stop %+v (announce %v, cancelled %v)", first, announce, cancelled)
	}
	s.Announced()
	if again, announce := s.Ask("again"); announce || again.Message != first.Message {
		t.Errorf("second stop %+v (announce %v); want the first's plan, not announced", again, announce)
	}
	if _, ok := s.Decide("all 4 steps done", true); ok || s.Enter(4, event.PhaseRollout) {
		t.Error("a decision or a phase went ahead with a stop in force")
	}
	st := s.End()
	s.Wait()
	if status, reason := st.Outcome("all 4 steps done", nil); status != "stopped" || reason != "quit" {
		t.Errorf("outcome %s, %s; want stopped, quit", status, reason)
	}
	if got := s.End().AbortDetail(); got != "aborted during the rollout of step 3; no checkpoint" {
		t.Errorf("abort detail %q", got)
	}

	done := New(false)
	done.Resumed(2)
	done.Pass(2, "")
	plan, ok := done.Decide("all 2 steps done", true)
	if !ok || plan.Message != "finishing: the checkpoint of step 2 is kept" {
		t.Errorf("decided %+v (%v)", plan, ok)
	}
	st = done.End()
	if status, reason := st.Outcome("all 2 steps done", nil); status != "finished" || reason != "all 2 steps done" {
		t.Errorf("outcome %s, %s; want finished", status, reason)
	}
	if status, _ := st.Outcome("", ErrStop); status != "failed" {
		t.Errorf("outcome with an error: %s; want failed", status)
	}
	if got, announce := done.Ask("late"); announce || got.Message != "" {
		t.Errorf("a stop after a finished run: %+v (announce %v); want nothing", got, announce)
	}
	if got := st.AbortDetail(); got != "aborted between steps; the latest checkpoint is step 2" {
		t.Errorf("abort detail %q", got)
	}
}

// TestUpdateDiscarded: an update a stop discards is not trained; one it lets finish is, and the
// next stop's estimate goes by its time.
func TestUpdateDiscarded(t *testing.T) {
	s := New(false)
	s.FinishWithin = time.Nanosecond
	if err := s.BeginUpdate(1, true); err != nil {
		t.Fatal(err)
	}
	s.UpdateProgress(1, 4)
	if _, announce := s.Ask("quit"); !announce || !s.Discarding() {
		t.Fatal("a stop during a long update did not discard it")
	}
	if !s.EndUpdate(1) || s.Trained() != 0 {
		t.Errorf("a discarded update counts as trained (step %d)", s.Trained())
	}
	if err := s.BeginUpdate(2, true); err != ErrStop {
		t.Errorf("an update began with a stop in force: %v", err)
	}

	kept := New(false)
	if err := kept.BeginUpdate(1, false); err != nil {
		t.Fatal(err)
	}
	kept.UpdateProgress(1, 4)
	plan, _ := kept.Ask("quit")
	if kept.Discarding() || kept.EndUpdate(1) || kept.Trained() != 1 || plan.Save != 1 {
		t.Errorf("an update without a snapshot: discarding %v, trained %d, plan %+v; want it finished and saved", kept.Discarding(), kept.Trained(), plan)
	}
	kept.NoteSaved(1)
	if kept.LastSaved() != 1 {
		t.Errorf("last saved %d; want 1", kept.LastSaved())
	}
}
