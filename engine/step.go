package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/play"
	"agentrl/engine/stopping"
)

// phase records that step's phase name took the time since start: an event.Phase, and the sum
// per phase the step stores.
func (c *Controller) phase(step int, name string, start time.Time) {
	s := time.Since(start).Seconds()
	c.emit(event.Phase{Step: step, Phase: name, Seconds: s})
	if c.phases == nil || c.phasesStep != step {
		c.phases, c.phasesStep = map[string]float64{}, step
	}
	c.phases[name] += s
}

// inPhase runs fn as step's phase name: entered only while no stop is pending (else stopping.ErrStop),
// timed and recorded (phase) once fn returns without error.
func (c *Controller) inPhase(step int, name string, fn func() error) error {
	t0 := time.Now()
	if !c.stop.Enter(step, name) {
		return stopping.ErrStop
	}
	if err := fn(); err != nil {
		return err
	}
	c.phase(step, name, t0)
	return nil
}

// storePhases keeps step's phase times, so that a stored run's view shows where its time went.
func (c *Controller) storePhases(step int) error { return c.rec.Phases(step) }

// step is one training step, its phases in order. Each phase is entered only while no stop is
// pending; a stop cuts the step short with stopping.ErrStop (see engine/stopping for what it keeps).
func (c *Controller) step(ctx context.Context, step int) error {
	trajs, dropped, gen, err := c.rolloutStep(ctx, step)
	if err != nil {
		return err
	}
	if err := c.prmPhase(ctx, step, trajs); err != nil {
		return err
	}
	if trajs, err = c.score(ctx, step, trajs); err != nil {
		return err
	}
	// The rest of the step is the training phase: the KV cache and the inference weights make
	// room for the reference forward, the update and their activations.
	switchToTrain, err := c.reference(step, trajs)
	if err != nil {
		return err
	}
	var hinted int
	if err := c.inPhase(step, event.PhaseAdvantage, func() (err error) {
		hinted, err = c.advantages(trajs)
		return err
	}); err != nil {
		return err
	}
	metrics := map[event.Metric]float64{event.MetricSwitchToTrainSeconds: switchToTrain}
	generationMetrics(gen, metrics)
	if err := c.trainStep(step, trajs, metrics); err != nil {
		return err
	}
	trajs = batch.CollapseSegments(trajs)
	if err := c.syncWeights(step, metrics); err != nil {
		return err
	}
	c.batchMetrics(step, trajs, dropped, hinted, metrics)
	c.emit(event.StepMetrics{Step: step, Metrics: metrics, Compiles: c.compileMetrics(metrics)})
	return c.keep(ctx, step, trajs, dropped, metrics)
}

// keep is the rest of a trained step: its metrics and trajectories stored (dropped ones and, with
// partial rollouts, paused ones too), its evaluation when one is due, and its checkpoint.
func (c *Controller) keep(ctx context.Context, step int, trajs, dropped []*batch.Trajectory, metrics map[event.Metric]float64) error {
	// The step is trained: its metrics and trajectories are kept whatever comes next (part of
	// the save phase's time).
	t0 := time.Now()
	c.stop.Pass(step, event.PhaseSave)
	trajs = append(trajs, dropped...)
	if c.players.Partial != nil {
		trajs = append(trajs, c.partial.paused...)
	}
	kept := []event.Event{event.StepMetrics{Step: step, Metrics: metrics}}
	for _, t := range trajs {
		e := c.trajectoryEvent(step, t, false)
		c.emit(e)
		kept = append(kept, e)
	}
	if err := c.rec.Record(kept...); err != nil {
		return err
	}
	recorded := time.Since(t0)
	c.clock.StepDone(c.stepSeconds(step) + recorded.Seconds())
	if c.recipe.Eval.Every > 0 && step%c.recipe.Eval.Every == 0 && c.stop.Enter(step, event.PhaseEval) {
		if _, err := c.evaluate(ctx, step); err != nil && !errors.Is(err, stopping.ErrStop) {
			return err
		}
	}
	t0 = time.Now().Add(-recorded)
	c.stop.Pass(step, event.PhaseSave)
	if c.opts.Store != nil && c.recipe.Checkpoint.Every > 0 && step%c.recipe.Checkpoint.Every == 0 {
		if err := c.save(ctx, step, false); err != nil {
			return err
		}
	}
	c.phase(step, event.PhaseSave, t0)
	return c.storePhases(step)
}

