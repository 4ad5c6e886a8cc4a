package retool

import (
	"context"

	"agentrl/envs"
	"agentrl/envs/mathverify"
)

// HintRequest is what a hinter sees of one finished trajectory.
type HintRequest struct {
	Task envs.Task // the problem (Prompt, Answer)
	// Response is the trajectory after the prompt, as text: the model's turns and the tool
	// observations, in order.
	Response string
	Summary  envs.Summary
}

// Hinter writes the hindsight "bridge thought" for a finished trajectory: one short corrective
// sentence that would have led it to the right answer, or "" when it needs none. An error means
// the hinter could not be asked (a dead endpoint, a cancelled context); a judge reply that cannot
// be used is no hint, not an error.
type Hinter interface {
	Hint(ctx context.Context, req HintRequest) (string, error)
}

// Scorer rates the process of a finished trajectory (its reasoning and tool use) in [0, 1]. ok is
// false when the scorer gave no usable score; the caller then falls back to RulesProcessScore.
type Scorer interface {
	Score(ctx context.Context, req HintRequest) (score float64, ok bool, err error)
}

// Rules is the rule-based hinter and process scorer: RulesHint and RulesProcessScore on the
// trajectory's Summary. It needs no model, never fails and ignores the context.
type Rules struct {
	// Verify judges whether a printed number is the task's answer (the recipe's
	// reward.last_number_fallback).
	Verify mathverify.Options
}

var (
	_ Hinter = Rules{}
	_ Scorer = Rules{}
)

// Hint returns r.HintFor(req.Summary, req.Task).
func (r Rules) Hint(_ context.Context, req HintRequest) (string, error) {
	return r.HintFor(req.Summary, req.Task), nil
}

// Score returns RulesProcessScore(req.Summary), always ok.
func (Rules) Score(_ context.Context, req HintRequest) (float64, bool, error) {
	return RulesProcessScore(req.Summary), true, nil
}
