package engine

import (
	"context"
	"errors"
	"sync"

	"agentrl/engine/rollout"
	"agentrl/envs"
)

// Partial rollouts (rollout.partial): a step's rollout phase ends once tasks_per_step groups
// have all their samples done; the trajectories still running are paused (their goroutine,
// environment, tokens, log-probs and token versions kept, their generator session closed) and
// resume in the next step's phase, whose session prefills their tokens again under the new
// weights. A trajectory's goroutine lives across phases: it settles each phase it runs in
// (finished, or paused and waiting for its next resumeOrder).

// Trajectory states across phases.
const (
	partRunning = iota
	partPaused
	partFinished
	partDropped
)

// errStaleDropped ends a paused trajectory that is too stale to resume (or whose run ended).
var errStaleDropped = errors.New("engine: a paused trajectory was dropped")

// segment is the stretch of a trajectory's tokens from start on, sampled in step's rollout phase
// by the weights of policy version version (the updates applied to them).
type segment struct{ start, version, step int }

// partRun is a trajectory's state across the partial phases it runs in.
type partRun struct {
	group    *pgroup
	seed     uint64
	version  int // the version of the weights sampling it now
	resumes  int
	state    int
	err      error
	segments []segment
	resume   chan resumeOrder
	settle   func() // the current phase's: the trajectory paused or ended in it
}

// resumeOrder resumes a paused trajectory in a phase: its context (with the phase's lockstep
// ticket), or a nil ctx when it is dropped.
type resumeOrder struct {
	ctx           context.Context
	version, step int
}

// pgroup is a task's group of samples in flight across phases.
type pgroup struct {
	id      int
	task    envs.Task
	samples []*traj
}

// partialState is what a rollout phase keeps across steps with partial rollouts.
type partialState struct {
	groups []*pgroup // started, not yet trained, in start order
	next   int       // groups started so far: the next group's id
}

// resumeSalt varies a resumed request's sampling stream (0 for a trajectory never paused, so
// the sampled tokens are those of a whole rollout).
func (t *traj) resumeSalt() uint64 {
	if t.part == nil {
		return 0
	}
	return uint64(t.part.resumes) * 0x9e3779b97f4a7c15
}

// minVersion is the oldest policy version among t's sampled tokens (ok false when it has none).
func (t *traj) minVersion() (v int, ok bool) {
	for i, m := range t.mask {
		if m && i < len(t.versions) && (!ok || int(t.versions[i]) < v) {
			v, ok = int(t.versions[i]), true
		}
	}
	return v, ok
}

// open opens t's generator session; when the phase has paused before t got a slot, t pauses
// until its next phase (ctx becomes that phase's).
func (p *rolloutPhase) open(ctx *context.Context, t *traj) (*rollout.Session, error) {
	for {
		s, err := p.gen.Open(*ctx)
		if !errors.Is(err, rollout.ErrPaused) || t.part == nil {
			return s, err
		}
		if *ctx, err = p.wait(t); err != nil {
			return nil, err
		}
	}
}

// pause settles t as paused in its phase, waits for its next phase and opens a session there.
func (p *rolloutPhase) pause(ctx *context.Context, t *traj) (*rollout.Session, error) {
	if t.part == nil {
		return nil, errors.New("engine: the generator paused a trajectory outside a partial rollout")
	}
	var err error
	if *ctx, err = p.wait(t); err != nil {
		return nil, err
	}
	return p.open(ctx, t)
}

// wait settles t as paused and blocks until a phase resumes it (its context) or drops it.
func (p *rolloutPhase) wait(t *traj) (context.Context, error) {
	pr := t.part
	pr.state = partPaused
	pr.settle()
	o := <-pr.resume
	if o.ctx == nil {
		return nil, errStaleDropped
	}
	pr.state, pr.version = partRunning, o.version
	pr.resumes++
	pr.segments = append(pr.segments, segment{start: len(t.tokens), version: o.version, step: o.step})
	return o.ctx, nil
}

// partialStats are a partial phase's counts for the step's metrics.
type partialStats struct {
	paused, resumed, staleDropped int
	staleness                     float64 // Σ over the trained trajectories of their staleness
	trained                       int
}

