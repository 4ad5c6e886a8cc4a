package serve

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"agentrl/engine/rollout"
)

// exampleAgent is the example agent's folder: its package.json and package-lock.json pin the one
// openai npm package the project uses (the agent and these tests), and `npm ci` there installs it.
var exampleAgent = filepath.Join("..", "..", "examples", "retool-agent")

// openaiNodeVersion returns the openai version the example agent's package.json pins.
func openaiNodeVersion(t *testing.T) string {
	t.Helper()
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	data, err := os.ReadFile(filepath.Join(exampleAgent, "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil || pkg.Dependencies["openai"] == "" {
		t.Fatalf("%s/package.json does not pin openai (%v): it is the one pin of the openai npm package", exampleAgent, err)
	}
	return pkg.Dependencies["openai"]
}

// installedOpenAI reports the openai version in dir/node_modules, "" when there is none.
func installedOpenAI(dir string) string {
	var pj struct{ Version string }
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "openai", "package.json"))
	if err != nil || json.Unmarshal(data, &pj) != nil {
		return ""
	}
	return pj.Version
}

// openaiNode returns a folder whose node_modules holds the openai package at the example agent's
// pin: $AGENTRL_OPENAI_NODE, else examples/retool-agent after its `npm ci` (what .ci/run does),
// else a copy of that folder's package files installed with `npm ci` into the user's cache folder
// (once per version). A machine without node or npm fails the test, saying what to install.
func openaiNode(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: these tests drive the server with the official openai npm package; install Node.js 20 and npm (e.g. apt-get install nodejs npm)")
	}
	version := openaiNodeVersion(t)
	if dir := os.Getenv("AGENTRL_OPENAI_NODE"); dir != "" {
		if got := installedOpenAI(dir); got != version {
			t.Fatalf("AGENTRL_OPENAI_NODE=%s holds no node_modules/openai at version %s (found %q): run npm ci in examples/retool-agent and point it there",
				dir, version, got)
		}
		return dir
	}
	if installedOpenAI(exampleAgent) == version {
		abs, err := filepath.Abs(exampleAgent)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agentrl-tui", "openai-node-"+version)
	if installedOpenAI(dir) == version {
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("npm is not installed: these tests install the official openai npm package with it; install npm (e.g. apt-get install npm), or run npm ci in examples/retool-agent")
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "npm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(exampleAgent, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, f), data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci (openai@%s, as examples/retool-agent pins it): %v\n%s\n(the tests need the npm registry once, or npm ci run in examples/retool-agent)", version, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if installedOpenAI(dir) != version {
			t.Fatal(err)
		}
	}
	return dir
}

// runAgent runs testdata/agent.cjs's scenario against base with key and decodes what it prints.
func runAgent(t *testing.T, pkg, base, key, scenario string, env map[string]string, out any) {
	t.Helper()
	cmd := exec.Command("node", filepath.Join("testdata", "agent.cjs"), scenario)
	cmd.Env = append(os.Environ(), "AGENTRL_OPENAI_NODE="+pkg, "OPENAI_BASE_URL="+base, "OPENAI_API_KEY="+key, "SYSTEM="+retoolSystem)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node agent.cjs %s: %v\n%s", scenario, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node agent.cjs %s printed %q: %v", scenario, stdout.String(), err)
	}
}

// nodeError is an APIError as the openai client raised it.
type nodeError struct {
	Class, Code, Type, Param, Message string
	Status                            int
}

