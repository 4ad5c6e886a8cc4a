package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"agentrl/engine/rollout"
	"agentrl/envs"
)

// reply is what one request sampled and how it reads.
type reply struct {
	ids []int32
	lps []float32
	// text is the assistant turn as the model wrote it: the sampled ids decoded, less a final
	// <|im_end|> (which the chat template writes itself). The drift probe renders it.
	text    string
	content string          // what the client gets: the stop token, stop string and tool calls left out
	calls   []envs.ToolCall // parsed tool calls
	finish  string          // stop, length, tool_calls
}

// message is the reply as the assistant's message the client gets.
func (r *reply) message() envs.Message {
	return envs.Message{Role: "assistant", Content: r.content, ToolCalls: r.calls}
}

// replyParse says how a reply is read: its stop strings and, for a chat with tools, the tool
// calls to look for.
type replyParse struct {
	stopIDs  []int32
	stops    []string
	tools    bool   // parse Qwen's <tool_call>{json}</tool_call>
	codeTool string // also parse <code>…</code> as calls of this tool ("" = not)
	callID   string // the prefix of the calls' ids
}

// markers are the texts that open a tool call, which a stream holds back.
func (p replyParse) markers() []string {
	var m []string
	if p.tools {
		m = append(m, "<tool_call>")
		if p.codeTool != "" {
			m = append(m, "<code>")
		}
	}
	return m
}

// body is the decoded reply without a final stop token, cut at the first stop string.
func (s *Server) body(ids []int32, p replyParse) string {
	if n := len(ids); n > 0 && slices.Contains(p.stopIDs, ids[n-1]) {
		ids = ids[:n-1]
	}
	return cutStops(s.tok.Decode(ids, false), p.stops)
}

// cutStops cuts text at the first occurrence of any stop string (OpenAI leaves it out).
func cutStops(text string, stops []string) string {
	cut := len(text)
	for _, st := range stops {
		if i := strings.Index(text, st); i >= 0 && i < cut {
			cut = i
		}
	}
	return text[:cut]
}

// makeReply reads a generation result.
func (s *Server) makeReply(res rollout.Result, p replyParse) reply {
	r := reply{ids: res.IDs, lps: res.LogProbs}
	r.text = s.tok.Decode(res.IDs, false)
	if n := len(res.IDs); n > 0 && res.IDs[n-1] == s.imEnd {
		r.text = s.tok.Decode(res.IDs[:n-1], false)
	}
	body := s.body(res.IDs, p)
	r.content = body
	if p.tools {
		r.calls, r.content = parseCalls(body, p.codeTool)
		for i := range r.calls {
			r.calls[i].ID = fmt.Sprintf("%s_%d", p.callID, i)
		}
	}
	switch res.Stop {
	case rollout.StopMaxNew, rollout.StopContext:
		r.finish = "length"
	default:
		r.finish = "stop"
		if len(r.calls) > 0 {
			r.finish = "tool_calls"
		}
	}
	return r
}

// parseCalls finds the tool calls in a reply's text: Qwen's <tool_call>{"name": …, "arguments":
// …}</tool_call> blocks and, with codeTool, <code>…</code> blocks as calls of codeTool with
// {"code": …}. A block that is not closed or whose JSON does not parse is left as text. The
// content is the text before the first call, trailing whitespace removed; without calls it is
// the whole text.
func parseCalls(text, codeTool string) ([]envs.ToolCall, string) {
	var calls []envs.ToolCall
	first := -1
	for from := 0; from < len(text); {
		open, kind := nextMarker(text[from:], codeTool)
		if open < 0 {
			break
		}
		open += from
		closeTag := "</tool_call>"
		if kind == "<code>" {
			closeTag = "</code>"
		}
		body := open + len(kind)
		end := strings.Index(text[body:], closeTag)
		if end < 0 {
			break // cut off (max_tokens): not a call
		}
		inner := text[body : body+end]
		from = body + end + len(closeTag)
		var c envs.ToolCall
		var ok bool
		if kind == "<code>" {
			c, ok = codeCall(codeTool, inner)
		} else {
			c, ok = qwenCall(inner)
		}
		if !ok {
			continue
		}
		if first < 0 {
			first = open
		}
		calls = append(calls, c)
	}
	if len(calls) == 0 {
		return nil, text
	}
	return calls, strings.TrimRight(text[:first], " \t\r\n")
}

// nextMarker finds the first call opening in text: its offset and which (-1 when none).
func nextMarker(text, codeTool string) (int, string) {
	i := strings.Index(text, "<tool_call>")
	if codeTool != "" {
		if j := strings.Index(text, "<code>"); j >= 0 && (i < 0 || j < i) {
			return j, "<code>"
		}
	}
	return i, "<tool_call>"
}

// qwenCall reads a <tool_call> body: {"name": string, "arguments": object (or a JSON string
// holding one)}.
func qwenCall(inner string) (envs.ToolCall, bool) {
	var v struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(inner)), &v); err != nil || v.Name == "" {
		return envs.ToolCall{}, false
	}
	args := bytes.TrimSpace(v.Arguments)
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = []byte(s) // arguments given as a JSON string: its text is the arguments
	}
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	return envs.ToolCall{Name: v.Name, Arguments: envs.TextArguments(string(args))}, true
}

// codeCall is a <code> block as a call of the code tool: {"code": the block, newlines at its
// ends trimmed (as the ReTool parser does)}.
func codeCall(tool, inner string) (envs.ToolCall, bool) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string{"code": strings.Trim(inner, "\n")}); err != nil {
		return envs.ToolCall{}, false
	}
	return envs.ToolCall{Name: tool, Arguments: envs.TextArguments(strings.TrimSpace(b.String()))}, true
}
