package retoolagent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"agentrl/envs"
	"agentrl/envs/external"
	"agentrl/envs/retool"
)

// same compares JSON-shaped values as JSON (numbers as float64, nil and absent alike).
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	norm := func(v any) any {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		json.Unmarshal(data, &out)
		return out
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		gj, _ := json.MarshalIndent(g, "", "  ")
		wj, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("%s:\ngot  %s\nwant %s", what, gj, wj)
	}
}

var task = envs.Task{ID: "sum-1", Prompt: "What is 34 + 58?", Answer: "92", Meta: map[string]string{"level": "0"}}

// TestAgent drives the example agent through whole trajectories: the requests it sends (model,
// stop, tools, the conversation so far) and the observations it feeds back, compared with what
// the ReTool environment itself would feed back, and the result line it ends with.
func TestAgent(t *testing.T) {
	script := agentScript(t)
	bin := workbench(t)
	system, user := message("system", retool.DefaultSystem), message("user", task.Prompt)
	first := "Compute it.\n<code>\nprint(34 + 58)\n"
	twoBlocks := "<code>\n1/0\n</code>\nand\n<code>\nprint('x' * 2000)\n"
	tests := []struct {
		name    string
		env     map[string]string
		models  []string // what GET /v1/models lists: nil is agentrl-builtin, as `agentrl-tui serve` serves; empty is no such endpoint
		replies []reply
		answer  string
		info    map[string]any
		drop    external.Drop
		stderr  string
		check   func(t *testing.T, s *server)
	}{
		{name: "ReTool text protocol", env: map[string]string{"AGENTRL_AGENT_TOOLS": "none", "AGENTRL_MAX_TOKENS": "96"},
			replies: []reply{text(first, "stop"), text("The sum is \\boxed{92}.", "stop")},
			answer:  "92", info: map[string]any{"turns": 2, "tool_calls": 1, "tool_errors": 0, "finish": "answer"},
			check: func(t *testing.T, s *server) {
				req := s.requests[0]
				if _, ok := req["tools"]; ok {
					t.Errorf("tools %v declared with AGENTRL_AGENT_TOOLS=none", req["tools"])
				}
				same(t, "first request", map[string]any{"model": req["model"], "stop": req["stop"], "max_tokens": req["max_tokens"]},
					map[string]any{"model": "agentrl-builtin", "stop": []string{"</code>"}, "max_tokens": 96})
				same(t, "first messages", req["messages"], []any{system, user})
				same(t, "second messages", s.requests[1]["messages"], []any{system, user, message("assistant", first),
					message("user", envObservation(t, retool.FormatInterpreter, first+"</code>"))})
				if s.auth[0] != "Bearer sk-traj-1" || s.auth[1] != "Bearer sk-traj-1" {
					t.Errorf("Authorization headers %q; want the trajectory's key", s.auth)
				}
			}},
		{name: "OpenAI tool calls", env: map[string]string{"AGENTRL_MODEL": "policy-7"},
			replies: []reply{call("call_1", "print(6 * 7)"), text("So \\boxed{42}", "stop")},
			answer:  "42", info: map[string]any{"turns": 2, "tool_calls": 1, "tool_errors": 0, "finish": "answer"},
			check: func(t *testing.T, s *server) {
				req := s.requests[0]
				if req["model"] != "policy-7" {
					t.Errorf("model %v; want AGENTRL_MODEL's policy-7", req["model"])
				}
				tools, _ := req["tools"].([]any)
				if len(tools) != 1 || !strings.Contains(mustJSON(tools[0]), `"name":"python"`) {
					t.Errorf("tools %v; want the python tool declared", req["tools"])
				}
				same(t, "second messages", s.requests[1]["messages"], []any{system, user,
					map[string]any{"role": "assistant", "content": nil, "tool_calls": call("call_1", "print(6 * 7)").toolCalls},
					map[string]any{"role": "tool", "tool_call_id": "call_1",
						"content": envObservation(t, retool.FormatToolResponse, "<code>\nprint(6 * 7)\n</code>")}})
			}},
		{name: "a failing block and a long output", env: map[string]string{"AGENTRL_AGENT_TOOLS": "none"},
			replies: []reply{text(twoBlocks, "stop"), text("\\boxed{7}", "stop")},
			answer:  "7", info: map[string]any{"turns": 2, "tool_calls": 2, "tool_errors": 1, "finish": "answer"},
			check: func(t *testing.T, s *server) {
				msgs := s.requests[1]["messages"].([]any)
				want := envObservation(t, retool.FormatInterpreter, twoBlocks+"</code>")
				if !strings.Contains(want, "ZeroDivisionError") || !strings.Contains(want, "[… truncated]") {
					t.Fatalf("the env's observation %q lacks the error or the cut", want)
				}
				same(t, "observation", msgs[len(msgs)-1], message("user", want))
			}},
		{name: "no answer within the turns", env: map[string]string{"AGENTRL_AGENT_TOOLS": "none", "AGENTRL_MAX_TURNS": "3"},
			replies: []reply{text("I am not sure.", "stop"), text("<code>\nprint(1", "length"), text("Still nothing.", "stop")},
			answer:  "", info: map[string]any{"turns": 3, "tool_calls": 0, "tool_errors": 0, "finish": "max_turns"},
			check: func(t *testing.T, s *server) {
				if len(s.requests) != 3 {
					t.Fatalf("%d requests; want 3 (AGENTRL_MAX_TURNS)", len(s.requests))
				}
				same(t, "third messages", s.requests[2]["messages"], []any{system, user,
					message("assistant", "I am not sure."), message("user", envObservation(t, retool.FormatInterpreter, "I am not sure.")),
					message("assistant", "<code>\nprint(1"), message("user", envObservation(t, retool.FormatInterpreter, "<code>\nprint(1"))})
			}},
		{name: "answer at once", env: map[string]string{"AGENTRL_AGENT_TOOLS": "none"},
			replies: []reply{text("\\boxed{92}", "stop")},
			answer:  "92", info: map[string]any{"turns": 1, "tool_calls": 0, "tool_errors": 0, "finish": "answer"}},
		{name: "the context is full", env: map[string]string{"AGENTRL_AGENT_TOOLS": "none"},
			replies: []reply{text(first, "stop"), {status: http.StatusBadRequest, code: "context_length_exceeded"}},
			answer:  "", info: map[string]any{"turns": 1, "tool_calls": 1, "tool_errors": 0, "finish": "context"}},
		{name: "the key is refused", replies: []reply{{status: http.StatusUnauthorized}},
			drop: external.DropCrashed, stderr: "unknown or revoked"},
		{name: "no AGENTRL_MODEL and no GET /v1/models", models: []string{}, replies: []reply{text("\\boxed{92}", "stop")},
			drop: external.DropCrashed, stderr: "AGENTRL_MODEL is not set and the endpoint's GET /v1/models failed",
			check: func(t *testing.T, s *server) {
				if len(s.requests) != 0 {
					t.Errorf("%d chat requests; want none without a model name", len(s.requests))
				}
			}},
		{name: "no AGENTRL_BIN and no agentrl-tui on PATH", env: map[string]string{"AGENTRL_BIN": "", "PATH": "/nonexistent"},
			replies: []reply{text("\\boxed{92}", "stop")},
			drop:    external.DropCrashed, stderr: "AGENTRL_BIN is not set and agentrl-tui is not on PATH: set AGENTRL_BIN",
			check: func(t *testing.T, s *server) {
				if len(s.requests) != 0 {
					t.Errorf("%d chat requests; want none before the sandbox is found", len(s.requests))
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			models := tt.models
			if models == nil {
				models = []string{"agentrl-builtin"}
			} else if len(models) == 0 {
				models = nil
			}
			s := &server{replies: tt.replies, models: models}
			srv := httptest.NewServer(s)
			defer srv.Close()
			env := map[string]string{"AGENTRL_BIN": bin}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg := external.Config{Command: []string{"node", script}, Env: env, Timeout: 2 * time.Minute}
			res, err := external.Run(context.Background(), cfg, task, srv.URL+"/v1", "sk-traj-1")
			if err != nil {
				t.Fatal(err)
			}
			if res.Drop != tt.drop {
				t.Fatalf("drop %q (%s); want %q; stderr:\n%s", res.Drop, res.Dropped, tt.drop, res.StderrTail)
			}
			if tt.stderr != "" && !strings.Contains(res.StderrTail, tt.stderr) {
				t.Errorf("stderr %q; want it to say %q", res.StderrTail, tt.stderr)
			}
			if tt.drop == external.DropNone {
				if res.Answer == nil || *res.Answer != tt.answer {
					t.Errorf("answer %v; want %q", res.Answer, tt.answer)
				}
				var info any
				json.Unmarshal(res.Info, &info)
				same(t, "info", info, tt.info)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
