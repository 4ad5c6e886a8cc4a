package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"agentrl/engine/bench"
	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/store"
)

// startServe runs `agentrl-tui serve ARGS --addr 127.0.0.1:0` until the returned stop is called;
// it returns the base URL the command printed and its output so far.
func startServe(t *testing.T, args ...string) (base string, out *syncBuffer, stop func() error) {
	t.Helper()
	t.Setenv("GOMLX_BACKEND", device.GoConfig)
	out = &syncBuffer{}
	var errb syncBuffer
	root := newRoot(Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: &errb, Builtin: os.DirFS(filepath.Join("..", model.BuiltinSourceDir))})
	root.SetArgs(append([]string{"serve", "--addr", "127.0.0.1:0", "--backend", "go"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	url := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/v1)\n`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m := url.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("serve ended before serving: %v\n%s%s", err, out, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve printed no URL:\n%s%s", out, errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return base, out, stop
}

// post sends a JSON request with an API key and decodes the reply into v.
func post(t *testing.T, url string, body string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer anything")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

// TestServeBuiltin serves the built-in model: the printed URL answers the models list and a chat
// with the python tool as a <code>-block tool call (the code tool is on for the built-in model),
// and cancelling the command (what Ctrl-C does) stops it cleanly.
func TestServeBuiltin(t *testing.T) {
	base, out, stop := startServe(t, "--slots", "2")
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil || len(models.Data) != 1 || models.Data[0].ID != "agentrl-builtin" {
		t.Errorf("models %+v (%v); want agentrl-builtin", models, err)
	}
	resp.Body.Close()
	var chat struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	body := `{"model": "agentrl-builtin", "temperature": 0, "max_tokens": 40, "messages": [
		{"role": "system", "content": "Solve the problem. You may run code by writing it between <code> and </code>; its output comes back in <interpreter></interpreter>. Give the final answer as \\boxed{answer}."},
		{"role": "user", "content": "What is 14 + 75?"}],
		"tools": [{"type": "function", "function": {"name": "python", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]}`
	if status := post(t, base+"/chat/completions", body, &chat); status != http.StatusOK || len(chat.Choices) != 1 ||
		chat.Choices[0].FinishReason != "tool_calls" || len(chat.Choices[0].Message.ToolCalls) != 1 || chat.Choices[0].Message.ToolCalls[0].Function.Name != "python" {
		t.Errorf("chat: status %d, %+v; want a python tool call", status, chat)
	}
	if err := stop(); err != nil {
		t.Errorf("stopping: %v; want a clean stop", err)
	}
	for _, want := range []string{"serving agentrl-builtin", "2 KV slots, contexts up to 1023 tokens", `calls of the tool "python"`, "no chat_template", "stopped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q; want it to say %q", out, want)
		}
	}
	if _, err := http.Get(base + "/models"); err == nil {
		t.Error("the server still answers after the command stopped")
	}
}

// TestServeCheckpoint serves a stored checkpoint (the built-in model imported as step 3 of a
// run) under the name RUN-stepS, and refuses contradictory or incomplete flags.
func TestServeCheckpoint(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	s, err := store.Open(db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ImportHF(filepath.Join("..", model.BuiltinSourceDir), "imported", 3); err != nil {
		t.Fatal(err)
	}
	s.Close()
	base, _, stop := startServe(t, "--store", db, "--run", "imported", "--slots", "1")
	var c struct {
		Model   string
		Choices []struct{ Text string }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if status := post(t, base+"/completions", `{"model": "imported-step3", "prompt": "What is 2 + 2?", "max_tokens": 5}`, &c); status != http.StatusOK ||
		c.Model != "imported-step3" || len(c.Choices) != 1 || c.Usage.CompletionTokens == 0 {
		t.Errorf("completion: status %d, %+v; want a reply from imported-step3", status, c)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--model", "x", "--store", db, "--run", "imported"}, "not both"},
		{[]string{"serve", "--store", db}, "both --store PATH and --run RUN"},
		{[]string{"serve", "--store", db, "--run", "nope"}, "nope"},
	} {
		if _, err := runCmd(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestBenchServe runs a tiny bench serve and checks its figures add up: every request answered
// through HTTP, each pass's tokens the requests × new tokens, the ratio of the best passes.
func TestBenchServe(t *testing.T) {
	out, err := runCmd(t, "bench", "serve", "--backend", "go", "--sequences", "4", "--prompt-len", "8", "--new", "4", "--slots", "2", "--clients", "3", "--rounds", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r bench.ServeResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench serve printed %q: %v", out, err)
	}
	if len(r.Direct) != 1 || len(r.HTTP) != 1 || r.Clients != 3 || r.CPU == "" {
		t.Fatalf("result %+v; want one round of each pass, 3 clients and the CPU named", r)
	}
	d, h := r.Direct[0], r.HTTP[0]
	if d.Tokens != 16 || h.Tokens != 16 || h.Requests != 4 || d.TokensPerSec <= 0 || h.TokensPerSec <= 0 || h.RequestsPerSec <= 0 {
		t.Errorf("passes %+v and %+v; want 4 requests × 4 tokens each, rates > 0", d, h)
	}
	if want := h.TokensPerSec / d.TokensPerSec; r.Ratio != want || r.Overhead != 1-want {
		t.Errorf("ratio %v, overhead %v; want %v and %v", r.Ratio, r.Overhead, want, 1-want)
	}
}
