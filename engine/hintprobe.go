package engine

import (
	"context"
	"fmt"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/envs"
	"agentrl/envs/retool"
)

// maxLiftProbes bounds the hinted trajectories whose hint lift is measured per step: each costs
// one or two reference forwards.
const maxLiftProbes = 8

// hintProbe is what the usefulness probe measured in a step's reference phase.
type hintProbe struct {
	lift   float64 // mean over probed trajectories of the hint's lift of a correct continuation
	probed int     // trajectories with a correct sibling whose lift was measured
	// The same lift on the task's reference demonstration (its reference program run through
	// the tool, then the answer boxed): a correct continuation that does not move with the
	// policy, so it says whether the teacher can read the hint apart from where RL has taken the
	// policy's samples.
	demoLift   float64
	demoProbed int
}

// demoScore is a task's reference demonstration as the probe scores it: its turns and the
// reference model's log-prob of each of its own tokens without a hint (the reference is frozen,
// so this is computed once per task).
type demoScore struct {
	turns   []envs.Message
	without []float32
}

// measureHintLift asks, for up to maxLiftProbes hinted trajectories that have a correct sibling
// in their group (a known right continuation of the same task), how much the hint raises the
// reference model's log-prob of that sibling's response: the mean over its policy tokens of
// log p_ref(token | prompt + hint) − log p_ref(token | prompt). A hint that helps makes the right
// answer more likely; one the teacher cannot read leaves it flat or lowers it.
func (c *Controller) measureHintLift(trajs []*batch.Trajectory) (hintProbe, error) {
	var p hintProbe
	plain := map[*batch.Trajectory][]float32{} // a sibling's response log-probs without a hint, computed once
	for _, t := range trajs {
		if p.probed == maxLiftProbes {
			break
		}
		if c.stopping() {
			return p, errStop
		}
		if t.Hint == "" || t.Summary.Correct {
			continue
		}
		var u *batch.Trajectory
		for _, s := range trajs {
			if s.Group == t.Group && s.Summary.Correct {
				u = s
				break
			}
		}
		if u == nil {
			continue
		}
		with, err := c.responseLogProbs(u, t.Hint)
		if err != nil {
			return p, err
		}
		if with == nil {
			continue
		}
		without, ok := plain[u]
		if !ok {
			if without, err = c.responseLogProbs(u, ""); err != nil {
				return p, err
			}
			plain[u] = without
		}
		var sum float64
		var n int
		for j := range with {
			if u.Mask[u.PromptLen+j] {
				sum += float64(with[j] - without[j])
				n++
			}
		}
		if n > 0 {
			p.lift += sum / float64(n)
			p.probed++
		}
	}
	if p.probed > 0 {
		p.lift /= float64(p.probed)
	}
	for _, t := range trajs {
		if p.demoProbed == maxLiftProbes {
			break
		}
		if c.stopping() {
			return p, errStop
		}
		if t.Hint == "" || t.Summary.Correct || t.Agent != nil || t.Task.Meta["code"] == "" {
			continue
		}
		lift, ok, err := c.demoLift(t)
		if err != nil {
			return p, err
		}
		if ok {
			p.demoLift += lift
			p.demoProbed++
		}
	}
	if p.demoProbed > 0 {
		p.demoLift /= float64(p.demoProbed)
	}
	return p, nil
}

// demoLift is the hint's lift of t's task's reference demonstration: the mean over the
// demonstration's own tokens of log p_ref(token | prompt + t.hint) − log p_ref(token | prompt).
// ok is false where the task has no demonstration.
func (c *Controller) demoLift(t *batch.Trajectory) (lift float64, ok bool, err error) {
	d, err := c.demonstration(t)
	if err != nil || d == nil {
		return 0, false, err
	}
	with, err := demoLogProbs(c.o.Reference, c.o.Tokenizer, retool.SystemFor(c.r.Env.Observation.Format), t.Task, d.turns, t.Hint)
	if err != nil {
		return 0, false, err
	}
	lift, err = meanLift(t.Task, with, d.without)
	return lift, err == nil, err
}

