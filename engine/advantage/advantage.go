// Package advantage turns a step's scored trajectories into per-token advantages, as the recipe's
// algorithm says: GRPO's group baseline, the OPD teacher's on hinted trajectories (hybrid), the
// step_wise process advantage, the KL reward penalty, or ppo's GAE over its value head.
package advantage

import (
	"agentrl/engine/batch"
	"agentrl/engine/hint"
	"agentrl/engine/train"
	"agentrl/recipes"
)

// opdClip bounds each token's centred OPD advantage (see train.CenterClip): a teacher that is
// unsure of a digit must not outweigh the outcome, whose GRPO advantage is about ±1 to ±3.
const opdClip = 1.0

// Of sets each trajectory's per-token advantages from r's algorithm: ppo's from its value head's
// predictions (values: the trainer's Values; see gae); the others' the group baseline (mean or
// leave-one-out, optionally ÷ group std) on every policy token, plus opd_lambda × the centred,
// clipped OPD advantage on hinted trajectories (hybrid, or alone for opd), minus kl_coef × KL per
// token when the KL is a reward penalty. It returns how many trajectories had a teacher.
func Of(r *recipes.Recipe, trajs []*batch.Trajectory, values func([]train.Sequence) ([][]float32, error)) (hinted int, err error) {
	a := r.Algorithm
	if a.Name == "ppo" {
		return 0, gae(a, trajs, values)
	}
	seqAdv, proc, at, err := group(a, trajs)
	if err != nil {
		return 0, err
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
			train.StepTokens(adv, proc[at[i]], t.Mask, r.Reward.Process)
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

// group is the group statistics of the step's trajectories: each trajectory's sequence advantage
// and, for step_wise, each of its steps' process advantages, with sequence i's trajectory at
// at[i].
func group(a recipes.Algorithm, trajs []*batch.Trajectory) (seqAdv []float64, proc [][]float64, at []int, err error) {
	// One reward per trajectory: an external agent's later segments take their trajectory's
	// sequence advantage and do not count again in the group's statistics.
	rewards := make([]float64, 0, len(trajs))
	groups := make([]int, 0, len(trajs))
	at = make([]int, len(trajs)) // sequence i's trajectory, an index into rewards
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
	if seqAdv, err = est.SequenceAdvantages(rewards, groups); err != nil {
		return nil, nil, nil, err
	}
	// step_wise: each step's process advantage from the PRM's verdicts (train.StepWise), added
	// with weight reward.process on that step's tokens. An agent's later segments get none.
	if a.Estimator == "step_wise" {
		steps := make([][]float64, len(rewards))
		for i, t := range trajs {
			if !t.IsLaterSegment() {
				steps[at[i]] = hint.StepRewards(t)
			}
		}
		if proc, err = train.StepWise(steps, groups, a.StdNormalize, 1e-6); err != nil {
			return nil, nil, nil, err
		}
	}
	return seqAdv, proc, at, nil
}

// gae is ppo's advantages: the value head predicts V (values) before each policy token, GAE over the
// policy tokens (observations are not actions) turns the outcome reward — and the per-token KL
// penalty when the KL is a reward — into advantages and value targets; with std_normalize the
// advantages are whitened over every policy token of the step.
func gae(a recipes.Algorithm, trajs []*batch.Trajectory, values func([]train.Sequence) ([][]float32, error)) error {
	seqs := make([]train.Sequence, len(trajs))
	for i, t := range trajs {
		seqs[i] = train.Sequence{Tokens: t.Tokens, LossMask: t.Mask}
	}
	vs, err := values(seqs)
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
		if t.Advantages, t.Returns, err = train.TokenGAE(t.Mask, vs[i], t.Reward.Total, perToken, a.GAEGamma, a.GAELambda); err != nil {
			return err
		}
		t.OldValues = vs[i]
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
