package engine

import (
	"context"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/evalset"
	"agentrl/engine/event"
	"agentrl/engine/stopping"
	"agentrl/envs"
	"agentrl/store"
)

// evaluate runs pass@k on the held-out tasks (an evaluation-only run's: on its set's, see
// EvalOnly). A stop during it drops it (stopping.ErrStop): nothing of it is emitted but its trajectories
// and progress, and nothing is stored. With eval.store_trajectories its trajectories are stored
// with its pass@k, marked as an evaluation's of step.
func (c *Controller) evaluate(ctx context.Context, step int) (event.Eval, error) {
	r := c.recipe
	t0 := time.Now()
	tasks := c.heldout[:min(r.Eval.HeldoutTasks, len(c.heldout))]
	if e := c.opts.Eval; e != nil {
		var err error
		if tasks, err = c.evalTasks(e.Set); err != nil {
			return event.Eval{}, err
		}
	}
	var trajs []*batch.Trajectory
	for i, task := range tasks {
		for s := 0; s < r.Eval.NSamples; s++ {
			trajs = append(trajs, &batch.Trajectory{Task: task, Group: i, Sample: s})
		}
	}
	c.stop.NoteEval(0, len(tasks))
	val, err := c.evalRollouts(ctx, step, trajs)
	if err != nil {
		return event.Eval{}, c.stopOr(ctx, err)
	}
	if !c.stop.Enter(step, event.PhaseEval) { // a stop came as the last trajectory finished: dropped as announced
		return event.Eval{}, stopping.ErrStop
	}
	ev, err := c.evalEvent(step, tasks, trajs, val)
	if err != nil {
		return ev, err
	}
	c.emit(ev)
	kept := []event.Event{ev}
	if r.Eval.StoreTrajectories {
		for _, t := range trajs {
			kept = append(kept, c.trajectoryEvent(step, t, true))
		}
	}
	if err := c.rec.Record(kept...); err != nil {
		return ev, err
	}
	c.phase(step, event.PhaseEval, t0)
	c.clock.EvalDone(time.Since(t0).Seconds())
	c.evals++
	return ev, nil
}

// evalEvent is the evaluation of step as it goes out: pass@k of its trajectories on tasks (and
// the validation's, val, when there is one), its change since the run's first evaluation of the
// same tasks, and whether it is the best so far.
func (c *Controller) evalEvent(step int, tasks []envs.Task, trajs []*batch.Trajectory, val map[int]float64) (event.Eval, error) {
	r := c.recipe
	counts := make([][2]int, len(tasks))
	for _, t := range trajs {
		counts[t.Group][0]++
		if t.Summary.Correct {
			counts[t.Group][1]++
		}
	}
	ev, err := evalset.PassAtK(step, tasks, counts, r.Eval.Ks)
	if err != nil {
		return ev, err
	}
	fp := envs.Fingerprint(tasks)
	switch {
	case c.first == nil:
		c.first = &store.Eval{Step: step, Counts: counts, Tasks: fp}
	case c.first.Tasks == fp:
		ev.Since, ev.Change = c.first.Step, event.ChangeSince(c.first.Counts, counts, r.Eval.Ks)
	}
	choose := ev.PassAtK
	if val != nil {
		ev.Validation, choose = val, val
	}
	ev.Best = c.best.Observe(step, choose)
	ev.Counts, ev.Tasks = counts, fp
	return ev, nil
}

// evalRollouts generates the evaluation's trajectories and, in a training run with validation
// tasks, the validation's (their pass@k, nil without): on the evaluation's own KV slots when its
// context is longer than rollout's, rollout's freed meanwhile.
func (c *Controller) evalRollouts(ctx context.Context, step int, trajs []*batch.Trajectory) (val map[int]float64, err error) {
	r := c.recipe
	if c.evalGen != nil {
		if err := c.dev.ToEval(step); err != nil {
			return nil, err
		}
		defer func() {
			if ferr := c.dev.FromEval(step); ferr != nil && err == nil {
				err = ferr
			}
		}()
	}
	if _, err := c.rollout(ctx, step, event.PhaseEval, trajs, uint64(r.Run.Seed)*1_000_003+uint64(step), r.Eval.Temperature); err != nil {
		return nil, err
	}
	if len(c.validation) > 0 && c.opts.Eval == nil { // an evaluation run chooses nothing
		return c.validate(ctx, step)
	}
	return nil, nil
}

// validate samples the validation tasks (eval.validation_samples each) and returns their pass@k
// for the ks the samples allow. Its trajectories are not shown or stored: they choose, not report.
func (c *Controller) validate(ctx context.Context, step int) (map[int]float64, error) {
	r := c.recipe
	var trajs []*batch.Trajectory
	for i, task := range c.validation {
		for s := 0; s < r.Eval.ValidationSamples; s++ {
			trajs = append(trajs, &batch.Trajectory{Task: task, Group: i, Sample: s})
		}
	}
	if _, err := c.rollout(ctx, step, event.PhaseValidate, trajs, uint64(r.Run.Seed)*1_000_003+uint64(step)+500_009, r.Eval.Temperature); err != nil {
		return nil, err
	}
	counts := make([][2]int, len(c.validation))
	for _, t := range trajs {
		counts[t.Group][0]++
		if t.Summary.Correct {
			counts[t.Group][1]++
		}
	}
	out := map[int]float64{}
	for _, k := range r.Eval.Ks {
		if k > r.Eval.ValidationSamples {
			break
		}
		v, err := envs.MeanPassAtK(counts, k)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}