// TestOpenAINodeClient drives the server with the official openai npm package: a whole reply, the
// same reply streamed, a conversation with a tool call and a role: tool message (then checked
// token for token against a hand rendering and a separate generator), the models list and a
// raw completion, errors as the client's APIError classes, and a revoked key.
func TestOpenAINodeClient(t *testing.T) {
	pkg := openaiNode(t)
	_, tok := builtin(t)
	s, base := newServer(t, rollout.Config{Slots: 2}, Options{Sampling: Sampling{Temperature: 1}})

	t.Run("whole and streamed", func(t *testing.T) {
		var whole, streamed struct {
			Content      *string `json:"content"`
			Role         string  `json:"role"`
			FinishReason string  `json:"finish_reason"`
			Usage        struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Chunks int `json:"chunks"`
		}
		k1, k2 := s.Begin("whole", TrajectoryOptions{}), s.Begin("streamed", TrajectoryOptions{})
		runAgent(t, pkg, base, k1, "whole", map[string]string{"SEED": "11"}, &whole)
		runAgent(t, pkg, base, k2, "stream", map[string]string{"SEED": "11"}, &streamed)
		t1, _ := s.Finish(k1)
		t2, _ := s.Finish(k2)
		if whole.Content == nil || streamed.Content == nil || *streamed.Content != *whole.Content || streamed.Role != "assistant" ||
			streamed.FinishReason != whole.FinishReason || streamed.Usage.CompletionTokens != whole.Usage.CompletionTokens || streamed.Chunks < 3 {
			t.Errorf("streamed %+v; whole %+v: want the same reply, the assistant role, the usage", streamed, whole)
		}
		if len(t1.Turns) != 1 || t1.Turns[0].Content != *whole.Content || len(t2.Turns) != 1 || !slices.Equal(t1.Segments[0].Tokens, t2.Segments[0].Tokens) {
			t.Errorf("recorded turns %+v and %+v; want one each, the reply the client got, the same tokens", t1.Turns, t2.Turns)
		}
	})

	t.Run("conversation with a tool call", func(t *testing.T) {
		key := s.Begin("conversation", TrajectoryOptions{Sampling: &Sampling{}, Override: true}) // greedy, whatever the client asks
		var got struct {
			Error string
			First struct {
				Message struct {
					Content   *string        `json:"content"`
					ToolCalls []wireToolCall `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
				Code         string
			}
			Second struct {
				Message struct {
					Content *string `json:"content"`
				}
				FinishReason string `json:"finish_reason"`
			}
		}
		runAgent(t, pkg, base, key, "conversation", map[string]string{"TOOL_OUTPUT": "89"}, &got)
		traj, err := s.Finish(key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Error != "" || got.First.FinishReason != "tool_calls" || len(got.First.Message.ToolCalls) != 1 || got.First.Code == "" {
			t.Fatalf("the client saw %+v; want a python tool call first", got)
		}
		if len(traj.Segments) != 1 || len(traj.Turns) != 2 || traj.Drift != "" {
			t.Fatalf("%d segments, %d turns, drift %q; want the tool message to extend the one segment", len(traj.Segments), len(traj.Turns), traj.Drift)
		}
		runs, sampled := segmentRuns(traj.Segments[0])
		if !slices.Equal(sampled, []bool{false, true, false, true}) {
			t.Fatalf("runs sampled %v; want prompt, reply, tool turn, reply", sampled)
		}
		p1, a2 := tok.Encode(templateStart(retoolSystem, "What is 14 + 75?")), tok.Encode(toolTurn("89"))
		s1 := replay(t, p1, 60).IDs
		s2 := replay(t, slices.Concat(p1, s1, a2), 60).IDs
		if !slices.Equal(traj.Segments[0].Tokens, slices.Concat(p1, s1, a2, s2)) {
			t.Errorf("trajectory tokens\n%v\nwant the hand-rendered prompt, the sampled ids, the tool turn, the sampled ids\n%v",
				traj.Segments[0].Tokens, slices.Concat(p1, s1, a2, s2))
		}
		if reads := tok.Decode(runs[1], false); reads != "<code>\n"+got.First.Code+"\n</code><|im_end|>" {
			t.Errorf("the first reply's tokens read %q; the client got the code %q", reads, got.First.Code)
		}
		second := ""
		if got.Second.Message.Content != nil {
			second = *got.Second.Message.Content
		}
		if traj.Turns[1].Content != second || traj.Turns[1].Messages[0].Role != "tool" {
			t.Errorf("second turn %+v; the client got %q after a tool message", traj.Turns[1], second)
		}
	})

	t.Run("models and a raw completion", func(t *testing.T) {
		key := s.Begin("misc", TrajectoryOptions{})
		defer s.Finish(key) //nolint:errcheck // the slot is all that matters
		var got struct {
			Models       []string
			Text         string
			FinishReason string `json:"finish_reason"`
		}
		runAgent(t, pkg, base, key, "misc", nil, &got)
		if !slices.Equal(got.Models, []string{"builtin"}) || got.FinishReason == "" {
			t.Errorf("the client saw %+v; want the one model and a finished completion", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		key := s.Begin("errors", TrajectoryOptions{})
		defer s.Finish(key) //nolint:errcheck
		var got struct {
			N2, Model nodeError
			After     string
		}
		runAgent(t, pkg, base, key, "errors", nil, &got)
		if e := got.N2; e.Class != "BadRequestError" || e.Status != 400 || e.Param != "n" || e.Type != "invalid_request_error" {
			t.Errorf("n = 2: the client raised %+v; want BadRequestError 400 about n", e)
		}
		if e := got.Model; e.Class != "NotFoundError" || e.Status != 404 || e.Code != "model_not_found" {
			t.Errorf("unknown model: the client raised %+v; want NotFoundError 404 model_not_found", e)
		}
		if got.After == "" {
			t.Error("no reply after the errors")
		}
	})

	t.Run("revoked key", func(t *testing.T) {
		key := s.Begin("revoked", TrajectoryOptions{})
		if _, err := s.Finish(key); err != nil {
			t.Fatal(err)
		}
		var e nodeError
		runAgent(t, pkg, base, key, "refused", nil, &e)
		if e.Class != "AuthenticationError" || e.Status != 401 || e.Code != "invalid_api_key" {
			t.Errorf("revoked key: the client raised %+v; want AuthenticationError 401 invalid_api_key", e)
		}
	})
}
