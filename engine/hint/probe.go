package hint

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

// Probe is what the usefulness probe measured in a step's reference phase.
type Probe struct {
	lift   float64 // mean over probed trajectories of the hint's lift of a correct continuation
	probed int     // trajectories with a correct sibling whose lift was measured
	// The same lift on the task's reference demonstration (its reference program run through
	// the tool, then the answer boxed): a correct continuation that does not move with the
	// policy, so it says whether the teacher can read the hint apart from where RL has taken the
	// policy's samples.
	demoLift   float64
	demoProbed int
	// Gated and GateMeasured are hinter.gate lift's count of hints dropped before the teacher
	// read them and of hints it measured (Gate).
	Gated, GateMeasured int
}

// Demo is a task's reference demonstration as the probe scores it: its turns and the reference
// model's log-prob of each of its own tokens without a hint (the reference is frozen, so this is
// computed once per task).
type Demo struct {
	Turns   []envs.Message
	Without []float32
}

// Demos are the demonstrations the probe has scored so far, by task id (nil: the task's program
// does not print its answer).
func (h *Hinting) Demos() map[string]*Demo { return h.demos }

// MeasureLift asks, for up to maxLiftProbes hinted trajectories that have a correct sibling
// in their group (a known right continuation of the same task), how much the hint raises the
// reference model's log-prob of that sibling's response: the mean over its policy tokens of
// log p_ref(token | prompt + hint) − log p_ref(token | prompt). A hint that helps makes the right
// answer more likely; one the teacher cannot read leaves it flat or lowers it.
func (h *Hinting) MeasureLift(trajs []*batch.Trajectory) (Probe, error) {
	var p Probe
	plain := map[*batch.Trajectory][]float32{} // a sibling's response log-probs without a hint, computed once
	for _, t := range trajs {
		if p.probed == maxLiftProbes {
			break
		}
		if err := h.cfg.Interrupt(); err != nil {
			return p, err
		}
		if t.Hint == "" || t.Summary.Correct {
			continue
		}
		u := correctSibling(t, trajs)
		if u == nil {
			continue
		}
		lift, ok, err := h.responseLift(u, t.Hint, plain)
		if err != nil {
			return p, err
		}
		if ok {
			p.lift += lift
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
		if err := h.cfg.Interrupt(); err != nil {
			return p, err
		}
		if t.Hint == "" || t.Summary.Correct || t.Agent != nil || t.Task.Meta["code"] == "" {
			continue
		}
		lift, ok, err := h.demoLift(t)
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
func (h *Hinting) demoLift(t *batch.Trajectory) (lift float64, ok bool, err error) {
	key := liftKey{t.Task.ID, t.Hint}
	if lift, ok := h.lifts[key]; ok {
		return lift, true, nil
	}
	d, err := h.demonstration(t)
	if err != nil || d == nil {
		return 0, false, err
	}
	with, err := demoLogProbs(h.cfg.Reference, h.cfg.Tokenizer, retool.SystemFor(h.cfg.Recipe.Env.Observation.Format), t.Task, d.Turns, t.Hint)
	if err != nil {
		return 0, false, err
	}
	if lift, err = meanLift(t.Task, with, d.Without); err != nil {
		return 0, false, err
	}
	if h.lifts == nil {
		h.lifts = map[liftKey]float64{}
	}
	h.lifts[key] = lift
	return lift, true, nil
}

// demonstration returns t's task's reference demonstration, in the run's observation format and
// scored without a hint; nil when the reference code does not give the answer. It is built and
// scored once per task.
func (h *Hinting) demonstration(t *batch.Trajectory) (*Demo, error) {
	if d, ok := h.demos[t.Task.ID]; ok {
		return d, nil
	}
	if h.demos == nil {
		h.demos = map[string]*Demo{}
	}
	format := h.cfg.Recipe.Env.Observation.Format
	sess, err := h.cfg.Exec.NewSession()
	if err != nil {
		return nil, err
	}
	turns, err := retool.Demonstration(context.Background(), t.Task, retool.DemoTool, sess, format)
	sess.Close()
	if err != nil { // a task whose program does not print its answer has no demonstration to probe with
		h.demos[t.Task.ID] = nil
		return nil, nil
	}
	d := &Demo{Turns: turns}
	if d.Without, err = demoLogProbs(h.cfg.Reference, h.cfg.Tokenizer, retool.SystemFor(format), t.Task, turns, ""); err != nil {
		return nil, err
	}
	h.demos[t.Task.ID] = d
	return d, nil
}

// responseLogProbs scores u's response after u's task prompt rendered with hint ("" for none):
// the reference model's log-prob of each token from u.promptLen on.
func (h *Hinting) responseLogProbs(u *batch.Trajectory, hint string) ([]float32, error) {
	tp, ok, err := h.cfg.TeacherPrompt(u, hint)
	if err != nil || !ok {
		return nil, err // !ok: an agent's prompt without the problem's text, where no hint goes
	}
	lp, err := h.cfg.Reference.LogProbsFrom(append(append([]int32{}, tp...), u.Tokens[u.PromptLen:]...), len(tp))
	if err != nil {
		return nil, err
	}
	return lp[len(tp):], nil
}

// Metrics adds the step's hint figures: how many hints were shortened or dropped to fit
// hinter.max_hint_tokens, and the usefulness probe — hint_gain, the mean teacher − student
// log-prob over hinted responses, and hint_lift and hint_lift_demo (MeasureLift's probe of the
// step) where a group had a correct sample. A probe at or below zero returns the hint_useless
// alarm: the teacher signal is then noise that centring and clipping hide, and the run is
// outcome-only GRPO at a teacher's cost.
func (h *Hinting) Metrics(step int, trajs []*batch.Trajectory, probe Probe, metrics map[event.Metric]float64) *event.Alarm {
	var shortened, dropped, hinted int
	var gain float64
	for _, t := range trajs {
		switch t.HintCut {
		case Shortened:
			shortened++
		case Dropped:
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
	if h.Hinter == nil && h.PRM == nil { // no hints: nothing to probe (the model PRM's are probed as the rules')
		return nil
	}
	metrics[event.MetricHintsShortened], metrics[event.MetricHintsDropped] = float64(shortened), float64(dropped)
	if h.cfg.Recipe.Hinter.Gate == "lift" {
		metrics[event.MetricHintsGated], metrics[event.MetricHintsGateMeasured] = float64(probe.Gated), float64(probe.GateMeasured)
	}
	if hinted == 0 {
		return nil
	}
	metrics[event.MetricHintGain] = gain / float64(hinted)
	value, what := metrics[event.MetricHintGain], "hint_gain, teacher − student log-prob on hinted responses"
	if probe.demoProbed > 0 {
		metrics[event.MetricHintLiftDemo], metrics[event.MetricHintLiftDemoProbed] = probe.demoLift, float64(probe.demoProbed)
	}
	if probe.probed > 0 {
		metrics[event.MetricHintLift], metrics[event.MetricHintLiftProbed] = probe.lift, float64(probe.probed)
		value, what = probe.lift, "hint_lift, the hint's effect on the reference's log-prob of a correct sample"
	}
	if value > 0 {
		return nil
	}
	msg := fmt.Sprintf("hints do not help the teacher (%s): the OPD term is noise and the run is GRPO at extra cost", what)
	if h.cfg.Recipe.Hinter.Gate != "lift" {
		msg += "; hinter.gate: lift keeps only the hints that raise it"
	}
	return &event.Alarm{Step: step, Kind: event.AlarmHintUseless, Value: value, Threshold: 0, Below: true, Message: msg}
}