// preparePartial lists the trajectories a partial phase of step runs, under policy version
// version: the paused ones that are not too stale to resume (the others are dropped), then the
// samples of new groups (tasks(id) each) up to tasks_per_step + over_sample groups in flight.
func (p *rolloutPhase) preparePartial(step, version int, tasks func(id int) envs.Task, st *partialStats) []*traj {
	ps, pr := p.partial, p.r.Rollout.Partial
	var run []*traj
	for _, g := range ps.groups {
		for _, t := range g.samples {
			if t.part.state != partPaused {
				continue
			}
			if v, ok := t.minVersion(); ok && version-v > pr.MaxStaleness {
				t.part.state, t.part.settle = partDropped, func() {}
				t.part.resume <- resumeOrder{} // its goroutine ends
				st.staleDropped++
				continue
			}
			run = append(run, t)
			st.resumed++
		}
	}
	for len(ps.groups) < p.r.Rollout.TasksPerStep+pr.OverSample {
		g := &pgroup{id: ps.next, task: tasks(ps.next)}
		ps.next++
		for s := 0; s < p.r.Rollout.GroupSize; s++ {
			t := &traj{task: g.task, group: g.id, sample: s, part: &partRun{group: g, resume: make(chan resumeOrder, 1)}}
			g.samples = append(g.samples, t)
			run = append(run, t)
		}
		ps.groups = append(ps.groups, g)
	}
	return run
}

// runPartial runs a partial phase: run's trajectories (preparePartial) until tasks_per_step
// groups are done, as the generator's pause rule sees their sessions end, trajectory i new here
// with sampling seed seed+i·7919; the rest pause. finished sees each trajectory that ends.
func (p *rolloutPhase) runPartial(ctx context.Context, step, version int, run []*traj, seed uint64, temperature float64, finished func(*traj)) (generation, error) {
	meter := p.gen.Measure()
	defer meter.Stop()
	queued := p.pool.QueueWait()
	base := p.gen.Reserve(len(run))
	// A sample is done for the rule once it finished or was dropped before this phase, or its
	// session ended in it.
	ended := map[*traj]bool{}
	for _, t := range run {
		for _, s := range t.part.group.samples {
			if s.part.state == partFinished || s.part.state == partDropped {
				ended[s] = true
			}
		}
	}
	complete := 0
	p.gen.PauseWhen(func(ticket int64) bool { // under the generator's lock, in tick order
		i := ticket - base
		if i < 0 || i >= int64(len(run)) {
			return false
		}
		t := run[i]
		ended[t] = true
		for _, s := range t.part.group.samples {
			if !ended[s] {
				return false
			}
		}
		complete++
		return complete >= p.r.Rollout.TasksPerStep
	})
	defer p.gen.PauseWhen(nil)
	var wg sync.WaitGroup
	for i, t := range run {
		ticket := base + int64(i)
		tctx := rollout.WithTicket(ctx, ticket)
		pr := t.part
		wg.Add(1)
		pr.settle = func() {
			p.gen.Skip(ticket)
			if pr.state == partFinished && pr.err == nil {
				finished(t)
			}
			wg.Done()
		}
		if pr.state == partPaused {
			pr.resume <- resumeOrder{ctx: tctx, version: version, step: step}
			continue
		}
		pr.seed, pr.version = seed+uint64(i)*7919, version
		pr.segments = []segment{{start: 0, version: version, step: step}}
		go func() {
			err := p.playReTool(tctx, t, pr.seed, temperature)
			if errors.Is(err, errStaleDropped) {
				return
			}
			pr.err, pr.state = err, partFinished
			pr.settle()
		}()
	}
	wg.Wait()
	for _, t := range run {
		if t.part.state == partFinished && t.part.err != nil {
			return generation{}, t.part.err
		}
	}
	return generation{stats: meter.Stop(), toolQueue: p.pool.QueueWait() - queued}, nil
}

// collectPartial takes the groups whose samples are all done out of flight and returns their
// samples to train on, numbered by group in start order, less those older than max_staleness
// updates (dropped and counted), and the trajectories paused now.
func (p *rolloutPhase) collectPartial(version int, st *partialStats) (trained, paused []*traj) {
	ps := p.partial
	var keep []*pgroup
	k := 0
	for _, g := range ps.groups {
		done := true
		for _, t := range g.samples {
			if t.part.state == partPaused {
				done = false
				paused = append(paused, t)
			}
		}
		if !done {
			keep = append(keep, g)
			continue
		}
		n := 0
		for _, t := range g.samples {
			if t.part.state != partFinished {
				continue
			}
			v, _ := t.minVersion()
			if version-v > p.r.Rollout.Partial.MaxStaleness {
				t.part.state = partDropped
				st.staleDropped++
				continue
			}
			t.group = k
			st.staleness += float64(version - v)
			st.trained++
			trained = append(trained, t)
			n++
		}
		if n > 0 {
			k++
		}
	}
	ps.groups = keep
	st.paused = len(paused)
	return trained, paused
}

// dropPaused ends the paused trajectories' goroutines (the run is over).
func (p *rolloutPhase) dropPaused() {
	if p == nil || p.partial == nil {
		return
	}
	for _, g := range p.partial.groups {
		for _, t := range g.samples {
			if t.part.state == partPaused {
				t.part.state, t.part.settle = partDropped, func() {}
				t.part.resume <- resumeOrder{}
			}
		}
	}
	p.partial.groups = nil
}
