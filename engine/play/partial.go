package play

import (
	"context"
	"errors"
	"sync"

	"agentrl/engine/batch"
	"agentrl/engine/rollout"
	"agentrl/envs"
)

// Partial rollouts (rollout.partial): a step's rollout phase ends once tasks_per_step groups
// have all their samples done; the trajectories still running are paused (their goroutine,
// environment, tokens, log-probs and token versions kept, their generator session closed) and
// resume in the next step's phase, whose session prefills their tokens again under the new
// weights. A trajectory's goroutine lives across phases: it settles each phase it runs in
// (finished, or paused and waiting for its next batch.ResumeOrder).

// Trajectory states across phases (batch.Partial.State).
const (
	PartialRunning = iota
	PartialPaused
	PartialFinished
	PartialDropped
)

// errStaleDropped ends a paused trajectory that is too stale to resume (or whose run ended).
var errStaleDropped = errors.New("engine: a paused trajectory was dropped")

// PartialState is what a rollout phase keeps across steps with partial rollouts.
type PartialState struct {
	groups []*batch.Group // started, not yet trained, in start order
	next   int            // groups started so far: the next group's id
}

// NewPartialState is the state of a run with partial rollouts whose next group to start is
// group next: 0 for a new run, where its checkpoint's data position is for a resumed one.
func NewPartialState(next int) *PartialState { return &PartialState{next: next} }

// open opens t's generator session (on the remote engines, within the partial phase's pause
// when there is one); when the phase has paused before t got a slot, t pauses until its next
// phase (ctx becomes that phase's).
func (p *Phase) open(ctx *context.Context, t *batch.Trajectory) (Session, error) {
	for {
		var s Session
		var err error
		switch {
		case p.Engine != nil && t.Partial != nil:
			s, err = p.remotePause.open(*ctx, p.Engine)
		case p.Engine != nil:
			return p.Engine.Open(*ctx)
		default:
			s, err = p.Gen.Open(*ctx)
		}
		if !errors.Is(err, rollout.ErrPaused) || t.Partial == nil {
			return s, err
		}
		if *ctx, err = p.wait(t); err != nil {
			return nil, err
		}
	}
}

// pause settles t as paused in its phase, waits for its next phase and opens a session there.
func (p *Phase) pause(ctx *context.Context, t *batch.Trajectory) (Session, error) {
	if t.Partial == nil {
		return nil, errors.New("engine: the generator paused a trajectory outside a partial rollout")
	}
	var err error
	if *ctx, err = p.wait(t); err != nil {
		return nil, err
	}
	return p.open(ctx, t)
}

// wait settles t as paused and blocks until a phase resumes it (its context) or drops it.
func (p *Phase) wait(t *batch.Trajectory) (context.Context, error) {
	pr := t.Partial
	pr.State = PartialPaused
	pr.Settle()
	o := <-pr.Resume
	if o.Ctx == nil {
		return nil, errStaleDropped
	}
	pr.State, pr.Version = PartialRunning, o.Version
	pr.Resumes++
	pr.Segments = append(pr.Segments, batch.Segment{Start: len(t.Tokens), Version: o.Version, Step: o.Step})
	return o.Ctx, nil
}

// PartialStats are a partial phase's counts for the step's metrics.
type PartialStats struct {
	Paused, Resumed, StaleDropped int
	Staleness                     float64 // Σ over the trained trajectories of their staleness
	Trained                       int
}

