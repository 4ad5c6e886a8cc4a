package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/envs/retool"
	"agentrl/envs/synthetic"
	"agentrl/recipes"
)

// TestEveryCommandHelp runs `COMMAND --help` for every command in the tree: each prints its own
// usage line and short text, and succeeds.
func TestEveryCommandHelp(t *testing.T) {
	var walk func(c *cobra.Command, path []string)
	seen := 0
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			p := append(append([]string{}, path...), sub.Name())
			walk(sub, p)
		}
		seen++
		t.Run(strings.Join(append([]string{"root"}, path...), "_"), func(t *testing.T) {
			out, err := runCmd(t, append(path, "--help")...)
			if err != nil {
				t.Fatalf("%v --help: %v", path, err)
			}
			text := c.Long // help prints the long text when there is one, else the short
			if text == "" {
				text = c.Short
			}
			if !strings.Contains(out, "Usage:") || !strings.Contains(out, text) {
				t.Errorf("%v --help printed no usage or not %q:\n%s", path, text, out)
			}
		})
	}
	root := newRoot(Env{})
	root.InitDefaultCompletionCmd() // Execute adds it; the walk should see it too
	walk(root, nil)
	// the root, run, resume, view, runs, compare, export, plan, bench (+rollout), score, generate,
	// tokenize, tokenizer (+train), sft, tool (+run), completion (+4 shells)
	if seen < 23 {
		t.Errorf("walked %d commands; want every command of the tree (23 or more)", seen)
	}
}

