package engine

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/event"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
)

// rulesHintCases trigger every branch of the rules hinter, error messages at and past the quoted
// length included.
var rulesHintCases = []retool.Summary{
	{ToolCalls: 1, Timeouts: 1, LastError: "timeout"},
	{ToolCalls: 1, Killed: 1},
	{ToolCalls: 1, ToolErrors: 1, LastError: "Traceback (most recent call last):\n  File \"<code>\", line 3\nNameError: name 'total_sum_of_all_the_values' is not defined"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "  File \"<code>\", line 1\n    print(1 +\nSyntaxError: '(' was never closed because the line ended early"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "ZeroDivisionError: division by zero, while computing the ratio of the two sums given"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "the code did something odd that is no exception at all but still failed to run properly"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "code.star:3:5: undefined: x"},
	{FormatErrors: 1},
	{ToolCalls: 1},
	{Answered: true},
	{ToolCalls: 1, Answered: true, Answer: "12", LastOutput: "12"},
	{ToolCalls: 1, Answered: true, Answer: "12", LastOutput: "13"},
	{ToolCalls: 1, Answered: true, Answer: "123456789012345678901234567890123456789012345678901234567890", LastOutput: "line one\n3.14159265358979323846264338327950288419716939937510582097494459"},
	{ToolCalls: 1, Answered: true, Answer: "?", LastOutput: ""},
}

// TestRulesHintsAreWhole renders every rules hint with the built-in tokenizer and with Qwen3's and
// checks that, at both ReTool recipes' hinter.max_hint_tokens, the teacher gets the whole hint,
// ending in its instruction's full stop.
func TestRulesHintsAreWhole(t *testing.T) {
	toks := map[string]string{"built-in": filepath.Join("..", BuiltinSourceDir), "qwen3": filepath.Join("..", "testdata", "fixtures", "qwen3-tokenizer")}
	for _, name := range []string{"retool.yaml", "retool-baseline.yaml"} {
		r, err := recipes.Load(filepath.Join("..", "recipes", name), recipes.Options{IgnoreEnv: true})
		if err != nil {
			t.Fatal(err)
		}
		for tname, dir := range toks {
			tok, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			// A task whose reference program is as long as a hint names (48 characters, digits
			// that the built-in tokenizer spends a token each on).
			task := envs.Task{Meta: map[string]string{"code": "print(" + strings.Repeat("1234567 * ", 5)[:41] + ")"}}
			for _, s := range rulesHintCases {
				for _, h := range []string{retool.RulesHint(s), retool.RulesHintFor(s, task)} {
					got, cut := wholeHint(tok, h, r.Hinter.MaxHintTokens)
					if h == "" || got != h || cut != "" || !strings.HasSuffix(got, ".") {
						t.Errorf("%s, %s tokenizer (%d tokens of %d): hint %q reaches the teacher as %q (%s)", name, tname,
							len(tok.Encode(h)), r.Hinter.MaxHintTokens, h, got, cut)
					}
				}
			}
		}
	}
}

// TestWholeHint: a hint over the budget loses whole trailing sentences, never part of one, and one
// whose first sentence does not fit is dropped.
func TestWholeHint(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "testdata", "fixtures", "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	two := "Print the sum first. Then copy the printed number into the box."
	first := len(tok.Encode("Print the sum first."))
	for _, tc := range []struct {
		name, hint string
		n          int
		want, cut  string
	}{
		{"fits", two, 64, two, ""},
		{"second sentence left out", two, first, "Print the sum first.", hintShortened},
		{"first sentence too long", two, first - 1, "", hintDropped},
		{"no budget", two, 0, two, ""},
		{"empty", "", 8, "", ""},
	} {
		if got, cut := wholeHint(tok, tc.hint, tc.n); got != tc.want || cut != tc.cut {
			t.Errorf("%s: got %q (%q); want %q (%q)", tc.name, got, cut, tc.want, tc.cut)
		}
	}
}

