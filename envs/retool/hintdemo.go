package retool

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"

	"agentrl/envs"
	"agentrl/envs/sandbox"
)

// WithHint is the user message of a task whose prompt carries a bridge thought: where the
// controller puts a hint for the teacher, and where hint-conditioned demonstrations put it.
//
// The hint goes before the problem, not after it. The response copies the problem's numbers into
// code, and a small model copies by relative position: a hint between the problem and the
// response moved every operand 60-100 tokens further back and cost the reference 2-8 nats on
// each copied digit, even after SFT on hinted demonstrations (a mean hint lift of -0.45 nats a
// token); before the problem, the problem sits where it always does relative to the response
// (lift -0.01 after the same SFT).
func WithHint(prompt, hint string) string {
	if hint == "" {
		return prompt
	}
	return "Hint: " + hint + "\n\n" + prompt
}

// Flaws a hinted demonstration's first attempt can have: each is a failure the rules hinter
// writes a bridge thought for.
var Flaws = []string{"wrong_copy", "computed_else", "guessed", "name_error", "no_answer", "format", "timeout"}

// FlawedAttemptHint is the bridge thought the rules hinter writes for a first attempt at t with
// the named flaw: the Summary such an attempt ends with, through RulesHint. A name error runs the
// task's code with an undefined name through s, so the hint quotes the interpreter's own message.
func FlawedAttemptHint(ctx context.Context, t envs.Task, flaw string, s sandbox.Session, rng *rand.Rand) (string, error) {
	var sum envs.Summary
	switch flaw {
	case "wrong_copy": // the code printed the answer, the box holds another number
		wrong := t.Answer
		if a, ok := new(big.Int).SetString(t.Answer, 10); ok {
			wrong = a.Add(a, big.NewInt(int64(1+rng.IntN(9)))).String()
		} else {
			wrong += "1"
		}
		sum = envs.Summary{ToolCalls: 1, Answered: true, Answer: wrong, LastOutput: t.Answer}
	case "computed_else": // the box copies the output, the code computed something else
		sum = envs.Summary{ToolCalls: 1, Answered: true, Answer: "0", LastOutput: "0"}
	case "guessed":
		sum = envs.Summary{Answered: true}
	case "name_error":
		r := s.Run(ctx, "print(undefined_name)")
		if r.Status != sandbox.StatusError {
			return "", fmt.Errorf("task %s: code with an undefined name did not fail (%s)", t.ID, r.Status)
		}
		sum = envs.Summary{ToolCalls: 1, ToolErrors: 1, LastError: lastLines(r.Output, 2)}
	case "no_answer":
		sum = envs.Summary{ToolCalls: 1}
	case "format":
		sum = envs.Summary{FormatErrors: 1}
	case "timeout":
		sum = envs.Summary{ToolCalls: 1, Timeouts: 1, LastError: "timeout"}
	default:
		return "", fmt.Errorf("flaw %q is not one of %v", flaw, Flaws)
	}
	h := RulesHintFor(sum, t)
	if h == "" {
		return "", fmt.Errorf("task %s: no rules hint for flaw %s", t.ID, flaw)
	}
	return h, nil
}
