// Package retoolagent tests the example agent: the real Node program on the real openai package,
// started by envs/external as the workbench starts it, against a scripted OpenAI-compatible
// server, with its code run by the real `agentrl-tui tool run`.
package retoolagent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
)

// agentScript returns agent.mjs in a folder whose node_modules holds the pinned openai package:
// AGENTRL_AGENT_NODE_MODULES, else this folder's node_modules (after `npm install`), else one
// `npm ci` in a temporary copy. A missing Node or package fails the test with what to install.
func agentScript(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: the example agent needs Node.js 20 or later (Debian: apt-get install nodejs npm)")
	}
	if out, err := exec.Command(node, "-e", "process.exit(Number(process.versions.node.split('.')[0]) >= 20 ? 0 : 1)").CombinedOutput(); err != nil {
		v, _ := exec.Command(node, "--version").Output()
		t.Fatalf("node %s is too old: the example agent needs Node.js 20 or later (%s)", strings.TrimSpace(string(v)), out)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	data, err := os.ReadFile("package.json")
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil || pkg.Dependencies["openai"] == "" {
		t.Fatalf("package.json does not pin openai: %v", err)
	}
	dir := t.TempDir()
	modules := os.Getenv("AGENTRL_AGENT_NODE_MODULES")
	if modules == "" {
		if _, err := os.Stat(filepath.Join("node_modules", "openai", "package.json")); err == nil {
			modules, _ = filepath.Abs("node_modules")
		}
	}
	if modules == "" {
		for _, f := range []string{"package.json", "package-lock.json"} {
			copyFile(t, f, filepath.Join(dir, f))
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the example agent needs the openai npm package and `npm ci` failed (%v):\n%s\nrun `npm install` in examples/retool-agent, or set AGENTRL_AGENT_NODE_MODULES to a node_modules folder that holds openai %s",
				err, out, pkg.Dependencies["openai"])
		}
	} else if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	var installed struct {
		Version string `json:"version"`
	}
	data, err = os.ReadFile(filepath.Join(dir, "node_modules", "openai", "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &installed)
	}
	if err != nil || installed.Version != pkg.Dependencies["openai"] {
		t.Fatalf("node_modules %s holds openai %q (%v), but package.json pins %s: run `npm ci` in examples/retool-agent, or point AGENTRL_AGENT_NODE_MODULES at a node_modules folder with that version",
			modules, installed.Version, err, pkg.Dependencies["openai"])
	}
	copyFile(t, "agent.mjs", filepath.Join(dir, "agent.mjs"))
	return filepath.Join(dir, "agent.mjs")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// workbench builds the agentrl-tui binary whose `tool run` the agent calls.
func workbench(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "retool-agent-bin")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "agentrl-tui")
		if out, err := exec.Command("go", "build", "-o", binPath, "agentrl").CombinedOutput(); err != nil {
			binErr = &buildError{err, string(out)}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "building agentrl-tui: " + e.err.Error() + "\n" + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// reply is one scripted answer of the fake server: a text message, or tool calls.
type reply struct {
	content   *string
	toolCalls []map[string]any
	finish    string
	status    int    // an HTTP error instead of a completion
	code      string // the error's code (default invalid_api_key)
}

func text(s, finish string) reply { return reply{content: &s, finish: finish} }

func call(id, code string) reply {
	args, _ := json.Marshal(map[string]string{"code": code})
	return reply{finish: "tool_calls", toolCalls: []map[string]any{
		{"id": id, "type": "function", "function": map[string]any{"name": "python", "arguments": string(args)}}}}
}

// server is a scripted OpenAI-compatible chat endpoint that records every chat request; its
// GET /v1/models lists models (nil: it has no such endpoint, 404).
type server struct {
	mu       sync.Mutex
	models   []string
	replies  []reply
	requests []map[string]any
	auth     []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" && s.models != nil {
		data := []any{}
		for _, m := range s.models {
			data = append(data, map[string]any{"id": m, "object": "model", "created": 0, "owned_by": "test"})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || json.Unmarshal(body, &req) != nil {
		http.Error(w, `{"error": {"message": "not a chat completion request"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, req)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if i >= len(s.replies) || s.replies[i].status != 0 {
		status := http.StatusInternalServerError
		if i < len(s.replies) {
			status = s.replies[i].status
		}
		w.WriteHeader(status)
		if i < len(s.replies) && s.replies[i].code == "context_length_exceeded" {
			io.WriteString(w, `{"error": {"message": "this request's prompt is 530 tokens and a trajectory's context holds at most 511", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}`)
			return
		}
		io.WriteString(w, `{"error": {"message": "the key of this trajectory is unknown or revoked", "type": "invalid_request_error", "code": "invalid_api_key"}}`)
		return
	}
	rep := s.replies[i]
	msg := map[string]any{"role": "assistant", "content": rep.content}
	if rep.toolCalls != nil {
		msg["tool_calls"] = rep.toolCalls
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": req["model"],
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": rep.finish}},
		"usage":   map[string]int{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
	})
}

// envObservation is what the ReTool environment answers to an assistant turn (in format) after
// a first turn: the observation text its own loop would feed back.
func envObservation(t *testing.T, format, turn string) string {
	t.Helper()
	ex, err := sandbox.NewExecutor("python", sandbox.Limits{Timeout: 5 * time.Second}, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	env, err := retool.New(retool.Config{Executor: ex, Format: format, MaxObsChars: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if _, err := env.Reset(context.Background(), envs.Task{ID: "t", Prompt: "p", Answer: "0"}); err != nil {
		t.Fatal(err)
	}
	st, err := env.Step(context.Background(), turn)
	if err != nil || st.Done {
		t.Fatalf("the ReTool env on %q: %+v, %v", turn, st, err)
	}
	return st.Observation
}

func message(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}
