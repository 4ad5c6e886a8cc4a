package play

import (
	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
)

// AgentEvent adds an external trajectory's agent run to its event: the drop, the result, the
// stderr tail, and its later segments' tokens (with their advantages, decoded by tok) in the
// token view. A ReTool trajectory's event is left as it is.
func AgentEvent(e *event.Trajectory, t *batch.Trajectory, tok *tokenizer.Tokenizer) {
	x := AgentRunOf(t)
	if x == nil {
		return
	}
	res := x.Result
	a := &event.Agent{Drop: string(x.Drop), Dropped: x.Why, Answer: res.Answer, Reward: res.Reward, Info: res.Info,
		StderrTail: res.StderrTail, ExitCode: res.ExitCode, Signal: res.Signal, Seconds: res.Duration.Seconds(), Queued: res.Queued.Seconds()}
	if rec := x.Record; rec != nil {
		a.Requests, a.Segments = rec.Requests, len(rec.Segments)
		if len(rec.Turns) > 0 {
			for _, m := range rec.Turns[0].Messages {
				a.Opening = append(a.Opening, envs.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID})
			}
		}
	}
	e.Agent = a
	for _, s := range t.LaterSegments {
		e.Tokens += len(s.Tokens)
		if e.Eval {
			continue
		}
		for j := s.PromptLen; j < len(s.Tokens); j++ {
			if s.Mask[j] {
				e.Pieces = append(e.Pieces, tok.Decode(s.Tokens[j:j+1], false))
				if s.Advantages != nil {
					e.Advantages = append(e.Advantages, s.Advantages[j])
				}
			}
		}
	}
}
