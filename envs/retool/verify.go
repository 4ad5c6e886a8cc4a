package retool

import (
	"strings"

	"agentrl/envs"
	"agentrl/envs/mathverify"
)

// Verify reports whether a predicted final answer equals the reference, by mathverify.Equal: LaTeX
// normalised, numbers compared as exact rationals (0.5 = \frac12, 0.333 ≠ \frac13), expressions,
// tuples, sets, intervals and lists compared by value (see envs/mathverify). An answer that merely
// ends in the right number ("The answer is 42.") counts only with opts.LastNumberFallback, the
// recipe's reward.last_number_fallback.
func Verify(pred, ref string, opts mathverify.Options) bool {
	return mathverify.Equal(pred, ref, opts)
}

// ScoreAnswer is the reward parts of a final answer that came from outside the ReTool loop (an
// external agent's {"answer": …}), as the loop scores its own: outcome 1 when the answer verifies
// against ref, a format penalty when there is no answer. An answer with a \boxed{…}, an "Answer:"
// line or <answer> tags is read from them (mathverify.Extract), else taken whole. opts is the
// recipe's verifier options. Compose the parts with the recipe's Weights.
func ScoreAnswer(answer, ref string, opts mathverify.Options) envs.Reward {
	if a, ok := mathverify.Extract(answer); ok {
		answer = a
	}
	var r envs.Reward
	if strings.TrimSpace(answer) == "" || mathverify.Normalize(answer) == "" {
		r.FormatPenalty = 1
	} else if Verify(answer, ref, opts) {
		r.Outcome = 1
	}
	return r
}
