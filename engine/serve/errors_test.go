package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"agentrl/engine/rollout"
)

// TestErrors sends each kind of bad request and checks the status and OpenAI's error object
// (message, type, param, code: all four present), and that the server answers a good request
// right after each.
func TestErrors(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 1, MaxLen: 256}, Options{})
	key := s.Begin("errors", TrajectoryOptions{})
	revoked := s.Begin("finished", TrajectoryOptions{})
	if _, err := s.Finish(revoked); err != nil {
		t.Fatal(err)
	}
	msgs := `[{"role": "user", "content": "What is 1 + 1?"}]`
	chat := func(extra string) string { return `{"model": "builtin", "messages": ` + msgs + extra + `}` }
	long := strings.Repeat("1 + 1 = 2. ", 200)
	for _, tc := range []struct {
		name, method, path, key, body string
		status                        int
		param, code, says             string
	}{
		{name: "malformed JSON", body: `{"model": "builtin", "messages": [`, status: 400, says: "not valid JSON"},
		{name: "not JSON at all", body: `model=builtin`, status: 400, says: "not valid JSON"},
		{name: "empty body", body: ``, status: 400, says: "empty"},
		{name: "unknown field", body: chat(`, "temprature": 1`), status: 400, param: "temprature", says: `"temprature"`},
		{name: "unknown field in a message", body: `{"model": "builtin", "messages": [{"role": "user", "content": "hi", "mood": "calm"}]}`, status: 400, param: "mood", says: `"mood"`},
		{name: "wrong type", body: chat(`, "temperature": "hot"`), status: 400, param: "temperature", says: "wrong type"},
		{name: "stop of the wrong type", body: chat(`, "stop": 5`), status: 400, param: "stop", says: "list of strings"},
		{name: "temperature out of range", body: chat(`, "temperature": 3`), status: 400, param: "temperature", says: "[0, 2]"},
		{name: "truncated sampling not compiled", body: chat(`, "top_p": 0.5`), status: 400, param: "top_p", says: "not compiled"},
		{name: "unknown model", body: `{"model": "gpt-4o", "messages": ` + msgs + `}`, status: 404, param: "model", code: "model_not_found", says: `"gpt-4o"`},
		{name: "no model", body: `{"messages": ` + msgs + `}`, status: 400, param: "model", says: "required"},
		{name: "n > 1", body: chat(`, "n": 2`), status: 400, param: "n", says: "n is 2"},
		{name: "no messages", body: `{"model": "builtin", "messages": []}`, status: 400, param: "messages", says: "empty"},
		{name: "bad role", body: `{"model": "builtin", "messages": [{"role": "robot", "content": "hi"}]}`, status: 400, param: "messages[0].role", says: `"robot"`},
		{name: "image content", body: `{"model": "builtin", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, status: 400, param: "messages[0].content", says: "text only"},
		{name: "tool_choice names no tool", body: chat(`, "tools": [` + pythonTool + `], "tool_choice": {"type": "function", "function": {"name": "bash"}}`), status: 400, param: "tool_choice", says: `"bash"`},
		{name: "stream_options without stream", body: chat(`, "stream_options": {"include_usage": true}`), status: 400, param: "stream_options"},
		{name: "penalty", body: chat(`, "presence_penalty": 0.5`), status: 400, param: "presence_penalty"},
		{name: "prompt longer than the slot", body: `{"model": "builtin", "messages": [{"role": "user", "content": "` + long + `"}]}`, status: 400, param: "messages", code: "context_length_exceeded", says: "at most 255"},
		{name: "no key", key: "-", body: chat(""), status: 401, code: "invalid_api_key", says: "no API key"},
		{name: "unknown key", key: "agentrl-0123456789", body: chat(""), status: 401, code: "invalid_api_key", says: "unknown API key"},
		{name: "revoked key", key: revoked, body: chat(""), status: 401, code: "invalid_api_key", says: "revoked"},
		{name: "wrong method", method: http.MethodGet, status: 405, code: "method_not_allowed", says: "POST"},
		{name: "unknown path", path: "/embeddings", status: 404, code: "not_found", says: "/v1/embeddings"},
		{name: "unknown model by id", method: http.MethodGet, path: "/models/gpt-4o", status: 404, param: "model", code: "model_not_found"},
		{name: "completion without a prompt", path: "/completions", body: `{"model": "builtin"}`, status: 400, param: "prompt"},
		{name: "completion with a token outside the vocabulary", path: "/completions", body: `{"model": "builtin", "prompt": [1, 99999]}`, status: 400, param: "prompt", says: "99999"},
		{name: "completion echo", path: "/completions", body: `{"model": "builtin", "prompt": "hi", "echo": true}`, status: 400, param: "echo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path, k := tc.method, tc.path, tc.key
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/chat/completions"
			}
			switch k {
			case "":
				k = key
			case "-":
				k = ""
			}
			var body any
			if tc.body != "" || method == http.MethodPost {
				body = tc.body
			}
			status, data := call(t, method, base+path, k, body)
			if status != tc.status {
				t.Fatalf("status %d (%s); want %d", status, data, tc.status)
			}
			var e map[string]map[string]any
			if err := json.Unmarshal(data, &e); err != nil || e["error"] == nil {
				t.Fatalf("body %s: %v; want {\"error\": {…}}", data, err)
			}
			obj := e["error"]
			for _, f := range []string{"message", "type", "param", "code"} {
				if _, ok := obj[f]; !ok {
					t.Errorf("error object %v has no %q", obj, f)
				}
			}
			msg, _ := obj["message"].(string)
			param, _ := obj["param"].(string)
			code, _ := obj["code"].(string)
			if msg == "" || !strings.Contains(msg, tc.says) || param != tc.param || code != tc.code {
				t.Errorf("error %v; want param %q, code %q and a message saying %q", obj, tc.param, tc.code, tc.says)
			}
			// The server goes on serving.
			chatOK(t, base, key, map[string]any{"model": "builtin", "messages": []map[string]any{{"role": "user", "content": "What is 1 + 1?"}}, "max_tokens": 2})
		})
	}
}