// demonstration returns t's task's reference demonstration, in the run's observation format and
// scored without a hint; nil when the reference code does not give the answer. It is built and
// scored once per task.
func (c *Controller) demonstration(t *batch.Trajectory) (*demoScore, error) {
	if d, ok := c.demos[t.Task.ID]; ok {
		return d, nil
	}
	if c.demos == nil {
		c.demos = map[string]*demoScore{}
	}
	format := c.r.Env.Observation.Format
	sess, err := c.ro.exec.NewSession()
	if err != nil {
		return nil, err
	}
	turns, err := retool.Demonstration(context.Background(), t.Task, retool.DemoTool, sess, format)
	sess.Close()
	if err != nil { // a task whose program does not print its answer has no demonstration to probe with
		c.demos[t.Task.ID] = nil
		return nil, nil
	}
	d := &demoScore{turns: turns}
	if d.without, err = demoLogProbs(c.o.Reference, c.o.Tokenizer, retool.SystemFor(format), t.Task, turns, ""); err != nil {
		return nil, err
	}
	c.demos[t.Task.ID] = d
	return d, nil
}

// responseLogProbs scores u's response after u's task prompt rendered with hint ("" for none):
// the reference model's log-prob of each token from u.promptLen on.
func (c *Controller) responseLogProbs(u *batch.Trajectory, hint string) ([]float32, error) {
	tp, ok, err := c.teacherPrompt(u, hint)
	if err != nil || !ok {
		return nil, err // !ok: an agent's prompt without the problem's text, where no hint goes
	}
	resp := u.Tokens[u.PromptLen:]
	s, err := c.o.Reference.Score([][]int32{append(append([]int32{}, tp...), resp...)})
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(resp))
	for j := range resp {
		out[j] = s.NextLogProbs[0][len(tp)+j-1]
	}
	return out, nil
}

// hintMetrics adds the step's hint figures: how many hints were shortened or dropped to fit
// hinter.max_hint_tokens, and the usefulness probe — hint_gain, the mean teacher − student
// log-prob over hinted responses, and hint_lift (measureHintLift) where a group had a correct
// sample. A probe at or below zero raises the hint_useless alarm: the teacher signal is then noise
// that centring and clipping hide, and the run is outcome-only GRPO at a teacher's cost.
func (c *Controller) hintMetrics(step int, trajs []*batch.Trajectory, metrics map[string]float64) {
	var shortened, dropped, hinted int
	var gain float64
	for _, t := range trajs {
		switch t.HintCut {
		case hintShortened:
			shortened++
		case hintDropped:
			dropped++
		}
		if t.TeacherLogProbs == nil {
			continue
		}
		var sum float64
		var n int
		for j := t.PromptLen; j < len(t.Tokens); j++ {
			if t.Mask[j] {
				sum += float64(t.TeacherLogProbs[j] - t.LogProbs[j])
				n++
			}
		}
		if n > 0 {
			gain += sum / float64(n)
			hinted++
		}
	}
	if c.hinter == nil {
		return
	}
	metrics["hints_shortened"], metrics["hints_dropped"] = float64(shortened), float64(dropped)
	if hinted == 0 {
		return
	}
	metrics["hint_gain"] = gain / float64(hinted)
	probe, what := metrics["hint_gain"], "hint_gain, teacher − student log-prob on hinted responses"
	if c.probe.demoProbed > 0 {
		metrics["hint_lift_demo"], metrics["hint_lift_demo_probed"] = c.probe.demoLift, float64(c.probe.demoProbed)
	}
	if c.probe.probed > 0 {
		metrics["hint_lift"], metrics["hint_lift_probed"] = c.probe.lift, float64(c.probe.probed)
		probe, what = c.probe.lift, "hint_lift, the hint's effect on the reference's log-prob of a correct sample"
	}
	if probe <= 0 {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmHintUseless, Value: probe, Threshold: 0, Below: true,
			Message: fmt.Sprintf("hints do not help the teacher (%s): the OPD term is noise and the run is GRPO at extra cost", what)})
	}
}
