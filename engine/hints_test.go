package engine

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/hint"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
)

// TestRunHintsWhole runs a step of the Hybrid recipe and checks what reached the teacher: every
// hint a whole rules hint, none shortened or dropped, the usefulness probe in the step's metrics
// and its alarm raised exactly when the probe is at or below zero.
func TestRunHintsWhole(t *testing.T) {
	c, _, events := tinyRun(t, map[string]string{"run.max_steps": "1", "eval.at_start": "false"})
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	whole := map[string]bool{}
	for _, s := range retool.RulesHintCases {
		whole[retool.RulesHint(s)] = true
	}
	hinted, alarms := 0, 0
	var metrics map[event.Metric]float64
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
	for id, d := range c.hints.Demos() {
		if d == nil {
			continue
		}
		n++
		task := byID[id]
		prompt, err := c.prompt(task, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := hint.DemoConversation(retool.SystemFor(c.recipe.Env.Observation.Format), task, d.Turns, "")
		own := checkLayout(t, c.opts.Tokenizer, conv, prompt)
		if own != len(d.Without) {
			t.Errorf("task %s: %d own tokens, %d log-probs scored without the hint", id, own, len(d.Without))
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
func checkLayout(t *testing.T, tok *tokenizer.Tokenizer, conv []envs.Message, prompt []int32) int {
	t.Helper()
	ids, mask, err := batch.MaskAssistant(tok, conv, nil)
	if err != nil {
		t.Fatalf("%v does not render: %v", conv, err)
	}
	if len(ids) < len(prompt) || !slices.Equal(ids[:len(prompt)], prompt) {
		t.Errorf("the sequence does not open with the rollout's prompt:\n%q\n%q", tok.Decode(ids, false), tok.Decode(prompt, false))
	}
	upToLast, err := tokenizer.RenderChat(conv[:len(conv)-1], nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, whole := tok.Decode(ids, false), upToLast+conv[len(conv)-1].Content+"<|im_end|>"; got != whole {
		t.Errorf("the sequence reads\n%q\nthe chat template renders\n%q", got, whole)
	}
	var own string
	for _, m := range conv[2:] {
		if m.Role == "assistant" {
			own += m.Content + "<|im_end|>"
		}
	}
	var policy []int32
	for j, p := range mask {
		if p {
			policy = append(policy, ids[j])
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
	tasks, _, err := synthetic.Tasks{Levels: []int{0}, Seed: 3}.Split(1, 0)
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
	opening, err := tokenizer.RenderChat([]envs.Message{{Role: "system", Content: system}, {Role: "user", Content: tasks[0].Prompt}}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, tok, hint.DemoConversation(system, tasks[0], turns, ""), tok.Encode(opening))
}

// TestHintGateLift runs a step of the Hybrid recipe with the built-in model as the model PRM
// and hinter.gate lift: every bridge thought is measured against its task's reference
// demonstration (each task has one), those that do not raise the reference's log-prob of it are
// dropped, and the probe then reads only the kept ones, so their mean demonstration lift is above
// zero, where the same step without the gate has hints of both signs.
func TestHintGateLift(t *testing.T) {
	open, _ := judgedStep(t, map[string]string{"hinter.gate": "none"}, fitBuiltinPRM(t))
	gated, _ := judgedStep(t, map[string]string{"hinter.gate": "lift"}, fitBuiltinPRM(t))
	if _, ok := open["hints_gated"]; ok {
		t.Errorf("hinter.gate none reported hints_gated %v", open["hints_gated"])
	}
	measured, dropped := gated["hints_gate_measured"], gated["hints_gated"]
	t.Logf("ungated: hint_lift_demo %+.4f over %v; gated: %v of %v measured hints dropped, hint_lift_demo %+.4f over %v",
		open["hint_lift_demo"], open["hint_lift_demo_probed"], dropped, measured, gated["hint_lift_demo"], gated["hint_lift_demo_probed"])
	if measured < 1 || dropped < 1 || dropped >= measured {
		t.Fatalf("hints_gated %v of hints_gate_measured %v; want some of the model's hints kept and some dropped", dropped, measured)
	}
	if n := gated["hint_lift_demo_probed"]; !(n > 0 && gated["hint_lift_demo"] > 0) {
		t.Errorf("the kept hints' mean demonstration lift is %+.4f over %v; every kept hint was measured above zero", gated["hint_lift_demo"], n)
	}
}
