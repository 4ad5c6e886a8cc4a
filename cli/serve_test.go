package cli

import (
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"agentrl/engine/bench"
	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/envs/retool"
	"agentrl/store"
)

// startServe runs `agentrl-tui serve ARGS --addr 127.0.0.1:0` until the returned stop is called;
// it returns the base URL the command printed and its output so far.
func startServe(t *testing.T, args ...string) (base string, out *syncBuffer, stop func() error) {
	t.Helper()
	base, out, _, stop = startServeErr(t, args...)
	return base, out, stop
}

// startServeErr is startServe that also returns the command's stderr.
func startServeErr(t *testing.T, args ...string) (base string, out, errb *syncBuffer, stop func() error) {
	t.Helper()
	t.Setenv("GOMLX_BACKEND", device.GoConfig)
	out, errb = &syncBuffer{}, &syncBuffer{}
	root := newRoot(Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, Builtin: os.DirFS(filepath.Join("..", model.BuiltinSourceDir))})
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
	return base, out, errb, stop
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
	if code := plainChatCode(t, base, "agentrl-builtin"); !strings.Contains(code, "14 + 75") {
		t.Errorf("a plain chat (no system message) got code %q; want the built-in model's own answer to it: a python call adding 14 + 75", code)
	}
	if err := stop(); err != nil {
		t.Errorf("stopping: %v; want a clean stop", err)
	}
	for _, want := range []string{"serving agentrl-builtin", "2 KV slots, contexts up to 1023 tokens", `calls of the tool "python"`, "no chat_template", "stopped",
		"the built-in model was trained with ReTool's system prompt \"Solve the problem.", "a plain chat without it is outside its training",
		"a chat request without a system message gets that prompt first (--system-prompt none: sent as it is)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q; want it to say %q", out, want)
		}
	}
	if _, err := http.Get(base + "/models"); err == nil {
		t.Error("the server still answers after the command stopped")
	}
}

