package engine

import (
	"agentrl/engine/event"
	"agentrl/envs/grade"
	"agentrl/envs/mathverify"
	"agentrl/recipes"
)

// GraderOf names what judges a recipe's answers, as a run records it: reward.grader's
// name@version (envs/grade), e.g. "verifier@agentrl mathverify". A name the recipe validation
// would have refused is returned as it is.
func GraderOf(r *recipes.Recipe) string {
	g, err := grade.New(r.Reward.Grader, mathverify.Options{LastNumberFallback: r.Reward.LastNumberFallback})
	if err != nil {
		return r.Reward.Grader
	}
	return g.Name() + "@" + g.Version()
}

// RewardWeightsOf is r's reward weights as the workbench shows them beside a trajectory's parts.
func RewardWeightsOf(r *recipes.Recipe) *event.RewardWeights {
	w := r.Reward
	return &event.RewardWeights{Outcome: w.Outcome, Process: w.Process, Shaping: w.Shaping, FormatPenalty: w.FormatPenalty}
}
