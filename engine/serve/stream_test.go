package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"agentrl/engine/rollout"
)

// sseEvents posts body with stream: true and splits the reply into its events, checking the
// framing: a text/event-stream of "data: …" events, each ended by a blank line, the last one
// "data: [DONE]".
func sseEvents(t *testing.T, url, key string, body map[string]any) []map[string]any {
	t.Helper()
	body["stream"] = true
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, %s: %s; want 200 and an event stream", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	text := string(raw)
	if !strings.HasSuffix(text, "data: [DONE]\n\n") {
		t.Fatalf("stream %q does not end with data: [DONE]", text)
	}
	var events []map[string]any
	sc := bufio.NewScanner(strings.NewReader(strings.TrimSuffix(text, "data: [DONE]\n\n")))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	blank := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			blank = true
			continue
		}
		if !blank || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("line %q: want each event to be one data: line after a blank one", line)
		}
		blank = false
		var e map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		events = append(events, e)
	}
	return events
}

// TestStreamMatchesWhole streams chat and text completions and checks them against the same
// request answered whole on another trajectory with the same seed: the role first, content
// deltas that add up to the whole content, the tool calls, the finish reason, the usage.
func TestStreamMatchesWhole(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 2}, Options{Sampling: Sampling{Temperature: 1}})
	toolsBody := task("What is 14 + 75?", map[string]any{"tools": []json.RawMessage{json.RawMessage(pythonTool)}, "temperature": 0})
	for _, tc := range []struct {
		name   string
		path   string
		body   map[string]any
		finish string // the whole reply's finish reason ("" = any)
	}{
		{"chat with a tool call", "/chat/completions", toolsBody, "tool_calls"},
		{"chat with a stop string", "/chat/completions", task("What is 2 + 3?", map[string]any{"temperature": 0, "max_tokens": 40, "stop": []string{"print"}}), "stop"},
		{"chat cut by max_tokens", "/chat/completions", task("What is 5 + 8?", map[string]any{"seed": 8, "max_tokens": 5}), "length"},
		{"text completion", "/completions", map[string]any{"model": "builtin", "prompt": "What is 2 + 3?", "seed": 9, "max_tokens": 24}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each trajectory holds a slot until Finish: the two of each case give theirs back.
			wholeKey, streamKey := s.Begin("whole", TrajectoryOptions{}), s.Begin("streamed", TrajectoryOptions{})
			defer s.Finish(wholeKey)  //nolint:errcheck // only the slot matters here
			defer s.Finish(streamKey) //nolint:errcheck
			status, data := call(t, http.MethodPost, base+tc.path, wholeKey, tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, data)
			}
			var whole struct {
				Choices []struct {
					Text    string
					Message struct {
						Content   *string
						ToolCalls []wireToolCall `json:"tool_calls"`
					}
					FinishReason string `json:"finish_reason"`
				}
				Usage map[string]any
			}
			if err := json.Unmarshal(data, &whole); err != nil {
				t.Fatal(err)
			}
			w := whole.Choices[0]
			if tc.finish != "" && w.FinishReason != tc.finish || strings.Contains(string(data), "print(2") {
				t.Fatalf("whole reply %s; want finish_reason %q (and a stop string left out)", data, tc.finish)
			}
			wantContent := w.Text
			if tc.path == "/chat/completions" && w.Message.Content != nil {
				wantContent = *w.Message.Content
			}
			body := map[string]any{"stream_options": map[string]any{"include_usage": true}}
			for k, v := range tc.body {
				body[k] = v
			}
			events := sseEvents(t, base+tc.path, streamKey, body)
			var content, finish string
			var calls []wireToolCall
			var usage map[string]any
			for i, e := range events {
				if u, ok := e["usage"].(map[string]any); ok {
					usage = u
					if i != len(events)-1 {
						t.Errorf("usage in event %d of %d; want it last", i, len(events))
					}
					continue
				}
				ch := e["choices"].([]any)[0].(map[string]any)
				if f, ok := ch["finish_reason"].(string); ok {
					finish = f
				}
				if tc.path == "/completions" {
					content += ch["text"].(string)
					continue
				}
				d := ch["delta"].(map[string]any)
				if i == 0 && d["role"] != "assistant" {
					t.Errorf("first event %v; want the assistant role", e)
				}
				if c, ok := d["content"].(string); ok {
					content += c
				}
				if tcs, ok := d["tool_calls"]; ok {
					b, _ := json.Marshal(tcs)
					var got []wireToolCall
					_ = json.Unmarshal(b, &got)
					for _, c := range got {
						c.Index = nil
						calls = append(calls, c)
					}
				}
			}
			if content != wantContent || finish != w.FinishReason || !reflect.DeepEqual(calls, w.Message.ToolCalls) {
				t.Errorf("streamed %q, finish %q, calls %+v; whole %q, %q, %+v", content, finish, calls, wantContent, w.FinishReason, w.Message.ToolCalls)
			}
			if usage["completion_tokens"] != whole.Usage["completion_tokens"] || usage["prompt_tokens"] != whole.Usage["prompt_tokens"] {
				t.Errorf("streamed usage %v; whole %v", usage, whole.Usage)
			}
			if len(events) < 3 {
				t.Errorf("%d events; want the role, content or calls, the finish and the usage", len(events))
			}
		})
	}
}