// rolloutStep is a step's rollout phase: the step's tasks, group_size samples each, through the
// rollout phase; what an external agent left unusable comes back apart (dropped), shown and
// stored but not trained on.
func (c *Controller) rolloutStep(ctx context.Context, step int) (trajs, dropped []*batch.Trajectory, gen event.Generation, err error) {
	r := c.recipe
	err = c.inPhase(step, event.PhaseRollout, func() (err error) {
		rng := rand.New(rand.NewPCG(uint64(r.Run.Seed), uint64(step)))
		before := c.remote.Generated()
		defer func() { c.remoteTok = c.remote.Generated() - before }()
		if c.players.Partial != nil {
			if trajs, gen, err = c.rolloutPartial(ctx, step, rng.Uint64()); err != nil {
				return c.stopOr(ctx, err)
			}
			return nil
		}
		for i := 0; i < r.Rollout.TasksPerStep; i++ {
			task := c.train[((step-1)*r.Rollout.TasksPerStep+i)%len(c.train)]
			for s := 0; s < r.Rollout.GroupSize; s++ {
				trajs = append(trajs, &batch.Trajectory{Task: task, Group: i, Sample: s})
			}
		}
		if gen, err = c.rollout(ctx, step, event.PhaseRollout, trajs, rng.Uint64(), r.Rollout.Temperature); err != nil {
			return c.stopOr(ctx, err)
		}
		trajs, dropped, err = play.SplitDropped(step, c.stop.LastSaved(), trajs)
		return err
	})
	if err != nil {
		return nil, nil, gen, err
	}
	for _, t := range trajs {
		if t.Drift != "" {
			c.emit(event.Alarm{Step: step, Kind: event.AlarmTokenDrift, Value: 1, Threshold: 0,
				Message: "the trained tokens do not read as the chat template renders the conversation (" + t.Drift + ")"})
			break
		}
	}
	return trajs, dropped, gen, nil
}

// score is the score phase: hindsight hints, process scores and each trajectory's reward; an
// agent's later segments come back as sequences of their own.
func (c *Controller) score(ctx context.Context, step int, trajs []*batch.Trajectory) ([]*batch.Trajectory, error) {
	err := c.inPhase(step, event.PhaseScore, func() error {
		if err := c.hints.Hindsight(ctx, trajs); err != nil {
			return c.stopOr(ctx, err)
		}
		for _, t := range trajs {
			t.Reward = play.ComposeReward(c.players.Weights, t)
		}
		trajs = batch.ExpandSegments(trajs)
		return nil
	})
	return trajs, err
}

// reference is the reference phase: the switch to training around the reference forward; it
// returns the switch's seconds.
func (c *Controller) reference(step int, trajs []*batch.Trajectory) (switchToTrain float64, err error) {
	err = c.inPhase(step, event.PhaseReference, func() error {
		t0 := time.Now()
		if err := c.dev.ToReference(step, c.recipe.UsesReference()); err != nil {
			return err
		}
		switchToTrain = time.Since(t0).Seconds()
		if err := c.referenceForward(trajs); err != nil {
			_ = c.dev.ToTrain(step) // a consistent device for what follows the error (save, close)
			return err
		}
		t1 := time.Now()
		if err := c.dev.ToTrain(step); err != nil {
			return err
		}
		switchToTrain += time.Since(t1).Seconds()
		return nil
	})
	return switchToTrain, err
}

// stopOr is stopping.ErrStop when a stop abandoned (cancelled ctx, the generation's) the work that failed
// with err, else err.
func (c *Controller) stopOr(ctx context.Context, err error) error {
	if errors.Is(err, stopping.ErrStop) || (ctx.Err() != nil && c.stop.Stopping()) {
		return stopping.ErrStop
	}
	return err
}

// stepSeconds sums the phases of step timed so far (all of a training step's but its evaluation
// and save when called before them).
func (c *Controller) stepSeconds(step int) float64 {
	if c.phasesStep != step {
		return 0
	}
	var s float64
	for name, v := range c.phases {
		if name != event.PhaseEval {
			s += v
		}
	}
	return s
}

// trajectoryEvent is t as shown and stored; an evaluation's (eval) carries no token pieces, as it
// has no advantages to colour them by.
func (c *Controller) trajectoryEvent(step int, t *batch.Trajectory, eval bool) event.Trajectory {
	e := event.Trajectory{Step: step, TaskID: t.Task.ID, Prompt: t.Task.Prompt, Group: t.Group, Sample: t.Sample, Turns: t.Turns,
		Reward: t.Reward, Correct: t.Summary.Correct, Hint: t.Hint, Tokens: len(t.Tokens), ToolErrors: t.Summary.ToolErrors, Eval: eval, PRM: t.PRM}
	if !eval {
		for j := t.PromptLen; j < len(t.Tokens); j++ {
			if t.Mask[j] {
				e.Pieces = append(e.Pieces, c.opts.Tokenizer.Decode(t.Tokens[j:j+1], false))
				if t.Advantages != nil {
					e.Advantages = append(e.Advantages, t.Advantages[j])
				}
			}
		}
	}
	play.AgentEvent(&e, t, c.opts.Tokenizer) // an external agent's run, and its later segments' tokens
	play.PartialEvent(&e, t)                 // a partial rollout's state and its stretches by phase
	return e
}
