package engine

import (
	"context"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/play"
	"agentrl/envs"
)

// generationMetrics puts a rollout's four numbers in a step's metrics.
func generationMetrics(g event.Generation, metrics map[event.Metric]float64) {
	metrics[event.MetricRolloutOccupancy] = g.Occupancy
	metrics[event.MetricRolloutTailSeconds] = g.TailSeconds
	metrics[event.MetricToolStallShare] = g.ToolStallShare
	metrics[event.MetricToolQueueSeconds] = g.ToolQueueSeconds
}

// prompt renders a task's opening messages (see play.Phase.Prompt).
func (c *Controller) prompt(task envs.Task, hint string) ([]int32, error) {
	return c.players.Prompt(task, hint)
}

// rollout runs batch through the rollout phase, reporting progress as phase (rollout, or eval
// for the held-out tasks: then each trajectory is emitted as it finishes, and pass@k over the
// tasks complete so far), and at the end how the phase used the generator's slots
// (event.Generation, also returned).
func (c *Controller) rollout(ctx context.Context, step int, phase string, trajs []*batch.Trajectory, seed uint64, temperature float64) (event.Generation, error) {
	tk := c.newTracker(step, phase, trajs)
	g, err := c.playersFor(phase).Run(ctx, trajs, seed, temperature, tk.finished)
	if err != nil {
		return event.Generation{}, err
	}
	ev := g.Event(step, phase)
	c.emit(ev)
	return ev, nil
}

// teacherPrompt is the prompt the teacher and the hint probe read t's response after, with hint
// before the problem (see play.Phase.TeacherPrompt).
func (c *Controller) teacherPrompt(t *batch.Trajectory, hint string) (ids []int32, ok bool, err error) {
	return c.players.TeacherPrompt(t, hint)
}

// playersFor is the rollout players of a phase: the evaluation's (eval and validate) generate up
// to eval.max_new_tokens per call when it is set, within the evaluation's context
// (eval.max_total_tokens, on the evaluation's own generator when it is longer than rollout's);
// the rest as the recipe's rollout says.
func (c *Controller) playersFor(phase string) *play.Phase {
	r := c.recipe
	n, total := r.Eval.MaxNewTokens, r.EvalTotalTokens()
	if n <= 0 && total == r.Rollout.MaxTotalTokens && c.evalGen == nil || (phase != event.PhaseEval && phase != event.PhaseValidate) {
		return c.players
	}
	p, er := *c.players, *r
	if n > 0 {
		er.Rollout.MaxNewTokens = n
	}
	er.Rollout.MaxTotalTokens = total
	if c.evalGen != nil {
		p.Gen = c.evalGen
	}
	p.Recipe = &er
	return &p
}