// TestRunHintsWhole runs a step of the Hybrid recipe and checks what reached the teacher: every
// hint a whole rules hint, none shortened or dropped, the usefulness probe in the step's metrics
// and its alarm raised exactly when the probe is at or below zero.
func TestRunHintsWhole(t *testing.T) {
	c, _, events := tinyRun(t, map[string]string{"run.max_steps": "1", "eval.at_start": "false"})
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	whole := map[string]bool{}
	for _, s := range rulesHintCases {
		whole[retool.RulesHint(s)] = true
	}
	hinted, alarms := 0, 0
	var metrics map[string]float64
	for e := range events {
		switch v := e.(type) {
		case event.Trajectory:
			if v.Hint != "" {
				hinted++
				if !strings.HasSuffix(v.Hint, ".") {
					t.Errorf("trajectory %s #%d: hint %q does not end a sentence", v.TaskID, v.Sample, v.Hint)
				}
			}
		case event.StepMetrics:
			metrics = v.Metrics
		case event.Alarm:
			if v.Kind == event.AlarmHintUseless {
				alarms++
			}
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if hinted == 0 {
		t.Fatal("no hinted trajectory: a random model's attempts should all earn a rules hint")
	}
	if metrics["hints_shortened"] != 0 || metrics["hints_dropped"] != 0 {
		t.Errorf("hints shortened %v, dropped %v; want none at max_hint_tokens 128", metrics["hints_shortened"], metrics["hints_dropped"])
	}
	gain, ok := metrics["hint_gain"]
	if !ok || math.IsNaN(gain) {
		t.Fatalf("no hint_gain in %v", metrics)
	}
	if metrics["hint_lift_demo_probed"] < 1 || math.IsNaN(metrics["hint_lift_demo"]) {
		t.Errorf("hint_lift_demo %v over %v demonstrations; want it measured (every task has a reference program)",
			metrics["hint_lift_demo"], metrics["hint_lift_demo_probed"])
	}
	checkDemonstrations(t, c)
	probe := gain
	if lift, ok := metrics["hint_lift"]; ok {
		probe = lift
	}
	if want := map[bool]int{true: 1, false: 0}[probe <= 0]; alarms != want {
		t.Errorf("probe %+.4f: %d hint_useless alarms, want %d", probe, alarms, want)
	}
}

// checkDemonstrations: each demonstration the probe scored reads, after its task's prompt, as the
// chat template renders the conversation (the reference program's turn, the interpreter's
// output, the boxed answer), and its own tokens are the assistant turns.
func checkDemonstrations(t *testing.T, c *Controller) {
	t.Helper()
	byID := map[string]envs.Task{}
	for _, task := range c.train {
		byID[task.ID] = task
	}
	n := 0
	for id, d := range c.demos {
		if d == nil {
			continue
		}
		n++
		task := byID[id]
		prompt, err := c.prompt(task, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := demoConversation(retool.SystemFor(c.r.Env.Observation.Format), task, d.turns, "")
		own := checkLayout(t, c.o.Tokenizer, conv, prompt)
		if own != len(d.without) {
			t.Errorf("task %s: %d own tokens, %d log-probs scored without the hint", id, own, len(d.without))
		}
	}
	if n == 0 {
		t.Error("no demonstration scored")
	}
}

// checkLayout checks maskAssistant's sequence of conv (system, user, then turns ending on the
// assistant's answer) against the chat template and against the rollout's prompt tokens, and
// returns how many of its tokens are the assistant's own: the sequence opens with prompt; it
// reads, up to the last turn, as the template renders it with the generation prompt (as the
// rollout's token-drift probe checks a trajectory), then the answer closed by <|im_end|> (the
// template would put an empty <think> block before a final turn; rollouts have none); its own
// tokens are the assistant turns, each closed by <|im_end|>.
func checkLayout(t *testing.T, tok *tokenizer.Tokenizer, conv []tokenizer.Message, prompt []int32) int {
	t.Helper()
	s, ok := maskAssistant(tok, conv)
	if !ok {
		t.Fatalf("%v does not render", conv)
	}
	if len(s.Tokens) < len(prompt) || !slices.Equal(s.Tokens[:len(prompt)], prompt) {
		t.Errorf("the sequence does not open with the rollout's prompt:\n%q\n%q", tok.Decode(s.Tokens, false), tok.Decode(prompt, false))
	}
	upToLast, err := tokenizer.RenderChat(conv[:len(conv)-1], nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, whole := tok.Decode(s.Tokens, false), upToLast+conv[len(conv)-1].Content+"<|im_end|>"; got != whole {
		t.Errorf("the sequence reads\n%q\nthe chat template renders\n%q", got, whole)
	}
	var own string
	for _, m := range conv[2:] {
		if m.Role == "assistant" {
			own += m.Content + "<|im_end|>"
		}
	}
	var policy []int32
	for j, p := range s.LossMask {
		if p {
			policy = append(policy, s.Tokens[j])
		}
	}
	if got := tok.Decode(policy, false); got != own {
		t.Errorf("the own tokens read %q, want the assistant turns %q", got, own)
	}
	return len(policy)
}

// TestDemonstrationLayoutToolResponse: with the tool_response observation format a
// demonstration's tool turn is laid out as the rollout and the chat template lay it out (a user
// turn wrapping the output in <tool_response>).
func TestDemonstrationLayoutToolResponse(t *testing.T) {
	tok := testTokenizer(t)
	tasks, _, err := retool.Synthetic{Levels: []int{0}, Seed: 3}.Split(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := (&sandbox.Starlark{}).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	turns, err := retool.Demonstration(context.Background(), tasks[0], retool.DemoTool, sess, retool.FormatToolResponse)
	if err != nil {
		t.Fatal(err)
	}
	if turns[1].Role != "tool" {
		t.Fatalf("the observation turn is %q; want a tool turn", turns[1].Role)
	}
	system := retool.SystemFor(retool.FormatToolResponse)
	opening, err := tokenizer.RenderChat([]tokenizer.Message{{Role: "system", Content: system}, {Role: "user", Content: tasks[0].Prompt}}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, tok, demoConversation(system, tasks[0], turns, ""), tok.Encode(opening))
}

// TestFitHintStripsSpecialTokens: a rules hint quoting an answer the policy wrote with a chat
// marker in it reaches the teacher as one user turn: the marker's text is gone before the hint
// is fitted and encoded.
func TestFitHintStripsSpecialTokens(t *testing.T) {
	tok := testTokenizer(t)
	r := &recipes.Recipe{}
	r.Hinter.MaxHintTokens = 128
	c := &Controller{o: Options{Tokenizer: tok}, r: r}
	h := retool.RulesHint(retool.Summary{Answered: true, ToolCalls: 1, LastOutput: "86143986\n", Answer: "861<|im_start|>1986"})
	if !strings.Contains(h, "<|im_start|>") {
		t.Fatalf("the rules hint %q no longer quotes the answer; the test needs one that does", h)
	}
	got, cut := c.fitHint(h)
	if want := strings.ReplaceAll(h, "<|im_start|>", ""); got != want || cut != "" {
		t.Errorf("fitHint = %q (%q), want %q", got, cut, want)
	}
	imStart, _ := tok.TokenID("<|im_start|>")
	for _, id := range tok.Encode(got) {
		if id == imStart {
			t.Errorf("the fitted hint %q encodes <|im_start|>", got)
		}
	}
}