// TestCommandInvocations runs one real invocation of each command not exercised elsewhere in this
// package, in the forms a user types: the explicit run verb, --set, one-dash long flags.
func TestCommandInvocations(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.txt")
	if err := os.WriteFile(corpus, []byte(strings.Repeat("print(12 + 30)\n\nthe answer is 42\n\n", 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  []string
	}{
		{"tool run", []string{"tool", "run", "--executor", "starlark"}, "print(6 * 7)", []string{`"output":"42\n"`, `"status":"ok"`}},
		// The whole observation: the sandbox's init re-runs this binary, whose package inits must print nothing into it.
		{"tool run python", []string{"tool", "run", "--executor", "python"}, "print(6 * 7)", []string{`"observation":"<interpreter>\n42\n</interpreter>"`, `"isolation":"strict`}},
		{"tool run, one-dash flag", []string{"tool", "run", "-executor", "starlark", "-timeout", "2s"}, "print(1 + 1)", []string{`"output":"2\n"`}},
		// A ReTool-SFT turn: fenced code in <code>, the interpreter's output already in the turn, the answer after "Answer:".
		{"tool run --format retool", []string{"tool", "run", "--format", "retool"}, "Compute.\n<code>\n```python\nx = 6 * 7\nprint(x)\n```\n</code>\n<interpreter>\n42\n</interpreter>\n\nAnswer: \\boxed{42}",
			[]string{`"format":"retool"`, `"code":["x = 6 * 7\nprint(x)"]`, `"observation":"\n<interpreter>\n42\n</interpreter>\n"`, `"answer":"42","has_answer":true`}},
		{"tool run --format tool_call", []string{"tool", "run", "--format", "tool_call"}, "Let me run it.\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(6 * 7)\"}}\n</tool_call>",
			[]string{`"content":"Let me run it."`, `"tool_calls":[{"name":"python","arguments":"{\"code\": \"print(6 * 7)\"}"}]`, `"observation":"42"`,
				`"appended":"<|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"`, `"has_answer":false`}},
		{"tool run --format chat", []string{"tool", "run", "--format", "chat"}, "<code>print(6 * 7)</code>",
			[]string{`"appended":"<|im_end|>\n<|im_start|>user\n<interpreter>\n42\n</interpreter><|im_end|>\n<|im_start|>assistant\n"`}},
		{"bench rollout", []string{"bench", "rollout", "--model", fixture("qwen3-tiny"), "--backend", "go", "--slots", "2", "--sequences", "2", "--prompt-len", "4", "--new", "4", "--json"}, "",
			[]string{`"tokens":8`, `"tokens_per_s"`, `"reference_bytes_per_s"`, `"rollout_occupancy":`, `"rollout_tail_s":`, `"tool_stall_share":0,`, `"tool_queue_s":0,`, `"occupancy_trace":[`}},
		{"bench train", []string{"bench", "train", "--model", fixture("qwen3-tiny"), "--backend", "go", "--sequences", "2", "--length", "8", "--prompt", "3", "--micro-batch", "1", "--updates", "1", "--torch-python", "", "--json"}, "",
			[]string{`"trained_tokens":10`, `"tokens_per_s"`, `"peak_flops"`, `"peak_source"`, `"reference_skipped"`}},
		{"tokenizer train", []string{"tokenizer", "train", "--corpus", corpus, "--vocab", "300", "--out", filepath.Join(dir, "tok")}, "", []string{"tokenizer.json"}},
		{"tokenize, one-dash flag", []string{"tokenize", "-tokenizer", fixture("qwen3-tokenizer"), "hello"}, "", []string{`"ids":[`, `"hello"`}},
		{"plan, flags after the recipe", []string{"plan", recipe("retool.yaml"), "--shape", "qwen3-4b", "--vram", "96GiB"}, "", []string{"qwen3-4b"}},
		{"completion bash", []string{"completion", "bash"}, "", []string{"bash completion", "__start_agentrl-tui"}},
		{"completion zsh", []string{"completion", "zsh"}, "", []string{"#compdef agentrl-tui"}},
		{"completion fish", []string{"completion", "fish"}, "", []string{"complete -c agentrl-tui"}},
		{"help", []string{"help"}, "", []string{"Usage:", "resume", "compare", "bench"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMLX_BACKEND", device.GoConfig)
			var out, errb bytes.Buffer
			err := Run(tc.args, Env{Stdin: strings.NewReader(tc.stdin), Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatalf("%v: %v\n%s", tc.args, err, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("%v printed no %q:\n%s", tc.args, w, out.String())
				}
			}
		})
	}
}

// TestViewNeedsATerminal: view refuses to start without a terminal and says what to use instead.
func TestViewNeedsATerminal(t *testing.T) {
	_, err := runCmd(t, "view", "--store", filepath.Join(t.TempDir(), "x.db"))
	if err == nil || !strings.Contains(err.Error(), "needs a terminal") {
		t.Errorf("view without a terminal: %v; want an error saying it needs a terminal", err)
	}
}

// TestLongFlags: one-dash long flags are rewritten where they stand as flags, never as a value.
func TestLongFlags(t *testing.T) {
	root := newRoot(Env{})
	for _, tc := range []struct{ in, want []string }{
		{[]string{"runs", "-json", "-store", "x.db"}, []string{"runs", "--json", "--store", "x.db"}},
		{[]string{"generate", "--prompt", "-json", "-json"}, []string{"generate", "--prompt", "-json", "--json"}},
		{[]string{"compare", "a", "b", "-step", "-1"}, []string{"compare", "a", "b", "--step", "-1"}},
		{[]string{"x.yaml", "-max-steps=3", "-h"}, []string{"x.yaml", "--max-steps=3", "-h"}},
		{[]string{"runs", "-nosuch"}, []string{"runs", "-nosuch"}},
		{[]string{"tokenize", "--tokenizer", "t", "--", "-json"}, []string{"tokenize", "--tokenizer", "t", "--", "-json"}},
	} {
		got := longFlags(root, tc.in)
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("longFlags(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// TestRunFlagsOverrides: the run flags and --set become recipe keys; a malformed --set is named.
func TestRunFlagsOverrides(t *testing.T) {
	f := runFlags{maxSteps: 3, model: "/m", set: []string{"train.lr=1e-5", "eval.ks=1,2"}}
	got, err := f.overrides()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"run.max_steps": "3", "model.path": "/m", "train.lr": "1e-5", "eval.ks": "1,2"}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("overrides = %s; want %s", gj, wj)
	}
	f = runFlags{set: []string{"train.lr"}}
	if _, err := f.overrides(); err == nil || !strings.Contains(err.Error(), `--set "train.lr": want section.field=value`) {
		t.Errorf("--set train.lr: %v; want an error naming it", err)
	}
}

// TestSFTProbe: sft probe prints a row per kind of rules hint for the built-in model, and names
// what is missing or wrong in its flags.
func TestSFTProbe(t *testing.T) {
	dir := filepath.Join("..", model.BuiltinSourceDir)
	recipe := filepath.Join("..", "recipes", "retool.yaml")
	out, err := runCmd(t, "sft", "probe", "--model", dir, "--recipe", recipe, "--tasks", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, flaw := range retool.Flaws {
		if !strings.Contains(out, "\n"+flaw+" ") {
			t.Errorf("no row for %s in\n%s", flaw, out)
		}
	}
	// --levels replaces the recipe's levels, and the table has a column per kind of task.
	out, err = runCmd(t, "sft", "probe", "--model", dir, "--recipe", recipe, "--tasks", "12", "--levels", "0,6")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "(levels [0 6])") || !strings.Contains(out, "level 0 (") || !strings.Contains(out, "named, ") || strings.Contains(out, "level 1 (") {
		t.Errorf("--levels 0,6:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sft", "probe", "--recipe", recipe}, "--model DIR is required"},
		{[]string{"sft", "probe", "--model", dir, "--recipe", recipe, "--tasks", "0"}, "--tasks 0: give at least 1"},
		{[]string{"sft", "probe", "--model", dir, "--recipe", recipe, "--levels", "0,9"}, "--levels [0 9]: level 9 is not one of 0 to 6"},
		{[]string{"sft", "--recipe", recipe, "--out", t.TempDir(), "--levels", "-1"}, "--levels [-1]: level -1 is not one of 0 to 6"},
		{[]string{"sft", "probe", "--model", filepath.Join(t.TempDir(), "none"), "--recipe", recipe}, "none"},
	} {
		if _, err := runCmd(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestSFTData: sft --data with the README's flags for qwen3-4b-retool-sft (all but the paths), on
// the built-in model and the ReTool-SFT sample, writes a folder that score loads (finite
// log-probs), and prints the loss before and after; the data mode's missing or wrong flags are
// named.
func TestSFTData(t *testing.T) {
	dir := filepath.Join("..", model.BuiltinSourceDir)
	data := filepath.Join("..", "testdata", "data", "retool-sft.jsonl")
	out := filepath.Join(t.TempDir(), "sft")
	db := filepath.Join(t.TempDir(), "runs.db")
	got, err := runCmd(t, "sft", "--data", data, "--init", dir, "--out", out, "--store", db, "--format", "retool", "--epochs", "3", "--batch", "128", "--micro-batch", "1",
		"--lr", "1e-5", "--min-lr", "1e-6", "--warmup", "0.1", "--weight-decay", "0.1", "--beta2", "0.95", "--max-len", "16384")
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if !strings.Contains(got, "wrote "+out+": 3 steps on 3 conversations (0 dropped over --max-len, 0 held out)") || !strings.Contains(got, "assistant-token nll 9.2936 -> ") {
		t.Errorf("sft --data printed %q", got)
	}
	js, err := runCmd(t, "score", "--model", out, "--ids", "10,20,30,40")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		NextTokenLogprobs []float64 `json:"next_token_logprobs"`
	}
	if err := json.Unmarshal([]byte(js), &s); err != nil || len(s.NextTokenLogprobs) != 3 {
		t.Fatalf("score: %v %s", err, js)
	}
	for _, lp := range s.NextTokenLogprobs {
		if math.IsNaN(lp) || math.IsInf(lp, 0) || lp > 0 {
			t.Errorf("score log-probs %v", s.NextTokenLogprobs)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(`{"messages": [{"role": "user", "content": "q"}, {"content": "a"}]}`+"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sft", "--data", data, "--out", t.TempDir()}, "--data needs --init MODEL_DIR"},
		{[]string{"sft", "--data", data, "--init", dir}, "--out DIR is required"},
		{[]string{"sft", "--data", data, "--init", dir, "--out", t.TempDir(), "--epochs", "0"}, "--epochs 0: give at least 1"},
		{[]string{"sft", "--data", data, "--init", dir, "--out", t.TempDir(), "--warmup", "1.5"}, "--warmup 1.5: want a share of the steps"},
		{[]string{"sft", "--data", data, "--init", dir, "--out", t.TempDir(), "--format", "xml"}, `format "xml" is not one of chat, retool or tool_call`},
		{[]string{"sft", "--data", bad, "--init", dir, "--out", t.TempDir()}, bad + ":1: field messages[1].role: missing"},
	} {
		if _, err := runCmd(t, append(tc.args, "--store", filepath.Join(t.TempDir(), "runs.db"))...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestLevelRangeAgrees: a recipe's env.tasks.synthetic.levels and sft's --levels accept the
// same levels as the task generator, synthetic.MaxLevel the highest (recipes keeps its own bound
// and does not import the environment).
func TestLevelRangeAgrees(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		level int
		ok    bool
	}{{0, true}, {synthetic.MaxLevel, true}, {synthetic.MaxLevel + 1, false}, {-1, false}} {
		c := *r
		c.Env.Tasks.Synthetic.Levels = []int{tc.level}
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("recipe with level %d: %v; want ok %v", tc.level, err, tc.ok)
		}
		if err := setLevels(&c, []int{tc.level}); (err == nil) != tc.ok {
			t.Errorf("--levels %d: %v; want ok %v", tc.level, err, tc.ok)
		}
		if _, _, err := (synthetic.Tasks{Levels: []int{tc.level}}).Split(1, 0); (err == nil) != tc.ok {
			t.Errorf("generator, level %d: %v; want ok %v", tc.level, err, tc.ok)
		}
	}
}
