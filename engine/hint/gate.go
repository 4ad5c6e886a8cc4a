package hint

import "agentrl/engine/batch"

// Gate applies the recipe's hinter.gate to the step's hints before the teacher reads them. With
// "lift" every hinted trajectory's hint is measured against a known-correct solution of its task
// — the task's reference demonstration where it has one, else a correct trajectory of its group
// (itself when it is correct) — as the probe measures it: the mean over the solution's own tokens
// of log p_ref(token | prompt + hint) − log p_ref(token | prompt). A hint whose lift is not above
// zero is one the teacher cannot read (it makes the right answer no more likely), and is dropped:
// the trajectory trains as GRPO's. A hint with nothing to measure against is kept. It returns how
// many hints it dropped and how many it measured.
func (h *Hinting) Gate(trajs []*batch.Trajectory) (gated, measured int, err error) {
	clear(h.lifts) // a new step: lifts are kept for one step, not for every task and hint a run meets
	if h.cfg.Recipe.Hinter.Gate != "lift" {
		return 0, 0, nil
	}
	plain := map[*batch.Trajectory][]float32{} // a solution's log-probs without a hint, computed once
	for _, t := range trajs {
		if t.Hint == "" {
			continue
		}
		if err := h.cfg.Interrupt(); err != nil {
			return gated, measured, err
		}
		lift, ok, err := h.hintLift(t, trajs, plain)
		if err != nil {
			return gated, measured, err
		}
		if !ok {
			continue
		}
		measured++
		if lift <= 0 {
			t.Hint = ""
			gated++
		}
	}
	return gated, measured, nil
}

// hintLift is t's hint's lift of its task's reference demonstration, or else of a correct
// trajectory's response in t's group; ok is false when neither exists.
func (h *Hinting) hintLift(t *batch.Trajectory, trajs []*batch.Trajectory, plain map[*batch.Trajectory][]float32) (float64, bool, error) {
	if t.Agent == nil && t.Task.Meta["code"] != "" {
		lift, ok, err := h.demoLift(t)
		if err != nil || ok {
			return lift, ok, err
		}
	}
	u := t
	if !t.Summary.Correct {
		u = correctSibling(t, trajs)
	}
	if u == nil {
		return 0, false, nil
	}
	return h.responseLift(u, t.Hint, plain)
}

// responseLift is hint's lift of u's response (u a correct trajectory): the mean over its policy
// tokens of log p_ref(token | prompt + hint) − log p_ref(token | prompt), the plain log-probs
// kept in plain for the next hint; ok is false where the hint has nowhere to go or u has no
// policy token.
func (h *Hinting) responseLift(u *batch.Trajectory, hint string, plain map[*batch.Trajectory][]float32) (float64, bool, error) {
	with, err := h.responseLogProbs(u, hint)
	if err != nil || with == nil {
		return 0, false, err
	}
	without, ok := plain[u]
	if !ok {
		if without, err = h.responseLogProbs(u, ""); err != nil {
			return 0, false, err
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
	if n == 0 {
		return 0, false, nil
	}
	return sum / float64(n), true, nil
}

// correctSibling is the first correct trajectory of t's group in trajs, nil when none is.
func correctSibling(t *batch.Trajectory, trajs []*batch.Trajectory) *batch.Trajectory {
	for _, s := range trajs {
		if s.Group == t.Group && s.Summary.Correct {
			return s
		}
	}
	return nil
}
