package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/train"
	"agentrl/store"
)

// Run executes the recipe until max_steps, early stopping, Stop or ctx's end (which stops the
// run as Stop("interrupted") does). Whatever ends it, the run saves its last trained step and
// records its end; see stop.go for what a stop keeps.
func (c *Controller) Run(ctx context.Context) (err error) {
	r := c.r
	start := event.RunStart{RunID: c.o.RunID, Name: r.Run.Name, Recipe: c.o.RecipePath, TotalSteps: r.Run.MaxSteps, Backend: c.o.Backend, Model: r.Model.Path, Kernels: c.o.Kernels,
		Sandbox: sandboxLine(c.exec), Compiles: byKind(c.compiles.Snapshot())}
	if c.o.Store != nil && c.o.Resume != nil {
		run, err := c.o.Store.GetRun(c.o.RunID)
		if err != nil {
			return err
		}
		run.Status, run.StopReason, run.StopDetail, run.Ended = "running", "", "", time.Time{}
		if run.BestPinned {
			c.manualBest.Store(int64(run.BestStep))
			start.MarkedBest = run.BestStep
		}
		if err := c.o.Store.PutRun(run); err != nil {
			return err
		}
	} else if c.o.Store != nil {
		yaml, _ := json.Marshal(r)
		if err := c.o.Store.PutRun(store.Run{ID: c.o.RunID, Name: r.Run.Name, Recipe: c.o.RecipePath, RecipeYAML: string(yaml), RecipeHash: r.Hash(), Created: time.Now(), Status: "running", TotalSteps: r.Run.MaxSteps}); err != nil {
			return err
		}
	}
	// Generation runs under work, which a stop cancels when its plan drops what is in progress.
	work, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.stopMu.Lock()
	c.st.cancel = cancel
	c.st.trained = c.start - 1
	c.stopMu.Unlock()
	defer context.AfterFunc(ctx, func() { c.Stop("interrupted") })()
	c.emit(start)
	defer func() { c.finish(err) }()
	c.emit(c.ledger())
	if r.Eval.AtStart && c.o.Resume == nil && c.enter(0, event.PhaseEval) {
		if _, err := c.evaluate(work, 0); err != nil && !errors.Is(err, errStop) {
			return err
		}
		if err := c.storePhases(0); err != nil {
			return err
		}
	}
	for step := c.start; step <= r.Run.MaxSteps; step++ {
		c.pass(step-1, "")
		c.waitIfPaused(work)
		if c.stopping() {
			break
		}
		err := c.step(work, step)
		c.emit(c.ledger())
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		c.pass(step, "")
		switch {
		case c.stopping():
		case c.dropped != "":
			c.decide(c.dropped, false)
		case r.EarlyStop.Patience > 0 && c.sinceBest >= r.EarlyStop.Patience:
			c.decide(fmt.Sprintf("early stop: %s did not improve for %d evaluations", r.EarlyStop.Metric, c.sinceBest), false)
		case step == r.Run.MaxSteps:
			c.decide(fmt.Sprintf("all %d steps done", r.Run.MaxSteps), true)
		}
		if c.stopping() {
			break
		}
	}
	c.decide(fmt.Sprintf("all %d steps done", r.Run.MaxSteps), true) // a resumed run with no step left
	c.stopMu.Lock()
	trained := c.st.trained
	c.stopMu.Unlock()
	return c.save(context.Background(), trained, true) // the final weights are always kept
}

func (c *Controller) phase(step int, name string, start time.Time) {
	s := time.Since(start).Seconds()
	c.emit(event.Phase{Step: step, Phase: name, Seconds: s})
	if c.phases == nil || c.phasesStep != step {
		c.phases, c.phasesStep = map[string]float64{}, step
	}
	c.phases[name] += s
}

// storePhases keeps step's phase times, so that a stored run's view shows where its time went.
func (c *Controller) storePhases(step int) error {
	if c.o.Store == nil || c.phasesStep != step || len(c.phases) == 0 {
		return nil
	}
	return c.o.Store.PutPhases(c.o.RunID, step, c.phases)
}

