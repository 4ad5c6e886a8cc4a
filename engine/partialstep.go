package engine

import (
	"context"
	"fmt"
	"math"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/play"
	"agentrl/engine/train"
	"agentrl/envs"
)

// partialStep is what a step's partial rollout left for the rest of the step: its counts and
// the trajectories it paused (shown and stored as paused).
type partialStep struct {
	stats  play.PartialStats
	paused []*batch.Trajectory
}

// rolloutPartial is a step's rollout phase with partial rollouts (engine/play/partial.go): the
// paused trajectories resume and new groups start, the phase ends once tasks_per_step groups are
// done, and the samples of the groups done come back to train on.
func (c *Controller) rolloutPartial(ctx context.Context, step int, seed uint64) ([]*batch.Trajectory, event.Generation, error) {
	var st play.PartialStats
	version := step - 1
	run := c.players.PreparePartial(step, version, func(id int) envs.Task { return c.train[id%len(c.train)] }, &st)
	tk := c.newTracker(step, event.PhaseRollout, run)
	g, err := c.players.RunPartial(ctx, step, version, run, seed, c.recipe.Rollout.Temperature, tk.finished)
	if err != nil {
		return nil, event.Generation{}, err
	}
	ev := g.Event(step, event.PhaseRollout)
	c.emit(ev)
	trained, paused := c.players.CollectPartial(version, &st)
	c.partial = partialStep{stats: st, paused: paused}
	if len(trained) == 0 {
		return nil, ev, fmt.Errorf("engine: step %d: every sample of the groups its rollout completed was more than rollout.partial.max_staleness (%d) updates old; raise it", step, c.recipe.Rollout.Partial.MaxStaleness)
	}
	return trained, ev, nil
}

// partialMetrics puts the step's partial-rollout counts in metrics: trajectories paused at the
// phase's end and resumed in it, samples dropped as too stale, and the mean staleness (updates
// between the oldest token's weights and the trained ones) of the trained batch.
func (c *Controller) partialMetrics(metrics map[event.Metric]float64) {
	if c.players.Partial == nil {
		return
	}
	st := c.partial.stats
	metrics[event.MetricPaused], metrics[event.MetricResumed], metrics[event.MetricStaleDropped] = float64(st.Paused), float64(st.Resumed), float64(st.StaleDropped)
	metrics[event.MetricStalenessMean] = st.Staleness / float64(max(st.Trained, 1))
}

// decouple rewrites, for the decoupled objective (train.Decoupled), the sequences holding tokens
// sampled by another policy than the weights about to be updated: tokens of older policy versions
// (partial rollouts) and, with engines (all true), every sampled token, since the engines sample
// from their own copy of the weights (bf16, their kernels). The proximal log-probs are the
// trainer's, computed here before the update. It returns the mismatch of the rewritten tokens,
// |proximal − sampled log-prob|, its max and mean (0, 0 when none was rewritten).
func (c *Controller) decouple(step int, trajs []*batch.Trajectory, seqs []train.Sequence, all bool) (maxDiff, meanDiff float64, err error) {
	version := step - 1
	var idx []int
	var toks [][]int32
	stale := make([][]bool, len(trajs))
	for i, t := range trajs {
		for j, m := range t.Mask {
			if m && (all || j < len(t.Versions) && int(t.Versions[j]) < version) {
				if stale[i] == nil {
					stale[i] = make([]bool, len(t.Tokens))
					idx, toks = append(idx, i), append(toks, t.Tokens)
				}
				stale[i][j] = true
			}
		}
	}
	if len(idx) == 0 {
		return 0, 0, nil
	}
	prox, err := c.trainer.SequenceLogProbs(nil, toks)
	if err != nil {
		return 0, 0, err
	}
	var sum float64
	var n int
	for k, i := range idx {
		for j, v := range stale[i] {
			if v && j < len(seqs[i].OldLogProbs) {
				d := math.Abs(float64(prox[k][j]) - float64(seqs[i].OldLogProbs[j]))
				maxDiff, sum, n = max(maxDiff, d), sum+d, n+1
			}
		}
		if seqs[i], err = train.Decoupled(seqs[i], prox[k], stale[i]); err != nil {
			return 0, 0, err
		}
	}
	return maxDiff, sum / float64(max(n, 1)), nil
}
