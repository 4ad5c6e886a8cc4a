package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"agentrl/engine/tokenizer"
	"agentrl/envs"
)

// readMessages checks a request's messages and turns them into the messages the server keeps.
func readMessages(wire []wireMessage) ([]envs.Message, error) {
	if len(wire) == 0 {
		return nil, badRequest("messages", "messages is empty: give at least one message")
	}
	out := make([]envs.Message, 0, len(wire))
	for i, w := range wire {
		role := w.Role
		if role == "developer" {
			role = "system"
		}
		switch role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role is %q: want system, developer, user, assistant or tool", i, w.Role)
		}
		content, err := messageContent(w.Content, i)
		if err != nil {
			return nil, err
		}
		if fc := bytes.TrimSpace(w.FunctionCall); len(fc) > 0 && string(fc) != "null" {
			return nil, badRequest(fmt.Sprintf("messages[%d].function_call", i), "messages[%d].function_call (the deprecated form) is not supported: send tool_calls", i)
		}
		if len(w.ToolCalls) > 0 && role != "assistant" {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "messages[%d] has role %s: only assistant messages carry tool_calls", i, role)
		}
		for j, c := range w.ToolCalls {
			param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
			if c.Type != "" && c.Type != "function" {
				return nil, badRequest(param+".type", "%s.type is %q: only function tool calls are supported", param, c.Type)
			}
			if c.Function.Name == "" {
				return nil, badRequest(param+".function.name", "%s.function.name is empty", param)
			}
		}
		out = append(out, fromWire(w, role, content))
	}
	return out, nil
}

// withSystem is msgs with a system message of text put first when none of them is one (text ""
// or a system message there: msgs as they are). Every request of a conversation gets the same
// one, so a request still extends the previous one.
func withSystem(msgs []envs.Message, text string) []envs.Message {
	if text == "" {
		return msgs
	}
	for _, m := range msgs {
		if m.Role == "system" {
			return msgs
		}
	}
	return append([]envs.Message{{Role: "system", Content: text}}, msgs...)
}

// sameMessage says whether two messages render alike: role, content, name, tool call id,
// reasoning and tool calls (by name and arguments as JSON values; call ids are not rendered).
func sameMessage(a, b envs.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.Name != b.Name || a.ToolCallID != b.ToolCallID {
		return false
	}
	if (a.ReasoningContent == nil) != (b.ReasoningContent == nil) || a.ReasoningContent != nil && *a.ReasoningContent != *b.ReasoningContent {
		return false
	}
	return sameCalls(a.ToolCalls, b.ToolCalls)
}

// echoes says whether m is the agent's copy of reply r: an assistant message with r's content
// (whitespace at either end aside: clients trim it) and r's tool calls (names equal, arguments
// equal as JSON values). The kept tokens, not the echo, are what the model continues from.
func echoes(m envs.Message, r *reply) bool {
	return m.Role == "assistant" && strings.TrimSpace(m.Content) == strings.TrimSpace(r.content) && sameCalls(m.ToolCalls, r.calls)
}

func sameCalls(a, b []envs.ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !sameArguments(a[i].Text(), b[i].Text()) {
			return false
		}
	}
	return true
}

// sameArguments compares two tool calls' arguments as JSON values (key order and spacing
// aside), or as text where either is not JSON.
func sameArguments(a, b string) bool {
	if a == b {
		return true
	}
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// chatMessages are messages as the chat template renders them: role, content, reasoning and
// tool calls (each call's arguments the text it was written with, which the template renders
// verbatim). With a code tool (Options.CodeTool; "" for none), a call of it renders as the model
// writes it: a <code> block after the content.
func chatMessages(msgs []envs.Message, codeTool string) []envs.Message {
	out := make([]envs.Message, len(msgs))
	for i, m := range msgs {
		tm := envs.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent}
		for _, c := range m.ToolCalls {
			if code, ok := codeArgument(c, codeTool); ok {
				if tm.Content != "" {
					tm.Content += "\n"
				}
				tm.Content += "<code>\n" + code + "\n</code>"
				continue
			}
			tm.ToolCalls = append(tm.ToolCalls, envs.ToolCall{Name: c.Name, Arguments: c.Arguments})
		}
		out[i] = tm
	}
	return out
}

// codeArgument is the code of a call of the code tool ({"code": …}).
func codeArgument(c envs.ToolCall, codeTool string) (string, bool) {
	if codeTool == "" || c.Name != codeTool {
		return "", false
	}
	var v struct {
		Code *string `json:"code"`
	}
	if json.Unmarshal([]byte(c.Text()), &v) != nil || v.Code == nil {
		return "", false
	}
	return *v.Code, true
}

// tools are a request's function tools: those the template renders, and a key that tells two
// requests' tools apart (a change of tools changes the prompt's system turn).
type tools struct {
	rendered []tokenizer.Tool
	key      string
	names    []string
	code     bool // the request offers Options.CodeTool
}

// readTools checks a request's tools; the code tool (codeTool, "" for none) is left out of the
// rendered ones.
func readTools(raw []json.RawMessage, codeTool string) (tools, error) {
	var ts tools
	var key bytes.Buffer
	for i, r := range raw {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		param := fmt.Sprintf("tools[%d]", i)
		if err := json.Unmarshal(r, &t); err != nil {
			return ts, badRequest(param, "%s is not a tool object: want {\"type\": \"function\", \"function\": {\"name\": …, \"parameters\": …}}", param)
		}
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return ts, badRequest(param, "%s must be {\"type\": \"function\", \"function\": {\"name\": …}}: only named function tools are supported", param)
		}
		ts.names = append(ts.names, t.Function.Name)
		if err := json.Compact(&key, r); err != nil {
			return ts, badRequest(param, "%s: %v", param, err)
		}
		key.WriteByte('\n')
		if codeTool != "" && t.Function.Name == codeTool {
			ts.code = true
			continue
		}
		ts.rendered = append(ts.rendered, tokenizer.Tool(r))
	}
	ts.key = key.String()
	return ts, nil
}

// toolChoice reads tool_choice: whether to parse tool calls from the reply. "auto" (the default
// with tools), "required" and a named function all parse every call the reply makes (nothing
// forces the model to call); "none" returns the reply as text.
func toolChoice(raw json.RawMessage, ts tools) (bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return len(ts.names) > 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch s {
		case "none":
			return false, nil
		case "auto", "required":
			return len(ts.names) > 0, nil
		}
		return false, badRequest("tool_choice", "tool_choice %q is not none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" {
		return false, badRequest("tool_choice", "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": …}}")
	}
	for _, n := range ts.names {
		if n == named.Function.Name {
			return true, nil
		}
	}
	return false, badRequest("tool_choice", "tool_choice names the function %q, which is not among the request's tools %q", named.Function.Name, ts.names)
}
