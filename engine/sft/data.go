package sft

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"agentrl/engine/batch"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/envs/dataset"
	"agentrl/envs/retool"
	"agentrl/recipes"
)

// ReadConversations reads conversations with a "messages" list (JoeYing/ReTool-SFT's and verl's
// converted files) from a JSON Lines file (one object a line), a Parquet file (one row each), or
// a folder of them (a downloaded dataset: its .jsonl and .parquet files, by name, hidden folders
// skipped), and checks each against the layout: retool keeps the code inline (<code>…</code>,
// its output in <interpreter>) in the assistant's content, tool_call has OpenAI tool_calls
// answered by tool messages, chat is plain turns. A conversation without a system message gets
// the layout's system prompt. An error names the file, the line (or row) and the field.
func ReadConversations(path string, layout retool.Layout) ([][]envs.Message, error) {
	var convs [][]envs.Message
	err := dataset.Records(path, func(where string, rec json.RawMessage) error {
		conv, err := parseConversation(rec, layout)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		convs = append(convs, conv)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("%s: no conversation in it (one JSON object a line, with a messages list)", path)
	}
	return convs, nil
}

// wireMessage is a message as a chat file gives it; content may be null (an assistant turn
// with only tool calls). envs.ToolCall reads OpenAI's {"type": "function", "function": {…}} and
// the flat {"name", "arguments"} alike.
type wireMessage struct {
	Role             *string         `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []envs.ToolCall `json:"tool_calls"`
	ReasoningContent *string         `json:"reasoning_content"`
}

// parseConversation is one line's conversation, checked against the layout.
func parseConversation(b []byte, layout retool.Layout) ([]envs.Message, error) {
	var obj struct {
		Messages *[]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object with a messages list (%v)", err)
	}
	if obj.Messages == nil {
		return nil, fmt.Errorf("field messages: missing; each line needs a messages list of {role, content}")
	}
	if len(*obj.Messages) == 0 {
		return nil, fmt.Errorf("field messages: empty")
	}
	var conv []envs.Message
	assistants := 0
	for i, raw := range *obj.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		var w wireMessage
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("field %s: not a message object (%v)", field, err)
		}
		if w.Role == nil || *w.Role == "" {
			return nil, fmt.Errorf("field %s.role: missing; want system, user, assistant or tool", field)
		}
		role := *w.Role
		if role == "developer" {
			role = "system"
		}
		m := envs.Message{Role: role, Name: w.Name, ToolCallID: w.ToolCallID, ReasoningContent: w.ReasoningContent}
		c := bytes.TrimSpace(w.Content)
		if len(c) > 0 && string(c) != "null" {
			if err := json.Unmarshal(c, &m.Content); err != nil {
				return nil, fmt.Errorf("field %s.content: not a string (%s)", field, describe(c))
			}
		}
		switch role {
		case "system":
			if i != 0 {
				return nil, fmt.Errorf("field %s.role: a system message after the first message", field)
			}
		case "user":
		case "assistant":
			assistants++
			for j, call := range w.ToolCalls {
				if call.Name == "" {
					return nil, fmt.Errorf("field %s.tool_calls[%d].function.name: missing", field, j)
				}
				if a := bytes.TrimSpace(call.Arguments); len(a) == 0 || string(a) == "null" {
					call.Arguments = json.RawMessage(`{}`)
				}
				m.ToolCalls = append(m.ToolCalls, call)
			}
			if strings.TrimSpace(m.Content) == "" && len(m.ToolCalls) == 0 && (m.ReasoningContent == nil || strings.TrimSpace(*m.ReasoningContent) == "") {
				return nil, fmt.Errorf("field %s.content: empty, with no tool_calls: the turn would train only its end token; give it its text or drop the line", field)
			}
			if layout == retool.LayoutReTool {
				if len(m.ToolCalls) > 0 {
					return nil, fmt.Errorf("field %s.tool_calls: format retool keeps the code inline in <code>…</code>; give --format tool_call for tool_calls", field)
				}
				if err := checkCode(m.Content); err != nil {
					return nil, fmt.Errorf("field %s.content: %w", field, err)
				}
			}
		case "tool":
			if layout == retool.LayoutReTool {
				return nil, fmt.Errorf("field %s.role: a tool message in format retool, where the interpreter's output is inline in the assistant's turn; give --format tool_call", field)
			}
			prev := conv[len(conv)-1]
			if prev.Role != "tool" && (prev.Role != "assistant" || len(prev.ToolCalls) == 0) {
				return nil, fmt.Errorf("field %s.role: a tool message that answers no tool call (the message before it is %s without tool_calls)", field, prev.Role)
			}
		default:
			return nil, fmt.Errorf("field %s.role: %q; want system, user, assistant or tool", field, role)
		}
		conv = append(conv, m)
	}
	if conv[0].Role != "system" {
		conv = append([]envs.Message{{Role: "system", Content: systemFor(layout)}}, conv...)
	}
	if len(conv) < 2 || conv[1].Role != "user" {
		return nil, fmt.Errorf("field messages: the first message after the system prompt must be the user's")
	}
	if assistants == 0 {
		return nil, fmt.Errorf("field messages: no assistant message, nothing to train on")
	}
	return conv, nil
}

// checkCode reports an unclosed or nested <code> block in an assistant turn of format retool.
func checkCode(text string) error {
	rest, off := text, 0
	for {
		i := strings.Index(rest, "<code>")
		if i < 0 {
			return nil
		}
		after := rest[i+len("<code>"):]
		j := strings.Index(after, "</code>")
		if j < 0 {
			return fmt.Errorf("an assistant turn with an unclosed <code> (at byte %d): no </code> after it", off+i)
		}
		if k := strings.Index(after[:j], "<code>"); k >= 0 {
			return fmt.Errorf("an assistant turn with an unclosed <code> (at byte %d): another <code> before its </code>", off+i)
		}
		step := i + len("<code>") + j + len("</code>")
		rest, off = rest[step:], off+step
	}
}

// describe is a JSON value's kind, for errors.
func describe(raw []byte) string {
	switch raw[0] {
	case '[':
		return "a list"
	case '{':
		return "an object"
	case '"':
		return "a string"
	}
	return string(raw)
}

// systemFor is a layout's default system prompt (the chat layout's observations in
// <interpreter>), as a recipe without env.system gets it (engine/play FormatOf).
func systemFor(layout retool.Layout) string {
	return retool.SystemForLayout(layout, retool.FormatInterpreter)
}

// Tools are the tool schemas in the system turn of a layout: spec ("" for the default, a JSON
// array of function schemas, or @FILE holding one) as a recipe's env.tools; the default is the
// python tool for tool_call (under the name the conversations' calls give, python or
// code_interpreter) and none for the other layouts.
func Tools(spec string, layout retool.Layout, convs [][]envs.Message) ([]tokenizer.Tool, error) {
	if rest, ok := strings.CutPrefix(spec, "@"); ok {
		b, err := os.ReadFile(rest)
		if err != nil {
			return nil, fmt.Errorf("--tools: %w", err)
		}
		spec = string(b)
	}
	if spec != "" && spec != "python" {
		schemas, _, err := recipes.Env{Tools: spec}.ToolSchemas()
		if err != nil {
			return nil, fmt.Errorf("--tools %w", err)
		}
		tools := make([]tokenizer.Tool, len(schemas))
		for i, s := range schemas {
			tools[i] = tokenizer.Tool(s)
		}
		return tools, nil
	}
	if spec == "" && layout != retool.LayoutToolCall {
		return nil, nil
	}
	name := "python"
	for _, conv := range convs {
		for _, m := range conv {
			for _, c := range m.ToolCalls {
				if c.Name == "code_interpreter" {
					name = c.Name
				}
			}
		}
	}
	return []tokenizer.Tool{tokenizer.Tool(strings.Replace(retool.PythonTool, `"name": "python"`, `"name": "`+name+`"`, 1))}, nil
}

// Sequences lays each conversation out and masks it with batch.MaskAssistant (the layout and
// loss mask of RL rollouts), dropping those longer than maxLen tokens (0: no bound); dropped
// counts them.
func Sequences(tok *tokenizer.Tokenizer, convs [][]envs.Message, tools []tokenizer.Tool, maxLen int) (seqs []train.Sequence, kept [][]envs.Message, dropped int, err error) {
	for i, conv := range convs {
		ids, mask, err := batch.MaskAssistant(tok, conv, tools)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("conversation %d: %w", i+1, err)
		}
		if maxLen > 0 && len(ids) > maxLen {
			dropped++
			continue
		}
		seqs, kept = append(seqs, train.Sequence{Tokens: ids, LossMask: mask}), append(kept, conv)
	}
	return seqs, kept, dropped, nil
}