// step is one training step. Each phase is entered only while no stop is pending; a stop cuts
// the step short with errStop (see stop.go for what it keeps).
func (c *Controller) step(ctx context.Context, step int) error {
	r := c.r
	t0 := time.Now()
	if !c.enter(step, event.PhaseRollout) {
		return errStop
	}
	rng := rand.New(rand.NewPCG(uint64(r.Run.Seed), uint64(step)))
	var batch []*traj
	for i := 0; i < r.Rollout.TasksPerStep; i++ {
		task := c.train[((step-1)*r.Rollout.TasksPerStep+i)%len(c.train)]
		for s := 0; s < r.Rollout.GroupSize; s++ {
			batch = append(batch, &traj{task: task, group: i, sample: s})
		}
	}
	gen, err := c.rollout(ctx, step, event.PhaseRollout, batch, rng.Uint64(), r.Rollout.Temperature)
	if err != nil {
		return c.stopOr(ctx, err)
	}
	// An external agent that gave nothing usable is shown and stored, not trained on.
	batch, dropped, err := splitDropped(step, batch)
	if err != nil {
		return err
	}
	c.phase(step, "rollout", t0)
	for _, t := range batch {
		if t.drift != "" {
			c.emit(event.Alarm{Step: step, Kind: event.AlarmTokenDrift, Value: 1, Threshold: 0,
				Message: "the trained tokens do not read as the chat template renders the conversation (" + t.drift + ")"})
			break
		}
	}

	t0 = time.Now()
	if !c.enter(step, event.PhaseScore) {
		return errStop
	}
	if err := c.hindsight(ctx, batch); err != nil {
		return c.stopOr(ctx, err)
	}
	for _, t := range batch {
		t.reward = c.composeReward(t)
	}
	batch = expandSegments(batch) // an agent's later segments train as sequences of their own
	c.phase(step, "score", t0)

	// The rest of the step is the training phase: the KV cache and the inference weights make
	// room for the reference forward, the update and their activations.
	t0 = time.Now()
	if !c.enter(step, event.PhaseReference) {
		return errStop
	}
	if err := c.toReference(step); err != nil {
		return err
	}
	switchToTrain := time.Since(t0).Seconds()
	if err := c.referenceForward(batch); err != nil {
		_ = c.toTrain(step) // a consistent device for what follows the error (save, close)
		return err
	}
	t1 := time.Now()
	if err := c.toTrain(step); err != nil {
		return err
	}
	switchToTrain += time.Since(t1).Seconds()
	c.phase(step, "reference", t0)

	t0 = time.Now()
	if !c.enter(step, event.PhaseAdvantage) {
		return errStop
	}
	hinted, err := c.advantages(batch)
	if err != nil {
		return err
	}
	c.phase(step, "advantage", t0)

	t0 = time.Now()
	metrics := map[string]float64{"switch_to_train_s": switchToTrain}
	generationMetrics(gen, metrics)
	lr := train.Schedule{Base: r.Train.LR, Warmup: r.Train.WarmupSteps, Total: r.Run.MaxSteps, Kind: r.Train.Schedule, MinRatio: r.Train.MinLRRatio}.At(step)
	metrics["lr"] = lr
	seqs := make([]train.Sequence, len(batch))
	for i, t := range batch {
		seqs[i] = train.Sequence{Tokens: t.tokens, LossMask: t.mask, OldLogProbs: t.lps, Advantages: t.adv, RefLogProbs: t.ref,
			Returns: t.ret, OldValues: t.oldValues}
	}
	if c.onTrain != nil {
		c.onTrain(step, batch, seqs)
	}
	var loss, probeMax float64
	err = c.update(step, func(stop func(done, total int) bool) error { // finished, or discarded by a stop
		for epoch := 0; epoch < max(r.Train.EpochsPerStep, 1); epoch++ {
			m, err := c.tr.UpdateUntil(seqs, lr, stop)
			if err != nil {
				return err
			}
			if epoch == 0 { // its first micro-batches ran before any update: rollout and trainer weights agree
				probeMax = m.MaxLogProbDiff
				metrics["logprob_diff_mean"] = m.MeanLogProbDiff
				metrics["clip_frac"], metrics["grad_norm"], metrics["entropy"], metrics["ref_kl"] = m.ClipFrac, m.GradNorm, m.Entropy, m.RefKL
				metrics["updates"] = float64(m.Updates)
				if c.r.Algorithm.Name == "ppo" {
					metrics["value_loss"], metrics["explained_variance"] = m.ValueLoss, m.ExplainedVariance
				}
			}
			loss = m.Loss
		}
		return nil
	})
	if err != nil {
		return err
	}
	metrics["loss"] = loss
	metrics["logprob_diff_max"] = probeMax
	if probeMax > c.o.LogProbAlarm {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmLogProbMismatch, Value: probeMax, Threshold: c.o.LogProbAlarm,
			Message: "rollout and trainer log-probs disagree: the inference weights may be stale"})
	}
	c.phase(step, "train", t0)
	batch = collapseSegments(batch)

	t0 = time.Now()
	diff, err := c.toRollout(step)
	if err != nil {
		return err
	}
	metrics["sync_diff_max"] = diff
	metrics["switch_to_rollout_s"] = time.Since(t0).Seconds()
	if diff > 0 {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmStaleWeights, Value: diff, Threshold: 0,
			Message: "after the sync the inference weights differ from the cast master weights"})
	}
	c.phase(step, "sync", t0)

	var meanReward, correct float64
	for _, t := range batch {
		meanReward += t.reward.Total
		if t.summary.Correct {
			correct++
		}
	}
	metrics["reward_mean"] = meanReward / float64(len(batch))
	metrics["accuracy"] = correct / float64(len(batch))
	metrics["hinted_share"] = float64(hinted) / float64(len(batch))
	c.dropMetrics(metrics, dropped)
	c.hintMetrics(step, batch, metrics)
	if r.Hinter.Kind == "self" || r.Hinter.Kind == "openai" || r.PRM.Kind == "judge" {
		metrics["judge_unparsed"] = float64(c.judge.unparsed.Swap(0)) // replies with no usable \boxed{}
	}
	st := c.gen.Stats()
	metrics["tokens_per_s"] = float64(st.Tokens) / max(st.StepTime.Seconds(), 1e-9)
	c.emit(event.StepMetrics{Step: step, Metrics: metrics, Compiles: c.compileMetrics(metrics)})

	// The step is trained: its metrics and trajectories are kept whatever comes next (part of
	// the save phase's time).
	t0 = time.Now()
	c.pass(step, event.PhaseSave)
	batch = append(batch, dropped...)
	trajs := make([]event.Trajectory, len(batch))
	for i, t := range batch {
		trajs[i] = c.trajectoryEvent(step, t, false)
		c.emit(trajs[i])
	}
	if c.o.Store != nil {
		if err := c.o.Store.PutMetrics(c.o.RunID, step, metrics); err != nil {
			return err
		}
		recs := make([]store.TrajectoryRecord, len(batch))
		for i, t := range batch {
			data, _ := json.Marshal(trajs[i])
			recs[i] = store.TrajectoryRecord{Step: step, TaskID: t.task.ID, Sample: t.group*r.Rollout.GroupSize + t.sample,
				Reward: t.reward.Total, Correct: t.summary.Correct, Hinted: t.hint != "", Data: data}
		}
		if err := c.o.Store.PutTrajectories(c.o.RunID, recs); err != nil {
			return err
		}
	}
	recorded := time.Since(t0)
	c.clock.stepDone(c.stepSeconds(step) + recorded.Seconds())
	if r.Eval.Every > 0 && step%r.Eval.Every == 0 && c.enter(step, event.PhaseEval) {
		if _, err := c.evaluate(ctx, step); err != nil && !errors.Is(err, errStop) {
			return err
		}
	}
	t0 = time.Now().Add(-recorded)
	c.pass(step, event.PhaseSave)
	if c.o.Store != nil && r.Checkpoint.Every > 0 && step%r.Checkpoint.Every == 0 {
		if err := c.save(ctx, step, false); err != nil {
			return err
		}
	}
	c.phase(step, "save", t0)
	return c.storePhases(step)
}

// stopOr is errStop when a stop abandoned (cancelled ctx, the generation's) the work that failed
// with err, else err.
func (c *Controller) stopOr(ctx context.Context, err error) error {
	if errors.Is(err, errStop) || (ctx.Err() != nil && c.stopping()) {
		return errStop
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
func (c *Controller) trajectoryEvent(step int, t *traj, eval bool) event.Trajectory {
	e := event.Trajectory{Step: step, TaskID: t.task.ID, Prompt: t.task.Prompt, Group: t.group, Sample: t.sample, Turns: t.turns,
		Reward: t.reward, Correct: t.summary.Correct, Hint: t.hint, Tokens: len(t.tokens), ToolErrors: t.summary.ToolErrors, Eval: eval}
	if !eval {
		for j := t.promptLen; j < len(t.tokens); j++ {
			if t.mask[j] {
				e.Pieces = append(e.Pieces, c.o.Tokenizer.Decode(t.tokens[j:j+1], false))
				if t.adv != nil {
					e.Advantages = append(e.Advantages, t.adv[j])
				}
			}
		}
	}
	c.agentEvent(&e, t) // an external agent's run, and its later segments' tokens
	return e
}
