package engine

import (
	"agentrl/envs/mathverify"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/hint"
	"agentrl/engine/train"
)

// trainStep is the train phase: the batch's sequences through the clipped policy loss and
// AdamW (train.epochs_per_step passes), a stop discarding the update in progress; the
// update's figures and the log-prob probe (rollout against trainer log-probs before the first
// update) go in metrics.
func (c *Controller) trainStep(step int, trajs []*batch.Trajectory, metrics map[event.Metric]float64) error {
	r := c.recipe
	t0 := time.Now()
	lr := train.Schedule{Base: r.Train.LR, Warmup: r.Train.WarmupSteps, Total: r.Run.MaxSteps, Kind: r.Train.Schedule, MinRatio: r.Train.MinLRRatio}.At(step)
	metrics[event.MetricLR] = lr
	seqs := make([]train.Sequence, len(trajs))
	for i, t := range trajs {
		seqs[i] = train.Sequence{Tokens: t.Tokens, LossMask: t.Mask, OldLogProbs: t.LogProbs, Advantages: t.Advantages, RefLogProbs: t.RefLogProbs,
			Returns: t.Returns, OldValues: t.OldValues}
	}
	// Tokens another policy sampled (older versions with partial rollouts; the engines' copy of
	// the weights with rollout.engines) get the decoupled objective; the engines' mismatch with
	// the trainer is then measured here, as the rewritten batch no longer shows it.
	var engineMax, engineMean float64
	if c.players.Partial != nil || c.remote != nil {
		t1 := time.Now()
		var err error
		if engineMax, engineMean, err = c.decouple(step, trajs, seqs, c.remote != nil); err != nil {
			return err
		}
		metrics[event.MetricProximalSeconds] = time.Since(t1).Seconds() // the proximal log-probs' forward pass
	}
	c.opts.hooks.training(step, trajs, seqs)
	var loss, probeMax float64
	err := c.update(step, func(stop func(done, total int) bool) error { // finished, or discarded by a stop
		for epoch := 0; epoch < max(r.Train.EpochsPerStep, 1); epoch++ {
			m, err := c.trainer.UpdateUntil(seqs, lr, stop)
			if err != nil {
				return err
			}
			if epoch == 0 { // its first micro-batches ran before any update: rollout and trainer weights agree
				probeMax = m.MaxLogProbDiff
				metrics[event.MetricLogProbDiffMean] = m.MeanLogProbDiff
				metrics[event.MetricClipFrac], metrics[event.MetricGradNorm], metrics[event.MetricEntropy], metrics[event.MetricRefKL] = m.ClipFrac, m.GradNorm, m.Entropy, m.RefKL
				metrics[event.MetricUpdates] = float64(m.Updates)
				if c.recipe.Algorithm.Name == "ppo" {
					metrics[event.MetricValueLoss], metrics[event.MetricExplainedVariance] = m.ValueLoss, m.ExplainedVariance
				}
			}
			loss = m.Loss
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c.remote != nil {
		probeMax, metrics[event.MetricLogProbDiffMean] = engineMax, engineMean
	}
	metrics[event.MetricLoss] = loss
	metrics[event.MetricLogProbDiffMax] = probeMax
	if probeMax > c.opts.LogProbAlarm {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmLogProbMismatch, Value: probeMax, Threshold: c.opts.LogProbAlarm,
			Message: "rollout and trainer log-probs disagree: the inference weights may be stale"})
	}
	c.phase(step, event.PhaseTrain, t0)
	return nil
}

// syncWeights is the sync phase: with rollout.engines the policy pushed to them (while the master
// weights the probe is scored on are still on the device), then the inference copy rebuilt from
// the master weights and checked equal to them (sync_diff_max; above 0 raises stale_weights).
func (c *Controller) syncWeights(step int, metrics map[event.Metric]float64) error {
	t0 := time.Now()
	if err := c.syncEngines(step, metrics); err != nil {
		return err
	}
	t1 := time.Now()
	diff, err := c.dev.ToRollout(step)
	if err != nil {
		return err
	}
	metrics[event.MetricSyncDiffMax] = diff
	metrics[event.MetricSwitchToRolloutSeconds] = time.Since(t1).Seconds()
	if diff > 0 {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmStaleWeights, Value: diff, Threshold: 0,
			Message: "after the sync the inference weights differ from the cast master weights"})
	}
	c.phase(step, event.PhaseSync, t0)
	return nil
}

// batchMetrics puts what the step's trained batch scored in metrics: reward, accuracy, hints,
// drops, the judge's unparsed replies and the generator's decode speed.
func (c *Controller) batchMetrics(step int, trajs, dropped []*batch.Trajectory, hinted int, metrics map[event.Metric]float64) {
	r := c.recipe
	var meanReward, correct float64
	for _, t := range trajs {
		meanReward += t.Reward.Total
		if t.Summary.Correct {
			correct++
		}
	}
	metrics[event.MetricRewardMean] = meanReward / float64(len(trajs))
	metrics[event.MetricAccuracy] = correct / float64(len(trajs))
	metrics[event.MetricHintedShare] = float64(hinted) / float64(len(trajs))
	c.agentEnv.DropMetrics(metrics, dropped)
	c.partialMetrics(metrics)
	if alarm := c.hints.Metrics(step, trajs, c.probe, metrics); alarm != nil {
		c.emit(*alarm)
	}
	if r.PRMModel() { // only then, so that other runs' metrics (and fingerprints) are as they were
		judged, malformed, unjudged, hinted := hint.PRMCounts(trajs)
		metrics[event.MetricPRMJudged] = float64(judged)
		metrics[event.MetricPRMMalformed] = float64(malformed)
		metrics[event.MetricPRMUnjudged] = float64(unjudged)
		metrics[event.MetricHintRate] = float64(hinted) / float64(max(judged, 1))
		if final, steps, ok := hint.PRMAgreement(trajs, mathverify.Options{LastNumberFallback: r.Reward.LastNumberFallback}); ok {
			metrics[event.MetricPRMAgreementFinal] = final
			metrics[event.MetricPRMAgreementSteps] = steps
		}
	}
	if r.Hinter.Kind == "self" || r.Hinter.Kind == "openai" || r.PRM.Kind == "judge" {
		metrics[event.MetricJudgeUnparsed] = float64(c.hints.Unparsed()) // replies with no usable \boxed{}
	}
	if c.remote != nil { // the engines generated the step (a local engine kept for a judge did not): their tokens over the rollout phase's time
		metrics[event.MetricTokensPerSecond] = float64(c.remoteTok) / max(c.phases[event.PhaseRollout], 1e-9)
		return
	}
	st := c.gen.Stats()
	metrics[event.MetricTokensPerSecond] = float64(st.Tokens) / max(st.StepTime.Seconds(), 1e-9)
}