// plainChatCode asks the served model "What is 14 + 75?" with no system message, greedily, with
// the python tool offered, and returns the code of its one python call ("" when the reply is
// not one python call).
func plainChatCode(t *testing.T, base, model string) string {
	t.Helper()
	var chat struct {
		Choices []struct {
			Message struct {
				Content   *string
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	body := `{"model": "` + model + `", "temperature": 0, "max_tokens": 40, "messages": [{"role": "user", "content": "What is 14 + 75?"}],
		"tools": [{"type": "function", "function": {"name": "python", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]}`
	if status := post(t, base+"/chat/completions", body, &chat); status != http.StatusOK || len(chat.Choices) != 1 {
		t.Fatalf("plain chat: status %d, %+v; want one choice", status, chat)
	}
	m := chat.Choices[0].Message
	var args struct{ Code string }
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "python" || json.Unmarshal([]byte(m.ToolCalls[0].Function.Arguments), &args) != nil {
		content := ""
		if m.Content != nil {
			content = *m.Content
		}
		t.Errorf("plain chat: content %q, calls %+v; want one python call", content, m.ToolCalls)
		return ""
	}
	return args.Code
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
	exported := filepath.Join(t.TempDir(), "export")
	if err := s.Export("imported", 3, exported); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A checkpoint of the built-in model, and an export of it, serve as the built-in model does:
	// <code> blocks are python calls and a plain chat gets its system prompt.
	for _, args := range [][]string{{"--store", db, "--run", "imported"}, {"--model", exported, "--name", "imported-step3"}} {
		base, out, stop := startServe(t, append(args, "--slots", "1")...)
		if code := plainChatCode(t, base, "imported-step3"); !strings.Contains(code, "14 + 75") {
			t.Errorf("%v: a plain chat got code %q; want a python call adding 14 + 75, as the built-in model answers", args, code)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
		for _, want := range []string{`calls of the tool "python"`, "this model is the built-in model's (its tokenizer: a checkpoint or an export of it) and was trained with ReTool's system prompt",
			"a chat request without a system message gets that prompt first"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output %q; want it to say %q", args, out, want)
			}
		}
	}
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

// TestServeListenAddress serves on every interface with a port the system picks: the banner
// names the address it really listens on (0.0.0.0 or [::], and the port of the URL it printed) and, with
// no API key, warns on stderr and in the banner; with --api-key it does not warn.
func TestServeListenAddress(t *testing.T) {
	t.Setenv("AGENTRL_SERVE_API_KEY", "")
	base, out, errb, stop := startServeErr(t, "--slots", "1", "--addr", "0.0.0.0:0")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// 0.0.0.0 listens on a dual-stack socket where the system has IPv6 (Go's "tcp" network):
	// the address it really listens on is then [::].
	port := base[strings.LastIndex(base, ":")+1 : len(base)-len("/v1")]
	addr := "0.0.0.0:" + port
	if strings.Contains(out.String(), "[::]:"+port) {
		addr = "[::]:" + port
	}
	want := "listening on " + addr + " (every interface"
	if !strings.Contains(out.String(), want) {
		t.Errorf("banner %q; want the resolved address and port in %q", out, want)
	}
	warn := "WARNING: no API key on " + addr
	if !strings.Contains(errb.String(), warn) || !strings.Contains(errb.String(), "--api-key") {
		t.Errorf("stderr %q; want %q naming the fix --api-key", errb, warn)
	}
	if !strings.Contains(out.String(), warn) {
		t.Errorf("banner %q; want the warning %q in it too", out, warn)
	}

	t.Setenv("AGENTRL_SERVE_API_KEY", "sesame")
	_, out, errb, stop = startServeErr(t, "--slots", "1", "--addr", "0.0.0.0:0")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String()+errb.String(), "WARNING") || !strings.Contains(out.String(), "every request must send the API key") {
		t.Errorf("with $AGENTRL_SERVE_API_KEY: output %q, stderr %q; want no warning and the key required", out, errb)
	}
}

// TestListenBanner: who reaches each kind of address, and the warning only where others reach
// it without a key.
func TestListenBanner(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		keyed    bool
		line     string
		warnings bool
	}{
		{"127.0.0.1:8000", false, "listening on 127.0.0.1:8000 (loopback: only this machine reaches it)", false},
		{"[::1]:8000", false, "listening on [::1]:8000 (loopback", false},
		{"0.0.0.0:41234", false, "listening on 0.0.0.0:41234 (every interface", true},
		{"[::]:41234", false, "listening on [::]:41234 (every interface, IPv4 and IPv6", true},
		{"10.1.2.3:8000", false, "listening on 10.1.2.3:8000 (not loopback", true},
		{"0.0.0.0:41234", true, "every request must send the API key", false},
		{"10.1.2.3:8000", true, "every request must send the API key", false},
	} {
		ap, err := netip.ParseAddrPort(tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		line, warning := listenBanner(net.TCPAddrFromAddrPort(ap), tc.keyed)
		if !strings.Contains(line, tc.line) {
			t.Errorf("%s keyed %v: line %q; want it to say %q", tc.addr, tc.keyed, line, tc.line)
		}
		if got := warning != ""; got != tc.warnings {
			t.Errorf("%s keyed %v: warning %q; want one: %v", tc.addr, tc.keyed, warning, tc.warnings)
		}
		if warning != "" && (!strings.Contains(warning, tc.addr) || !strings.Contains(warning, "--api-key") || !strings.Contains(warning, "127.0.0.1")) {
			t.Errorf("%s: warning %q; want it to name the address and both fixes (--api-key, loopback)", tc.addr, warning)
		}
	}
}

// TestSameTokenizer tells the built-in model's kin by its tokenizer.json: the built-in folder is;
// a tokenizer one byte off, Qwen's and a folder without one are not.
func TestSameTokenizer(t *testing.T) {
	builtin := os.DirFS(filepath.Join("..", model.BuiltinSourceDir))
	own, err := fs.ReadFile(builtin, "tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir() // the same size, one byte changed
	changed := append([]byte(nil), own...)
	changed[len(changed)/2] ^= 1
	if err := os.WriteFile(filepath.Join(other, "tokenizer.json"), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		dir      string
		embedded fs.FS
		want     bool
	}{
		{"the built-in folder", filepath.Join("..", model.BuiltinSourceDir), builtin, true},
		{"another tokenizer of the same size", other, builtin, false},
		{"a Qwen tokenizer folder", fixture("qwen3-tokenizer"), builtin, false},
		{"no tokenizer.json", t.TempDir(), builtin, false},
		{"no built-in model in the binary", filepath.Join("..", model.BuiltinSourceDir), nil, false},
	} {
		if got := sameTokenizer(tc.dir, tc.embedded); got != tc.want {
			t.Errorf("%s: sameTokenizer = %v; want %v", tc.name, got, tc.want)
		}
	}
}

// TestSystemBanner: the banner names the built-in model's prompt for it and its kin, and says
// what a chat request without a system message gets for each --system-prompt.
func TestSystemBanner(t *testing.T) {
	for _, tc := range []struct {
		name          string
		builtin, kin  bool
		system        string
		want, notWant []string
	}{
		{name: "built-in, auto", builtin: true, kin: true, system: retool.DefaultSystem,
			want: []string{"the built-in model was trained with ReTool's system prompt", "gets that prompt first"}},
		{name: "checkpoint of it, none", kin: true, system: "",
			want: []string{"this model is the built-in model's", "is sent as it is (--system-prompt none)"}, notWant: []string{"gets"}},
		{name: "other model, own text", system: "Be brief.",
			want: []string{`gets the system prompt "Be brief." first`}, notWant: []string{"ReTool"}},
		{name: "other model, auto", notWant: []string{"system"}},
	} {
		got := strings.Join(systemBanner(tc.builtin, tc.kin, tc.system), "\n")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: banner %q; want it to say %q", tc.name, got, w)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(got, w) {
				t.Errorf("%s: banner %q; want no %q", tc.name, got, w)
			}
		}
	}
}