// PreparePartial lists the trajectories a partial phase of step runs, under policy version
// version: the paused ones that are not too stale to resume (the others are dropped), then the
// samples of new groups (tasks(id) each) up to tasks_per_step + over_sample groups in flight.
func (p *Phase) PreparePartial(step, version int, tasks func(id int) envs.Task, st *PartialStats) []*batch.Trajectory {
	ps, pr := p.Partial, p.Recipe.Rollout.Partial
	var run []*batch.Trajectory
	for _, g := range ps.groups {
		for _, t := range g.Samples {
			if t.Partial.State != PartialPaused {
				continue
			}
			if v, ok := t.MinVersion(); ok && version-v > pr.MaxStaleness {
				t.Partial.State, t.Partial.Settle = PartialDropped, func() {}
				t.Partial.Resume <- batch.ResumeOrder{} // its goroutine ends
				st.StaleDropped++
				continue
			}
			run = append(run, t)
			st.Resumed++
		}
	}
	for len(ps.groups) < p.Recipe.Rollout.TasksPerStep+pr.OverSample {
		g := &batch.Group{ID: ps.next, Task: tasks(ps.next)}
		ps.next++
		for s := 0; s < p.Recipe.Rollout.GroupSize; s++ {
			t := &batch.Trajectory{Task: g.Task, Group: g.ID, Sample: s, Partial: &batch.Partial{Group: g, Resume: make(chan batch.ResumeOrder, 1)}}
			g.Samples = append(g.Samples, t)
			run = append(run, t)
		}
		ps.groups = append(ps.groups, g)
	}
	return run
}

// RunPartial runs a partial phase: run's trajectories (PreparePartial) until tasks_per_step
// groups are done, as the generator's pause rule sees their sessions end, trajectory i new here
// with sampling seed seed+i·7919; the rest pause. finished sees each trajectory that ends.
func (p *Phase) RunPartial(ctx context.Context, step, version int, run []*batch.Trajectory, seed uint64, temperature float64, finished func(*batch.Trajectory)) (Generation, error) {
	queued := p.Pool.QueueWait()
	var meter *rollout.Meter
	var base int64
	if p.Engine == nil {
		meter = p.Gen.Measure()
		defer meter.Stop()
		base = p.Gen.Reserve(len(run))
	}
	// A sample is done for the rule once it finished or was dropped before this phase, or its
	// session ended in it.
	ended := map[*batch.Trajectory]bool{}
	for _, t := range run {
		for _, s := range t.Partial.Group.Samples {
			if s.Partial.State == PartialFinished || s.Partial.State == PartialDropped {
				ended[s] = true
			}
		}
	}
	complete := 0
	rule := func(ticket int64) bool { // under the generator's lock, in tick order (on engines, under the pause's)
		i := ticket - base
		if i < 0 || i >= int64(len(run)) {
			return false
		}
		t := run[i]
		ended[t] = true
		for _, s := range t.Partial.Group.Samples {
			if !ended[s] {
				return false
			}
		}
		complete++
		return complete >= p.Recipe.Rollout.TasksPerStep
	}
	if p.Engine != nil {
		// Set before any trajectory of the phase opens a session: the resumed ones read it once
		// their order arrives, the new ones once started.
		p.remotePause = newRemotePause(ctx, rule)
		defer p.remotePause.end()
	} else {
		p.Gen.PauseWhen(rule)
		defer p.Gen.PauseWhen(nil)
	}
	var wg sync.WaitGroup
	for i, t := range run {
		ticket := base + int64(i)
		tctx := rollout.WithTicket(ctx, ticket)
		pr := t.Partial
		wg.Add(1)
		pr.Settle = func() {
			if p.Engine == nil {
				p.Gen.Skip(ticket)
			}
			if pr.State == PartialFinished && pr.Err == nil {
				finished(t)
			}
			wg.Done()
		}
		if pr.State == PartialPaused {
			pr.Resume <- batch.ResumeOrder{Ctx: tctx, Version: version, Step: step}
			continue
		}
		pr.Seed, pr.Version = seed+uint64(i)*7919, version
		pr.Segments = []batch.Segment{{Start: 0, Version: version, Step: step}}
		go func() {
			err := p.PlayReTool(tctx, t, pr.Seed, temperature)
			if errors.Is(err, errStaleDropped) {
				return
			}
			pr.Err, pr.State = err, PartialFinished
			pr.Settle()
		}()
	}
	wg.Wait()
	for _, t := range run {
		if t.Partial.State == PartialFinished && t.Partial.Err != nil {
			return Generation{}, t.Partial.Err
		}
	}
	g := Generation{ToolQueue: p.Pool.QueueWait() - queued}
	if meter != nil {
		g.Stats = meter.Stop()
	}
	return g, nil
}

