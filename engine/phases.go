package engine

import (
	"agentrl/engine/batch"
	"agentrl/engine/hint"
	"agentrl/engine/stopping"
	"agentrl/engine/train"
)

// opdClip bounds each token's centred OPD advantage (see train.CenterClip): a teacher that is
// unsure of a digit must not outweigh the outcome, whose GRPO advantage is about ±1 to ±3.
const opdClip = 1.0

// referenceForward runs the frozen reference model over the step's trajectories: as the OPD
// teacher on [prompt + hint + response] for every hinted trajectory, and on the trajectory itself
// when the recipe has a KL term (loss or reward penalty). A stop ends it between trajectories
// (stopping.ErrStop): nothing is trained yet.
func (c *Controller) referenceForward(trajs []*batch.Trajectory) error {
	kl := c.recipe.Algorithm.KLCoef > 0
	for _, t := range trajs {
		if c.stop.Stopping() {
			return stopping.ErrStop
		}
		if kl {
			s, err := c.opts.Reference.Score([][]int32{t.Tokens})
			if err != nil {
				return err
			}
			// The log-prob of token j is entry j − 1 of the next-token log-probs; the prompt's
			// first token has none (it is never a policy token).
			t.RefLogProbs = make([]float32, len(t.Tokens))
			copy(t.RefLogProbs[1:], s.NextLogProbs[0][:len(t.Tokens)-1])
		}
		if t.Hint == "" {
			continue
		}
		tp, ok, err := c.teacherPrompt(t, t.Hint)
		if err != nil {
			return err
		}
		if !ok { // hindsight places only the hints it can
			continue
		}
		seq := append(append([]int32{}, tp...), t.Tokens[t.PromptLen:]...)
		s, err := c.opts.Reference.Score([][]int32{seq})
		if err != nil {
			return err
		}
		// Align: the teacher's log-prob of student token j (j ≥ promptLen) is at index
		// len(tp) + (j − promptLen) − 1 of its next-token log-probs.
		t.TeacherLogProbs = make([]float32, len(t.Tokens))
		for j := t.PromptLen; j < len(t.Tokens); j++ {
			t.TeacherLogProbs[j] = s.NextLogProbs[0][len(tp)+j-t.PromptLen-1]
		}
	}
	var err error
	c.probe, err = c.hints.MeasureLift(trajs)
	return err
}

// advantages sets each trajectory's per-token advantages from the recipe's algorithm: the group
// baseline (mean or leave-one-out, optionally ÷ group std) on every policy token, plus
// opd_lambda × the centred, clipped OPD advantage on hinted trajectories (hybrid, or alone for
// opd), minus kl_coef × KL per token when the KL is a reward penalty. It returns how many
// trajectories had a teacher.
func (c *Controller) advantages(trajs []*batch.Trajectory) (hinted int, err error) {
	a := c.recipe.Algorithm
	if a.Name == "ppo" {
		return 0, c.gaeAdvantages(trajs)
	}
	// One reward per trajectory: an external agent's later segments (external.go) take their
	// trajectory's sequence advantage and do not count again in the group's statistics.
	rewards := make([]float64, 0, len(trajs))
	groups := make([]int, 0, len(trajs))
	at := make([]int, len(trajs)) // sequence i's trajectory, an index into rewards
	of := map[*batch.Trajectory]int{}
	for i, t := range trajs {
		if !t.IsLaterSegment() {
			at[i], of[t] = len(rewards), len(rewards)
			rewards, groups = append(rewards, t.Reward.Total), append(groups, t.Group)
		}
	}
	for i, t := range trajs {
		if t.IsLaterSegment() {
			at[i] = of[t.SegmentOf]
		}
	}
	est := train.Estimator{Algorithm: a.Name, Baseline: a.Baseline, PassK: a.PassK, StdNormalize: a.StdNormalize}
	seqAdv, err := est.SequenceAdvantages(rewards, groups)
	if err != nil {
		return 0, err
	}
	// step_wise: each step's process advantage from the PRM's verdicts (train.StepWise), added
	// with weight reward.process on that step's tokens. An agent's later segments get none.
	var proc [][]float64
	if a.Estimator == "step_wise" {
		steps := make([][]float64, len(rewards))
		for i, t := range trajs {
			if !t.IsLaterSegment() {
				steps[at[i]] = hint.StepRewards(t)
			}
		}
		if proc, err = train.StepWise(steps, groups, a.StdNormalize, 1e-6); err != nil {
			return 0, err
		}
	}
	for i, t := range trajs {
		var opd []float64
		if t.TeacherLogProbs != nil {
			hinted++
			if opd, err = train.OPD(t.TeacherLogProbs, t.LogProbs, t.Mask); err != nil {
				return 0, err
			}
			opd = train.CenterClip(opd, t.Mask, opdClip)
		}
		adv := train.Hybrid(seqAdv[at[i]], opd, t.Mask, a.OPDLambda)
		if proc != nil && !t.IsLaterSegment() {
			train.StepTokens(adv, proc[at[i]], t.Mask, c.recipe.Reward.Process)
		}
		if a.KLCoef > 0 && a.KLMode == "reward" {
			if adv, err = train.KLRewardPenalty(adv, t.LogProbs, t.RefLogProbs, t.Mask, a.KLCoef, a.KLEstimator); err != nil {
				return 0, err
			}
		}
		t.Advantages = train.Float32s(adv)
	}
	return hinted, nil
}

// gaeAdvantages is ppo's: the value head predicts V before each policy token, GAE over the
// policy tokens (observations are not actions) turns the outcome reward — and the per-token KL
// penalty when the KL is a reward — into advantages and value targets; with std_normalize the
// advantages are whitened over every policy token of the step.
func (c *Controller) gaeAdvantages(trajs []*batch.Trajectory) error {
	a := c.recipe.Algorithm
	seqs := make([]train.Sequence, len(trajs))
	for i, t := range trajs {
		seqs[i] = train.Sequence{Tokens: t.Tokens, LossMask: t.Mask}
	}
	values, err := c.trainer.Values(seqs)
	if err != nil {
		return err
	}
	for i, t := range trajs {
		var perToken []float64
		if a.KLCoef > 0 && a.KLMode == "reward" {
			if perToken, err = train.TokenRewards(0, t.LogProbs, t.RefLogProbs, t.Mask, a.KLCoef, a.KLEstimator); err != nil {
				return err
			}
		}
		if t.Advantages, t.Returns, err = train.TokenGAE(t.Mask, values[i], t.Reward.Total, perToken, a.GAEGamma, a.GAELambda); err != nil {
			return err
		}
		t.OldValues = values[i]
	}
	if !a.StdNormalize {
		return nil
	}
	adv, masks := make([][]float32, len(trajs)), make([][]bool, len(trajs))
	for i, t := range trajs {
		adv[i], masks[i] = t.Advantages, t.Mask
	}
	return train.Whiten(adv, masks)
}
