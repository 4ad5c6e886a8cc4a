package train

import (
	"fmt"
	"math"
)

// Decoupled returns s prepared for the decoupled PPO objective (AReaL's, for tokens sampled by
// older policy versions): per policy token t
//
//	−w·min(r·A, clip(r, 1−ClipLow, 1+ClipHigh)·A),   r = exp(logp − prox),   w = exp(prox − behav)
//
// where behav is the log-prob under the policy that sampled the token (s.OldLogProbs), prox its
// log-prob under the proximal policy (the weights before this update, recomputed by the
// trainer) and w, the importance weight against the behaviour policy, carries no gradient. As
// w > 0 it moves inside the min: the clipped policy loss with OldLogProbs = prox and Advantages
// = w·A is that objective, so PolicyLoss computes it unchanged.
//
// Only the tokens marked in stale are rewritten; for the others (sampled by the current
// weights) the proximal policy is the behaviour policy, w = 1 and the token's loss is the
// current one exactly. A nil stale, or one with no mark, returns s itself. prox is aligned with
// s.Tokens like OldLogProbs.
func Decoupled(s Sequence, prox []float32, stale []bool) (Sequence, error) {
	marked := false
	for _, v := range stale {
		marked = marked || v
	}
	if !marked {
		return s, nil
	}
	if len(prox) != len(s.Tokens) || len(stale) != len(s.Tokens) {
		return s, fmt.Errorf("train: decoupled objective: %d proximal log-probs and %d stale marks for %d tokens", len(prox), len(stale), len(s.Tokens))
	}
	out := s
	out.OldLogProbs = append([]float32(nil), s.OldLogProbs...)
	out.Advantages = append([]float32(nil), s.Advantages...)
	for t, v := range stale {
		if !v || !s.LossMask[t] {
			continue
		}
		w := math.Exp(float64(prox[t]) - float64(s.OldLogProbs[t]))
		out.OldLogProbs[t] = prox[t]
		out.Advantages[t] = float32(w * float64(s.Advantages[t]))
	}
	return out, nil
}
