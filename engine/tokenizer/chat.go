package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"agentrl/envs"
)

// Tool is a function definition as given to the template, kept as raw JSON so that it renders
// with its own key order.
type Tool = json.RawMessage

// RenderChat renders messages exactly as Qwen3's tokenizer_config.json chat template does
// (tools block, <tool_call> / <tool_response> turns, thinking blocks after the last user query,
// generation prompt). enable_thinking is left undefined, as transformers does by default.
func RenderChat(msgs []envs.Message, tools []Tool, addGenerationPrompt bool) (string, error) {
	var b strings.Builder
	if len(msgs) == 0 {
		return "", fmt.Errorf("chat: no messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", fmt.Errorf("chat: message %d has role %q; want system, user, assistant or tool", i, m.Role)
		}
	}
	if len(tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if msgs[0].Role == "system" {
			b.WriteString(msgs[0].Content + "\n\n")
		}
		b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
		for i, t := range tools {
			js, err := pyJSON(t)
			if err != nil {
				return "", fmt.Errorf("chat: tool %d: %w", i, err)
			}
			b.WriteString("\n" + js)
		}
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")
	} else if msgs[0].Role == "system" {
		b.WriteString("<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n")
	}
	// The last user message that is a real query (not a wrapped tool response).
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == "user" && !(strings.HasPrefix(m.Content, "<tool_response>") && strings.HasSuffix(m.Content, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		last := i == len(msgs)-1
		switch {
		case m.Role == "user" || (m.Role == "system" && i != 0):
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		case m.Role == "assistant":
			content, reasoning := m.Content, ""
			if m.ReasoningContent != nil {
				reasoning = *m.ReasoningContent
			} else if strings.Contains(m.Content, "</think>") {
				parts := strings.Split(m.Content, "</think>")
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				before := strings.TrimRight(parts[0], "\n")
				th := strings.Split(before, "<think>")
				reasoning = strings.TrimLeft(th[len(th)-1], "\n")
			}
			if i > lastQuery && (last || reasoning != "") {
				b.WriteString("<|im_start|>assistant\n<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString("<|im_start|>assistant\n" + content)
			}
			calls, err := ToolCallText(content, m.ToolCalls)
			if err != nil {
				return "", fmt.Errorf("chat: message %d: %w", i, err)
			}
			b.WriteString(calls)
			b.WriteString("<|im_end|>\n")
		case m.Role == "tool":
			if i == 0 || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n" + m.Content + "\n</tool_response>")
			if last || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		}
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}

// ToolCallText is an assistant message's tool calls as the template renders them after its
// content: each "<tool_call>\n{"name": …, "arguments": …}\n</tool_call>", a newline before the
// first when content is not empty and between calls.
func ToolCallText(content string, calls []envs.ToolCall) (string, error) {
	var b strings.Builder
	for j, tc := range calls {
		if (j == 0 && content != "") || j > 0 {
			b.WriteString("\n")
		}
		args, err := renderArguments(tc.Arguments)
		if err != nil {
			return "", fmt.Errorf("tool call %d: %w", j, err)
		}
		b.WriteString("<tool_call>\n{\"name\": \"" + tc.Name + "\", \"arguments\": " + args + "}\n</tool_call>")
	}
	return b.String(), nil
}

// renderArguments renders a tool call's arguments: a JSON string verbatim, anything else as tojson.
func renderArguments(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "{}", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	return pyJSON(raw)
}

// pyJSON re-serialises JSON as Python's json.dumps(x, ensure_ascii=False) does (what the
// template's tojson filter produces): ", " and ": " separators, keys in their given order.
func pyJSON(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := writePy(dec, &b); err != nil {
		return "", fmt.Errorf("invalid JSON %s: %w", raw, err)
	}
	return b.String(), nil
}

func writePy(dec *json.Decoder, b *strings.Builder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			b.WriteByte('{')
			for first := true; dec.More(); first = false {
				if !first {
					b.WriteString(", ")
				}
				k, err := dec.Token()
				if err != nil {
					return err
				}
				writePyString(b, k.(string))
				b.WriteString(": ")
				if err := writePy(dec, b); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte('}')
		case '[':
			b.WriteByte('[')
			for first := true; dec.More(); first = false {
				if !first {
					b.WriteString(", ")
				}
				if err := writePy(dec, b); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte(']')
		}
	case string:
		writePyString(b, v)
	case json.Number:
		b.WriteString(v.String())
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
	return nil
}

// writePyString quotes like json.dumps with ensure_ascii=False.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else if r == utf8.RuneError {
				b.WriteString("\uFFFD")
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// ChatFile is the JSON form of a conversation for `agentrl-tui tokenize --chat FILE`.
type ChatFile struct {
	Messages            []envs.Message `json:"messages"`
	Tools               []Tool         `json:"tools"`
	AddGenerationPrompt bool           `json:"add_generation_prompt"`
}

// ReadChatFile reads a ChatFile and renders it.
func ReadChatFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading chat file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("reading chat file: %w", err)
	}
	var c ChatFile
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("%s: want {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": bool}: %w", path, err)
	}
	s, err := RenderChat(c.Messages, c.Tools, c.AddGenerationPrompt)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ObservationTurn is an observation m (a user message, or a tool message with the tool's output)
// as the Qwen chat template renders it after an assistant turn closed by <|im_end|>: a user turn
// (a tool message's text wrapped in <tool_response>, as the template renders consecutive tool
// messages) followed by the generation prompt. The rollout appends it token for token and the
// SFT layout renders it the same way, so both read as RenderChat renders the conversation.
func ObservationTurn(m envs.Message) string {
	if m.Role == "tool" {
		return ToolTurn([]envs.Message{m})
	}
	return "\n<|im_start|>user\n" + m.Content + "<|im_end|>\n<|im_start|>assistant\n"
}

// ToolTurn is a run of tool messages as the template renders them after an assistant turn closed
// by <|im_end|>: one user turn holding each output in <tool_response>, then the generation prompt.
func ToolTurn(ms []envs.Message) string {
	var b strings.Builder
	b.WriteString("\n<|im_start|>user")
	for _, m := range ms {
		b.WriteString("\n<tool_response>\n" + m.Content + "\n</tool_response>")
	}
	b.WriteString("<|im_end|>\n<|im_start|>assistant\n")
	return b.String()
}
