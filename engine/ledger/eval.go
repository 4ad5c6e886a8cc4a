package ledger

import "fmt"

// The evaluation's phase (eval.max_total_tokens longer than rollout.max_total_tokens): the
// reference configuration evaluates AIME in a 32,768-token context while it rolls out in 16,384
// tokens. Evaluation then has KV slots of its own length: rollout's KV cache is freed and the
// evaluation's is allocated from the same memory, beside the inference weights; master weights
// and moments stay where rollout left them. An evaluation no longer than rollout's decodes in
// rollout's own slots (no phase of its own).

// EvalKVCache is the evaluation's KV cache, a component of the eval phase.
const EvalKVCache = "eval_kv_cache"

// EvalSettings size the eval phase (Settings.Eval; nil: evaluation shares rollout's slots).
type EvalSettings struct {
	// SeqLen is one evaluation slot: eval.max_total_tokens.
	SeqLen int
	// MaxKVSlots bounds the slots: the trajectories of one evaluation (held-out tasks × samples,
	// or validation tasks × samples when more).
	MaxKVSlots int
}

// evalSizer is the sizer of the evaluation's slot length.
func (z sizer) evalSizer() sizer {
	st := z.st
	st.SeqLen, st.Eval = z.st.Eval.SeqLen, nil
	return newSizer(z.sh, st)
}

// evalPhase is what the eval phase holds at slots evaluation slots.
func (z sizer) evalPhase(slots int, w where) Phase {
	if z.st.Eval == nil {
		return Phase{Name: "eval", Holds: map[string]int64{}, Host: map[string]int64{}}
	}
	ze := z.evalSizer()
	p := newPhase("eval")
	p.Holds[InferenceWeights] = z.inference()
	p.Holds[EvalKVCache] = ze.kvCache(slots)
	p.Holds[SamplerWorkspace] = ze.sampler(slots)
	z.waiting(&p, w)
	z.addBase(&p)
	return p.summed()
}

// chooseEval picks the evaluation's slots (the most that fit) and reports why none does.
func (z sizer) chooseEval(p *Plan, w where, budget int64) []string {
	es := z.st.Eval
	if es == nil {
		return nil
	}
	if budget == 0 {
		p.EvalSlots = es.MaxKVSlots
	} else {
		p.EvalSlots = most(es.MaxKVSlots, budget, func(n int) int64 { return z.evalPhase(n, w).Bytes })
	}
	var reasons []string
	if p.EvalSlots == 0 {
		reasons = append(reasons, tooBig(z.evalPhase(1, w), budget, fmt.Sprintf("1 evaluation slot of %d tokens", es.SeqLen)))
	}
	p.Eval = z.evalPhase(max(p.EvalSlots, 1), w)
	return reasons
}