// remotePause is a partial phase's pause on remote engines, the rule the local generator applies
// to its slots (Generator.PauseWhen) applied to the trajectories' sessions: it sees each
// session's ticket (the trajectory's index in the phase) as the session closes, and once it
// fires, requests in flight are cancelled and return StopPaused without their tokens (a server
// keeps nothing of a cancelled request; the turn samples again in the next phase, under the new
// weights), later requests return StopPaused, and sessions not yet open get rollout.ErrPaused.
// Which sessions end first depends on the servers' timing, so unlike the local generator's
// lockstep the moment of the pause is not a function of the seed.
type remotePause struct {
	mu      sync.Mutex
	rule    func(ticket int64) bool
	pausing bool
	ctx     context.Context // cancelled when the rule fires
	cancel  context.CancelFunc
}

func newRemotePause(ctx context.Context, rule func(ticket int64) bool) *remotePause {
	pctx, cancel := context.WithCancel(ctx)
	return &remotePause{rule: rule, ctx: pctx, cancel: cancel}
}

// end releases the phase's context (the phase is over).
func (r *remotePause) end() { r.cancel() }

func (r *remotePause) paused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pausing
}

// open opens a session on e for the trajectory whose ticket ctx carries.
func (r *remotePause) open(ctx context.Context, e Engine) (Session, error) {
	if r.paused() {
		return nil, rollout.ErrPaused
	}
	s, err := e.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &pausingSession{s: s, r: r, ticket: rollout.TicketOf(ctx)}, nil
}

// pausingSession is a remote session inside a partial phase's pause.
type pausingSession struct {
	s      Session
	r      *remotePause
	ticket int64
}

func (ps *pausingSession) Generate(ctx context.Context, req rollout.Request) (rollout.Result, error) {
	if ps.r.paused() {
		return rollout.Result{Stop: rollout.StopPaused}, nil
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ps.r.ctx, cancel)
	defer stop()
	res, err := ps.s.Generate(gctx, req)
	if err != nil && ctx.Err() == nil && ps.r.paused() {
		return rollout.Result{Stop: rollout.StopPaused}, nil
	}
	return res, err
}

// Close ends the session and shows the rule its ticket, unless the phase has paused already.
func (ps *pausingSession) Close() {
	ps.s.Close()
	r := ps.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pausing && r.rule(ps.ticket) {
		r.pausing = true
		r.cancel()
	}
}

// CollectPartial takes the groups whose samples are all done out of flight and returns their
// samples to train on, numbered by group in start order, less those older than max_staleness
// updates (dropped and counted), and the trajectories paused now.
func (p *Phase) CollectPartial(version int, st *PartialStats) (trained, paused []*batch.Trajectory) {
	ps := p.Partial
	var keep []*batch.Group
	k := 0
	for _, g := range ps.groups {
		done := true
		for _, t := range g.Samples {
			if t.Partial.State == PartialPaused {
				done = false
				paused = append(paused, t)
			}
		}
		if !done {
			keep = append(keep, g)
			continue
		}
		n := 0
		for _, t := range g.Samples {
			if t.Partial.State != PartialFinished {
				continue
			}
			v, _ := t.MinVersion()
			if version-v > p.Recipe.Rollout.Partial.MaxStaleness {
				t.Partial.State = PartialDropped
				st.StaleDropped++
				continue
			}
			t.Group = k
			st.Staleness += float64(version - v)
			st.Trained++
			trained = append(trained, t)
			n++
		}
		if n > 0 {
			k++
		}
	}
	ps.groups = keep
	st.Paused = len(paused)
	return trained, paused
}

// DropPaused ends the paused trajectories' goroutines (the run is over).
func (p *Phase) DropPaused() {
	if p == nil || p.Partial == nil {
		return
	}
	for _, g := range p.Partial.groups {
		for _, t := range g.Samples {
			if t.Partial.State == PartialPaused {
				t.Partial.State, t.Partial.Settle = PartialDropped, func() {}
				t.Partial.Resume <- batch.ResumeOrder{}
			}
		}
	}
	p.Partial.groups = nil
}
