package engine

import (
	"agentrl/engine/advantage"
	"agentrl/engine/batch"
	"agentrl/engine/stopping"
)

// referenceForward runs the frozen reference model over the step's trajectories: as the OPD
// teacher on [prompt + hint + response] for every hinted trajectory, and on the trajectory itself
// when the recipe has a KL term (loss or reward penalty), after hinter.gate has dropped the hints
// the teacher cannot read. A stop ends it between trajectories (stopping.ErrStop): nothing is
// trained yet.
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
			// The response's tokens only: every policy token comes after the prompt (the prompt's
			// entries stay 0), and with a real vocabulary only their positions are projected.
			if t.RefLogProbs, err = c.opts.Reference.LogProbsFrom(t.Tokens, t.PromptLen); err != nil {
				return err
			}
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
		lp, err := c.opts.Reference.LogProbsFrom(seq, len(tp))
		if err != nil {
			return err
		}
		// Align: the teacher's log-prob of student token j (j ≥ promptLen) is that of token
		// len(tp) + (j − promptLen) of its sequence.
		t.TeacherLogProbs = make([]float32, len(t.Tokens))
		copy(t.TeacherLogProbs[t.PromptLen:], lp[len(tp):])
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
