package play

import (
	"encoding/json"
	"regexp"
	"strings"

	"agentrl/engine/event"
	"agentrl/engine/serve"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
)

// agentTurns is the transcript as turns: one per answered request, with the reply as the model
// wrote it (the sampled tokens decoded by tok), its tool calls, and the messages the agent sent after
// it (the next request's new messages, when that request extended the conversation).
func agentTurns(rec *serve.Trajectory, tok *tokenizer.Tokenizer) []event.Turn {
	turns := make([]event.Turn, len(rec.Turns))
	for i, rt := range rec.Turns {
		e := event.Turn{Assistant: rt.Content, Finish: rt.Finish, NewSegment: i > 0 && rt.Segment != rec.Turns[i-1].Segment}
		if rt.Segment < len(rec.Segments) {
			toks := rec.Segments[rt.Segment].Tokens
			if end := rt.PromptTokens + rt.CompletionTokens; end <= len(toks) {
				e.Assistant = strings.TrimSuffix(tok.Decode(toks[rt.PromptTokens:end], false), "<|im_end|>")
			}
		}
		var code []string
		for _, call := range rt.ToolCalls {
			e.ToolCalls = append(e.ToolCalls, envs.ToolCall{Name: call.Name, Arguments: call.Arguments})
			var args struct {
				Code string `json:"code"`
			}
			if json.Unmarshal([]byte(call.Text()), &args) == nil && args.Code != "" {
				code = append(code, args.Code)
			}
		}
		if len(rt.ToolCalls) == 0 {
			code = retool.Parse(e.Assistant).Code // the ReTool text protocol: <code> blocks
		}
		e.Code = strings.Join(code, "\n\n")
		if i+1 < len(rec.Turns) && rec.Turns[i+1].Segment == rt.Segment {
			var obs []string
			for _, m := range rec.Turns[i+1].Messages {
				e.Sent = append(e.Sent, envs.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID})
				obs = append(obs, m.Content)
			}
			e.Observation = strings.Join(obs, "\n")
			e.ToolStatus = readObservation(e.Observation).status
		}
		turns[i] = e
	}
	return turns
}

// agentSummary reads what the hinter, the process scorer and the reward need from the
// transcript (rec and its turns): turns; format errors, as the ReTool environment counts them
// (a reply that does not parse, or one with no code, no tool call and no \boxed answer); and the
// tool results the agent sent back when they are in the ReTool format (an <interpreter> block
// in a user message, or a tool message): calls, errors, timeouts, the last output. An agent that
// shows tool output another way reads as one that called no tool.
func agentSummary(rec *serve.Trajectory, turns []event.Turn) envs.Summary {
	var s envs.Summary
	s.Turns = len(rec.Turns)
	for _, turn := range turns {
		if a := retool.Parse(turn.Assistant); a.FormatError != "" || !a.HasAnswer && len(a.Code) == 0 && len(turn.ToolCalls) == 0 {
			s.FormatErrors++
		}
	}
	record := func(o observed) {
		s.ToolCalls++
		switch o.status {
		case "ok":
			if s.ToolErrors+s.Timeouts+s.Killed > 0 {
				s.Recovered = true
			}
			s.LastOutput = strings.TrimSpace(o.body)
		case "error":
			s.ToolErrors++
			s.LastError, s.Recovered = lastLines(o.body, 2), false
		case "timeout":
			s.Timeouts++
			s.LastError, s.Recovered = o.detail, false
		case "killed":
			s.Killed++
			s.LastError, s.Recovered = o.detail, false
		}
	}
	for i, rt := range rec.Turns {
		if i == 0 || rt.Segment != rec.Turns[i-1].Segment {
			continue // a new segment re-sends the conversation: its messages are not new
		}
		for _, m := range rt.Messages {
			switch m.Role {
			case "tool":
				record(readObservation(m.Content))
			case "user":
				for _, body := range interpreterRE.FindAllStringSubmatch(m.Content, -1) {
					record(readObservation(body[1]))
				}
			}
		}
	}
	return s
}

// interpreterRE finds the ReTool observations in a message.
var interpreterRE = regexp.MustCompile(`(?s)<interpreter>\n?(.*?)\n?</interpreter>`)

// errorRE finds an interpreter's error: a traceback, a Starlark "code.py:L:C: " message, or a
// last line naming an error.
var errorRE = regexp.MustCompile(`(?m)Traceback \(most recent call last\)|^code\.py:\d+:\d+: |^[A-Za-z_.]*(Error|Exception)\b`)

// observed is one tool result read from its text: status ok, error, timeout or killed.
type observed struct {
	status, body, detail string
}

// readObservation reads a tool result as the ReTool environment writes it (Observe): a notice
// "[timeout: …]" or "[stopped: …]" at its end, an error's traceback, or plain output. Text in
// <interpreter> tags is read inside them.
func readObservation(text string) observed {
	if m := interpreterRE.FindStringSubmatch(text); m != nil {
		text = m[1]
	}
	body := strings.TrimSpace(text)
	last := body
	if i := strings.LastIndexByte(body, '\n'); i >= 0 {
		last = body[i+1:]
	}
	switch {
	case body == "":
		return observed{}
	case strings.HasPrefix(last, "[timeout: "):
		return observed{status: "timeout", body: body, detail: "timeout: " + strings.TrimSuffix(strings.TrimPrefix(last, "[timeout: "), "]")}
	case strings.HasPrefix(last, "[stopped: "):
		return observed{status: "killed", body: body, detail: strings.TrimSuffix(strings.TrimPrefix(last, "[stopped: "), "]")}
	case errorRE.MatchString(body):
		return observed{status: "error", body: body}
	}
	return observed{status: "ok", body: body}
}

// lastLines is the last n lines of s, trimmed.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
