package engine

import (
	"math"

	"agentrl/engine/train"
)

// referenceForward runs the frozen reference model over the step's trajectories: as the OPD
// teacher on [prompt + hint + response] for every hinted trajectory, and on the trajectory itself
// when the recipe has a KL term (loss or reward penalty). A stop ends it between trajectories
// (errStop): nothing is trained yet.
func (c *Controller) referenceForward(batch []*traj) error {
	kl := c.r.Algorithm.KLCoef > 0
	for _, t := range batch {
		if c.stopping() {
			return errStop
		}
		if kl {
			s, err := c.o.Reference.Score([][]int32{t.tokens})
			if err != nil {
				return err
			}
			// The log-prob of token j is entry j − 1 of the next-token log-probs; the prompt's
			// first token has none (it is never a policy token).
			t.ref = make([]float32, len(t.tokens))
			copy(t.ref[1:], s.NextLogProbs[0][:len(t.tokens)-1])
		}
		if t.hint == "" {
			continue
		}
		tp, ok, err := c.teacherPrompt(t, t.hint)
		if err != nil {
			return err
		}
		if !ok { // hindsight places only the hints it can
			continue
		}
		seq := append(append([]int32{}, tp...), t.tokens[t.promptLen:]...)
		s, err := c.o.Reference.Score([][]int32{seq})
		if err != nil {
			return err
		}
		// Align: the teacher's log-prob of student token j (j ≥ promptLen) is at index
		// len(tp) + (j − promptLen) − 1 of its next-token log-probs.
		t.teacher = make([]float32, len(t.tokens))
		for j := t.promptLen; j < len(t.tokens); j++ {
			t.teacher[j] = s.NextLogProbs[0][len(tp)+j-t.promptLen-1]
		}
	}
	var err error
	c.probe, err = c.measureHintLift(batch)
	return err
}

// advantages sets each trajectory's per-token advantages from the recipe's algorithm: the group
// baseline (mean or leave-one-out, optionally ÷ group std) on every policy token, plus
// opd_lambda × the centred, clipped OPD advantage on hinted trajectories (hybrid, or alone for
// opd), minus kl_coef × KL per token when the KL is a reward penalty. It returns how many
// trajectories had a teacher.
func (c *Controller) advantages(batch []*traj) (hinted int, err error) {
	a := c.r.Algorithm
	if a.Name == "ppo" {
		return 0, c.gaeAdvantages(batch)
	}
	// One reward per trajectory: an external agent's later segments (external.go) take their
	// trajectory's sequence advantage and do not count again in the group's statistics.
	rewards := make([]float64, 0, len(batch))
	groups := make([]int, 0, len(batch))
	at := make([]int, len(batch)) // sequence i's trajectory, an index into rewards
	of := map[*traj]int{}
	for i, t := range batch {
		if !isLaterSegment(t) {
			at[i], of[t] = len(rewards), len(rewards)
			rewards, groups = append(rewards, t.reward.Total), append(groups, t.group)
		}
	}
	for i, t := range batch {
		if isLaterSegment(t) {
			at[i] = of[t.ext.of]
		}
	}
	var seqAdv []float64
	switch {
	case a.Name == "opd":
		seqAdv = make([]float64, len(rewards)) // the teacher alone
	case a.PassK > 0:
		if seqAdv, err = train.BestOfK(rewards, groups, a.PassK, a.StdNormalize, 1e-6); err != nil {
			return 0, err
		}
	case a.Baseline == "rloo":
		if seqAdv, err = train.RLOO(rewards, groups); err != nil {
			return 0, err
		}
		if a.StdNormalize {
			divideGroupStd(seqAdv, rewards, groups, 1e-6)
		}
	default:
		if seqAdv, err = train.GRPO(rewards, groups, a.StdNormalize, 1e-6); err != nil {
			return 0, err
		}
	}
	for i, t := range batch {
		var opd []float64
		if t.teacher != nil {
			hinted++
			if opd, err = train.OPD(t.teacher, t.lps, t.mask); err != nil {
				return 0, err
			}
			opd = train.CenterClip(opd, t.mask, opdClip)
		}
		adv := train.Hybrid(seqAdv[at[i]], opd, t.mask, a.OPDLambda)
		if a.KLCoef > 0 && a.KLMode == "reward" {
			if adv, err = train.KLRewardPenalty(adv, t.lps, t.ref, t.mask, a.KLCoef, a.KLEstimator); err != nil {
				return 0, err
			}
		}
		t.adv = train.Float32s(adv)
	}
	return hinted, nil
}

// gaeAdvantages is ppo's: the value head predicts V before each policy token, GAE over the
// policy tokens (observations are not actions) turns the outcome reward — and the per-token KL
// penalty when the KL is a reward — into advantages and value targets; with std_normalize the
// advantages are whitened over every policy token of the step.
func (c *Controller) gaeAdvantages(batch []*traj) error {
	a := c.r.Algorithm
	seqs := make([]train.Sequence, len(batch))
	for i, t := range batch {
		seqs[i] = train.Sequence{Tokens: t.tokens, LossMask: t.mask}
	}
	values, err := c.tr.Values(seqs)
	if err != nil {
		return err
	}
	var sum, sq, n float64
	for i, t := range batch {
		var perToken []float64
		if a.KLCoef > 0 && a.KLMode == "reward" {
			if perToken, err = train.TokenRewards(0, t.lps, t.ref, t.mask, a.KLCoef, a.KLEstimator); err != nil {
				return err
			}
		}
		if t.adv, t.ret, err = train.TokenGAE(t.mask, values[i], t.reward.Total, perToken, a.GAEGamma, a.GAELambda); err != nil {
			return err
		}
		t.oldValues = values[i]
		for j, m := range t.mask {
			if m {
				x := float64(t.adv[j])
				sum, sq, n = sum+x, sq+x*x, n+1
			}
		}
	}
	if a.StdNormalize && n > 1 {
		mean := sum / n
		std := math.Sqrt(math.Max(sq/n-mean*mean, 0))
		for _, t := range batch {
			for j, m := range t.mask {
				if m {
					t.adv[j] = float32((float64(t.adv[j]) - mean) / (std + 1e-6))
				}
			}
		}
	}
	return nil
}

// divideGroupStd divides each advantage by the standard deviation of its group's rewards (+ eps).
func divideGroupStd(adv, rewards []float64, groups []int, eps float64) {
	sum, sq, n := map[int]float64{}, map[int]float64{}, map[int]float64{}
	for i, r := range rewards {
		sum[groups[i]] += r
		sq[groups[i]] += r * r
		n[groups[i]]++
	}
	for i := range adv {
		g := groups[i]
		mean := sum[g] / n[g]
		std := math.Sqrt(math.Max(sq[g]/n[g]-mean*mean, 0))
		adv[i] /= std + eps
	}
}
