package engine

import (
	"agentrl/engine/advantage"
	"agentrl/engine/batch"
	"agentrl/engine/stopping"
)

// referenceForward runs the frozen reference model over the step's trajectories: as the OPD
// teacher on [prompt + hint + response] for every hinted trajectory, and on the trajectory itself
// when the recipe has a KL term (loss or reward penalty). A stop ends it between trajectories
// (stopping.ErrStop): nothing is trained yet.
func (c *Controller) referenceForward(trajs []*batch.Trajectory) error {
	kl := c.recipe.Algorithm.KLCoef > 0
	gated, measured, err := c.hints.Gate(trajs)
	if err != nil {
		return err
	}
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
	c.probe, err = c.hints.MeasureLift(trajs)
	c.probe.Gated, c.probe.GateMeasured = gated, measured
	return err
}

// advantages sets each trajectory's per-token advantages from the recipe's algorithm (see
// engine/advantage) and returns how many trajectories had a teacher.
func (c *Controller) advantages(trajs []*batch.Trajectory) (hinted int, err error) {
	return advantage.Of(c.recipe, trajs, c.trainer.Values)
}
