package retool

import (
	"context"
	"fmt"
	"strings"

	"agentrl/envs"
	"agentrl/envs/mathverify"
	"agentrl/envs/sandbox"
)

// Demo kinds for supervised warm-up.
const (
	DemoTool    = "tool"    // write code, read the output, answer
	DemoRecover = "recover" // first code fails, fix it, answer
	DemoDirect  = "direct"  // answer without the tool
)

// Demonstration writes a reference trajectory for t (the assistant and observation turns after
// the opening messages), running the code through session s so that observations are real.
func Demonstration(ctx context.Context, t envs.Task, kind string, s sandbox.Session, format string) ([]envs.Message, error) {
	code := t.Meta["code"]
	if code == "" {
		return nil, fmt.Errorf("task %s has no reference code", t.ID)
	}
	role := "user"
	if format == FormatToolResponse {
		role = "tool"
	}
	var msgs []envs.Message
	run := func(c string) (sandbox.Result, error) {
		r := s.Run(ctx, c)
		if r.Status == sandbox.StatusTimeout || r.Status == sandbox.StatusKilled {
			return r, fmt.Errorf("task %s: reference code did not finish: %s", t.ID, r.Detail)
		}
		msgs = append(msgs, envs.Message{Role: "assistant", Content: "<code>\n" + c + "\n</code>"}, envs.Message{Role: role, Content: Observe(r, format, 0)})
		return r, nil
	}
	switch kind {
	case DemoDirect:
		return []envs.Message{{Role: "assistant", Content: "\\boxed{" + t.Answer + "}"}}, nil
	case DemoRecover:
		broken := strings.Replace(code, "print(", "print(undefined_name + ", 1)
		r, err := run(broken)
		if err != nil {
			return nil, err
		}
		if r.Status != sandbox.StatusError {
			return nil, fmt.Errorf("task %s: the broken demonstration code did not fail", t.ID)
		}
		fallthrough
	case DemoTool:
		r, err := run(code)
		if err != nil {
			return nil, err
		}
		if r.Status != sandbox.StatusOK || !Verify(r.Output, t.Answer, mathverify.Options{}) {
			return nil, fmt.Errorf("task %s: reference code printed %q, want %s", t.ID, r.Output, t.Answer)
		}
		msgs = append(msgs, envs.Message{Role: "assistant", Content: "\\boxed{" + t.Answer + "}"})
		return msgs, nil
	}
	return nil, fmt.Errorf("demonstration kind %q is not one of tool, recover, direct", kind)
}
