package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
)

// builtinDir is the built-in model, what these tests serve (no mock of the model).
var builtinDir = filepath.Join("..", "..", "testdata", "builtin")

// retoolSystem is the ReTool system prompt the built-in model was trained on (envs/retool's
// DefaultSystem): with it, greedy decoding writes a <code> block.
const retoolSystem = "Solve the problem. You may run code by writing it between <code> and </code>; its output comes back in <interpreter></interpreter>. Give the final answer as \\boxed{answer}."

// pythonTool is a function tool named python, the built-in model's code tool.
const pythonTool = `{"type": "function", "function": {"name": "python", "description": "Run Python code and return what it prints.", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}`

var loaded struct {
	once sync.Once
	m    *model.Model
	tok  *tokenizer.Tokenizer
	err  error
}

// builtin loads the built-in model and tokenizer once per test binary (a Model is safe for
// concurrent use).
func builtin(t testing.TB) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	loaded.once.Do(func() {
		b, err := device.NewGo(device.GoConfig)
		if err != nil {
			loaded.err = err
			return
		}
		if loaded.m, loaded.err = model.Load(b, builtinDir, model.Options{}); loaded.err != nil {
			return
		}
		loaded.tok, loaded.err = tokenizer.Load(builtinDir)
	})
	if loaded.err != nil {
		t.Fatal(loaded.err)
	}
	return loaded.m, loaded.tok
}

// newGenerator makes a generator on the built-in model, closed when the test ends.
func newGenerator(t testing.TB, cfg rollout.Config) *rollout.Generator {
	t.Helper()
	m, tok := builtin(t)
	if cfg.MaxLen == 0 {
		cfg.MaxLen = 512
	}
	cfg.Decode = func(ids []int32) string { return tok.Decode(ids, false) }
	g, err := rollout.New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// newServer serves the built-in model on a generator of cfg; it returns the server and its
// base URL. Options default to the model name "builtin", greedy sampling and the python code
// tool.
func newServer(t testing.TB, cfg rollout.Config, o Options) (*Server, string) {
	t.Helper()
	g := newGenerator(t, cfg)
	_, tok := builtin(t)
	if o.ModelName == "" {
		o.ModelName = "builtin"
	}
	if o.CodeTool == "" {
		o.CodeTool = "python"
	}
	s, err := New(g, tok, o)
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, base
}

// call sends a request with key (none when "") and returns the status and body.
func call(t testing.TB, method, url, key string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// chatReply is the part of a chat completion the tests read.
type chatReply struct {
	Choices []struct {
		Message struct {
			Role      string         `json:"role"`
			Content   *string        `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// chatOK posts a chat completion that must succeed and returns the reply.
func chatOK(t testing.TB, base, key string, body map[string]any) chatReply {
	t.Helper()
	status, data := call(t, http.MethodPost, base+"/chat/completions", key, body)
	if status != http.StatusOK {
		t.Fatalf("chat completion: status %d: %s", status, data)
	}
	var r chatReply
	if err := json.Unmarshal(data, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("chat completion %s: %v; want one choice", data, err)
	}
	return r
}

// content is a reply's content ("" for null).
func (r chatReply) content() string {
	if c := r.Choices[0].Message.Content; c != nil {
		return *c
	}
	return ""
}

// waitFor polls cond until it holds, failing the test after a generous deadline (an event the
// test waits on, not a claim about speed).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// task is a first chat request the built-in model answers with a <code> block (greedy).
func task(q string, extra map[string]any) map[string]any {
	body := map[string]any{"model": "builtin", "messages": []map[string]any{
		{"role": "system", "content": retoolSystem}, {"role": "user", "content": q}}}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

// segmentRuns splits a segment into its runs of sampled (Mask true) and added tokens.
func segmentRuns(g Segment) (runs [][]int32, sampled []bool) {
	for i := 0; i < len(g.Tokens); {
		j := i
		for j < len(g.Tokens) && g.Mask[j] == g.Mask[i] {
			j++
		}
		runs = append(runs, g.Tokens[i:j])
		sampled = append(sampled, g.Mask[i])
		i = j
	}
	return runs, sampled
}
