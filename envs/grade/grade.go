// Package grade names the graders a reward can judge a final response with, and gives every one
// the same verdict shape, so that a run can be scored the way a reference experiment scored it.
//
//   - "verifier" (the default): agentrl's own mathematical verifier, envs/mathverify.Check. Score 1
//     for a correct answer, 0 otherwise; toolCalls is not used.
//   - "math_dapo": what verl's ReTool recipe (recipe/retool/retool.py) rewards with:
//     math_dapo.compute_score(response, truth, strict_box_verify=True) — +1 when the last \boxed{…}
//     in the response's final 100 characters is, as a string, the truth; -1 otherwise — and then,
//     for a wrong answer only, the tool-call shaping min(-0.6, -1 + (num_turns-2)/2*0.1) with verl's
//     num_turns = 2*toolCalls + 2 (see VerlNumTurns): -1, -0.9, -0.8, -0.7, then -0.6 from four
//     tool rounds on.
//   - "math_dapo_slime": the same function as slime's ReTool example calls it
//     (examples/retool/generate_with_retool.py): there num_turns is the tool-call count itself, so
//     a wrong answer scores min(-0.6, -1 + (toolCalls-2)/2*0.1): -1.1, -1.05, -1, … and -0.6 from
//     ten tool calls on.
//
// See dapo.go for the port of verl/utils/reward_score/math_dapo.py, its sources and where it
// differs from a mathematical verifier.
package grade

import (
	"fmt"
	"slices"
	"strings"

	"agentrl/envs/mathverify"
)

// Verdict is one grader's judgement of one response.
type Verdict struct {
	Correct bool `json:"correct"`
	// Score is the grader's own score: the verifier's 1 or 0; math_dapo's +1 or -1, then the ReTool
	// tool-call shaping of a wrong answer.
	Score float64 `json:"score"`
	// Extracted is the answer read from the response ("" when none).
	Extracted string `json:"extracted"`
	// Normalized is the form of Extracted that was compared with the truth (math_dapo's strict box
	// compares without normalising: Normalized is Extracted).
	Normalized string `json:"normalized"`
	// Grader is the grader's Name()@Version().
	Grader string `json:"grader"`
}

// Grader judges whole final responses.
type Grader interface {
	// Name is the name New takes.
	Name() string
	// Version says what the grader reproduces: the source repository, commit and files.
	Version() string
	// Grade judges a whole final response against truth; toolCalls is the number of tool-call
	// rounds of the trajectory (tool results that went back into the context), which the ReTool
	// shaping of a wrong answer uses.
	Grade(response, truth string, toolCalls int) Verdict
}

// Default is the grader New gives for an empty name.
const Default = "verifier"

var graders = map[string]func(mathverify.Options) Grader{
	"verifier":        func(o mathverify.Options) Grader { return verifier{opts: o} },
	"math_dapo":       func(mathverify.Options) Grader { return mathDapo{slime: false} },
	"math_dapo_slime": func(mathverify.Options) Grader { return mathDapo{slime: true} },
}

// Names lists the graders New knows, sorted.
func Names() []string {
	names := make([]string, 0, len(graders))
	for n := range graders {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// New returns the grader called name ("" is Default). opts are the verifier's options; the
// math_dapo graders reproduce their source and take none.
func New(name string, opts mathverify.Options) (Grader, error) {
	if name == "" {
		name = Default
	}
	mk, ok := graders[name]
	if !ok {
		return nil, fmt.Errorf("unknown grader %q; the graders are %s", name, strings.Join(Names(), ", "))
	}
	return mk(opts), nil
}

// verifier is envs/mathverify.Check.
type verifier struct{ opts mathverify.Options }

func (verifier) Name() string    { return "verifier" }
func (verifier) Version() string { return "agentrl mathverify" }

func (v verifier) Grade(response, truth string, _ int) Verdict {
	r := mathverify.Check(response, truth, v.opts)
	score := 0.0
	if r.Correct {
		score = 1
	}
	return Verdict{Correct: r.Correct, Score: score, Extracted: r.Extracted, Normalized: r.Normalized, Grader: label(v)}
}

func label(g Grader) string { return g.Name() + "@" + g.Version() }
