package retool

import (
	"strings"

	"agentrl/envs"
	"agentrl/envs/mathverify"
)

// StepFacts is what the environment knows of one step of a finished trajectory (one assistant
// turn and its observation): how its tool run ended ("" without one, else the sandbox status:
// ok, error, timeout, killed), what the run printed, and whether the turn was malformed.
type StepFacts struct {
	ToolStatus  string
	Output      string
	FormatError bool
}

// CheckedSteps are the verdicts the environment's own knowledge gives a trajectory's steps, in
// the model PRM's scale (VerdictCorrect, VerdictWrong): what a judge that reads the trajectory
// should say. The last step is correct exactly when the final answer verified (an attempt that
// ended without one ends on a wrong step); an earlier step is wrong when it was malformed, when
// its tool run failed, or when it printed something other than the task's answer (the synthetic
// tasks are one computation, so a run that prints another number computed the wrong thing);
// a step that ran no tool and was not malformed is correct.
func CheckedSteps(steps []StepFacts, s envs.Summary, t envs.Task, opts mathverify.Options) []float64 {
	out := make([]float64, len(steps))
	for i, f := range steps {
		ok := true
		switch {
		case i == len(steps)-1:
			ok = s.Correct
		case f.FormatError:
			ok = false
		case f.ToolStatus != "":
			ok = f.ToolStatus == "ok" && Verify(strings.TrimSpace(f.Output), t.Answer, opts)
		}
		out[i] = VerdictWrong
		if ok {
			out[i] = VerdictCorrect
		}
	}
	return out
}

// ObservationOutput is the tool output an observation carries: the text inside its
// <interpreter> or <tool_response> tags (the whole observation without them).
func ObservationOutput(obs string) string {
	for _, tag := range []string{"interpreter", "tool_response"} {
		open, close := "<"+tag+">", "</"+tag+">"
		if i := strings.Index(obs, open); i >= 0 {
			rest := obs[i+len(open):]
			if j := strings.Index(rest, close); j >= 0 {
				rest = rest[:j]
			}
			return strings.TrimSpace(rest)
		}
	}
	return strings.TrimSpace(obs)
}

// IsFormatErrorObservation reports whether an observation is the environment's answer to a
// malformed turn.
func IsFormatErrorObservation(obs string) bool {
	return strings.HasPrefix(strings.TrimSpace(obs), "Format error:")
}
