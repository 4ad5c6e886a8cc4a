package serve

import (
	"reflect"
	"strings"
	"testing"

	"agentrl/envs"
)

// TestParseCalls reads tool calls out of reply texts: Qwen's <tool_call> JSON, the code tool's
// <code> blocks, and what stays text (unclosed, unparsable, no code tool).
func TestParseCalls(t *testing.T) {
	for _, tc := range []struct {
		name, text, codeTool string
		calls                []envs.ToolCall
		content              string
	}{
		{name: "no call", text: "The answer is \\boxed{4}.", content: "The answer is \\boxed{4}."},
		{name: "one qwen call", text: "<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(2+2)\"}}\n</tool_call>",
			calls: []envs.ToolCall{{Name: "python", Arguments: envs.TextArguments(`{"code": "print(2+2)"}`)}}},
		{name: "text before two calls", text: "Let me compute.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"mul\", \"arguments\": {}}\n</tool_call>",
			calls:   []envs.ToolCall{{Name: "add", Arguments: envs.TextArguments(`{"a": 1, "b": 2}`)}, {Name: "mul", Arguments: envs.TextArguments(`{}`)}},
			content: "Let me compute."},
		{name: "arguments as a JSON string", text: `<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>`,
			calls: []envs.ToolCall{{Name: "f", Arguments: envs.TextArguments(`{"x": 1}`)}}},
		{name: "missing arguments", text: `<tool_call>{"name": "now"}</tool_call>`, calls: []envs.ToolCall{{Name: "now", Arguments: envs.TextArguments(`{}`)}}},
		{name: "invalid JSON stays text", text: "<tool_call>\n{\"name\": python}\n</tool_call>", content: "<tool_call>\n{\"name\": python}\n</tool_call>"},
		{name: "unclosed stays text", text: "<tool_call>\n{\"name\": \"f\", \"arguments\": {", content: "<tool_call>\n{\"name\": \"f\", \"arguments\": {"},
		{name: "a bad call before a good one", text: "<tool_call>oops</tool_call> then <tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>",
			calls: []envs.ToolCall{{Name: "g", Arguments: envs.TextArguments(`{}`)}}, content: "<tool_call>oops</tool_call> then"},
		{name: "code block without a code tool", text: "<code>\nprint(1)\n</code>", content: "<code>\nprint(1)\n</code>"},
		{name: "code block as a call", codeTool: "python", text: "<code>\nprint(\"<b>\" + 'x')\n</code>",
			calls: []envs.ToolCall{{Name: "python", Arguments: envs.TextArguments(`{"code":"print(\"<b>\" + 'x')"}`)}}},
		{name: "code then qwen call, in order", codeTool: "python", text: "a <code>1</code> b <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
			calls: []envs.ToolCall{{Name: "python", Arguments: envs.TextArguments(`{"code":"1"}`)}, {Name: "f", Arguments: envs.TextArguments(`{}`)}}, content: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, content := parseCalls(tc.text, tc.codeTool)
			if !reflect.DeepEqual(calls, tc.calls) || content != tc.content {
				t.Errorf("got calls %+v, content %q; want %+v, %q", calls, content, tc.calls, tc.content)
			}
		})
	}
}

// TestDeltas streams reply texts token by token: what is sent never passes a stop string or a
// call's opening (nor a tail that may become one), and sent plus the rest is the final content.
func TestDeltas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string // the reply's text as tokens
		parse  replyParse
	}{
		{name: "plain", pieces: []string{"The", " answer", " is", " 4", "."}},
		{name: "stop string over three tokens", pieces: []string{"x = 1", "\nEN", "D", "\nmore"}, parse: replyParse{stops: []string{"\nEND"}}},
		{name: "a prefix of the stop string that is not it", pieces: []string{"a\nE", "N", "ough"}, parse: replyParse{stops: []string{"\nEND"}}},
		{name: "tool call after text", pieces: []string{"Let", " me", " run", " it.", "\n", "<tool_call>", "\n{\"name\": \"f\", \"arguments\": {}}\n", "</tool_call>"}, parse: replyParse{tools: true}},
		{name: "code block split", pieces: []string{"ok ", "<co", "de>", "\n1\n", "</code>"}, parse: replyParse{tools: true, codeTool: "python"}},
		{name: "split UTF-8", pieces: []string{"caf", "\xc3", "\xa9", " ok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeltas(tc.parse)
			var text, sent string
			for _, p := range tc.pieces {
				text += p
				shown := strings.ToValidUTF8(cutStops(text, tc.parse.stops), "\uFFFD")
				out := d.next(shown)
				sent += out
				for _, h := range d.holds {
					if strings.Contains(sent, h) {
						t.Fatalf("sent %q, which holds %q", sent, h)
					}
				}
			}
			full := cutStops(text, tc.parse.stops)
			content := full
			if tc.parse.tools {
				_, content = parseCalls(full, tc.parse.codeTool)
			}
			if !strings.HasPrefix(content, sent) {
				t.Fatalf("sent %q, not a prefix of the content %q", sent, content)
			}
			if got := sent + d.rest(content); got != content {
				t.Errorf("streamed %q; want the content %q", got, content)
			}
		})
	}
}

// TestEchoes decides whether an agent's assistant message is the server's reply: content to the
// whitespace at its ends, tool calls by name and arguments as JSON values.
func TestEchoes(t *testing.T) {
	r := &reply{content: "Let me run it.", calls: []envs.ToolCall{{ID: "call_0_0", Name: "python", Arguments: envs.TextArguments(`{"code": "print(1)", "timeout": 5}`)}}}
	call := func(args string) []envs.ToolCall {
		return []envs.ToolCall{{ID: "other-id", Name: "python", Arguments: envs.TextArguments(args)}}
	}
	for _, tc := range []struct {
		name string
		m    envs.Message
		want bool
	}{
		{"the reply", envs.Message{Role: "assistant", Content: "Let me run it.", ToolCalls: call(`{"code": "print(1)", "timeout": 5}`)}, true},
		{"trimmed, keys reordered, compact", envs.Message{Role: "assistant", Content: " Let me run it.\n", ToolCalls: call(`{"timeout":5,"code":"print(1)"}`)}, true},
		{"other content", envs.Message{Role: "assistant", Content: "Let me run this.", ToolCalls: call(`{"code": "print(1)", "timeout": 5}`)}, false},
		{"other arguments", envs.Message{Role: "assistant", Content: "Let me run it.", ToolCalls: call(`{"code": "print(2)", "timeout": 5}`)}, false},
		{"calls dropped", envs.Message{Role: "assistant", Content: "Let me run it."}, false},
		{"not an assistant", envs.Message{Role: "user", Content: "Let me run it.", ToolCalls: call(`{"code": "print(1)", "timeout": 5}`)}, false},
	} {
		if got := echoes(tc.m, r); got != tc.want {
			t.Errorf("%s: echoes = %v; want %v", tc.name, got, tc.want)
		}
	}
}
