package play

import (
	"context"
	"strings"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/rollout"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
)

// TestEpisodeFormats plays scripted turns through an episode of each format, as the generator
// would return them (the sampled ids of the text, with <|im_end|> where the turn closed itself),
// and checks the trajectory token for token (CheckEpisode): the trained tokens are the sampled
// ones, the masked ones the observations as the format appends them, the context reads as the
// chat template renders the conversation (no drift), and the conversation left is the format's.
func TestEpisodeFormats(t *testing.T) {
	tok := testTokenizer(t)
	imEnd, _ := tok.TokenID("<|im_end|>")
	call := "Let me compute.\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(6 * 7)\"}}\n</tool_call>"
	for _, tc := range []struct {
		format, obsFormat string
		turns             []string // "…<|im_end|>" closes the turn itself
		stops             []rollout.StopReason
		roles             []string // of t.Chat after the opening
		reward            float64
	}{
		{"chat", "interpreter", []string{"Let me compute.\n<code>\nprint(6 * 7)\n</code>", "It is \\boxed{42}.<|im_end|>"},
			[]rollout.StopReason{rollout.StopString, rollout.StopToken}, []string{"assistant", "user", "assistant"}, 1},
		{"chat", "tool_response", []string{"hmm<|im_end|>", "<code>print(6 * 7)</code>", "\\boxed{42}<|im_end|>"},
			[]rollout.StopReason{rollout.StopToken, rollout.StopString, rollout.StopToken}, []string{"assistant", "user", "assistant", "tool", "assistant"}, 0.9},
		{"retool", "interpreter", []string{"Let me compute.\n<code>\n```python\nx = 6 * 7\nprint(x)\n```\n</code>", "\nCheck.\n<code>\nprint(x == 42)\n</code>", "\nSo Answer: \\boxed{42}<|im_end|>"},
			[]rollout.StopReason{rollout.StopString, rollout.StopString, rollout.StopToken}, []string{"assistant"}, 1},
		{"tool_call", "interpreter", []string{call, "The answer is \\boxed{42}.<|im_end|>"},
			[]rollout.StopReason{rollout.StopString, rollout.StopToken}, []string{"assistant", "tool", "assistant"}, 1},
	} {
		t.Run(tc.format+"/"+tc.obsFormat, func(t *testing.T) {
			r := recipes.Default()
			r.Env.Format, r.Env.Observation.Format, r.Env.Session = tc.format, tc.obsFormat, "persistent"
			r.Rollout.MaxTotalTokens = 2048 // the tools block is long in the built-in tokenizer's 392 tokens
			p := &Phase{Recipe: r, Tokenizer: tok, Exec: &sandbox.Starlark{}, Weights: retool.Weights{Outcome: 1, FormatPenalty: 0.1}, Stops: []int32{imEnd}}
			tr := &batch.Trajectory{Task: envs.Task{ID: "t", Prompt: "What is 6 * 7?", Answer: "42"}}
			ctx := context.Background()
			ep, err := p.newEpisode(ctx, tr)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.env.Close()
			for i, text := range tc.turns {
				body, closed := strings.CutSuffix(text, "<|im_end|>")
				ids := tok.Encode(body)
				if closed {
					ids = append(ids, imEnd)
				}
				ep.add(ids, true, make([]float32, len(ids)))
				_, done, err := ep.turn(ctx, i+1, rollout.Result{IDs: ids, Stop: tc.stops[i]})
				if err != nil {
					t.Fatal(err)
				}
				if done != (i == len(tc.turns)-1) {
					t.Fatalf("turn %d: done %v", i+1, done)
				}
			}
			if err := CheckEpisode(tok, r, imEnd, tr); err != nil {
				t.Error(err)
			}
			if tr.Drift != "" || tr.Reward.Total != tc.reward {
				t.Errorf("drift %q, reward %+v; want none and %v", tr.Drift, tr.Reward, tc.reward)
			}
			var roles []string
			for _, m := range tr.Chat[2:] {
				roles = append(roles, m.Role)
			}
			if strings.Join(roles, " ") != strings.Join(tc.roles, " ") {
				t.Errorf("conversation roles %v; want %v", roles, tc.roles)
			}
			switch tc.format {
			case "retool":
				if got := tr.Chat[2].Content; strings.Count(got, "\n<interpreter>\n") != 2 || !strings.Contains(got, "</code>\n<interpreter>\n42\n</interpreter>\n\nCheck.") {
					t.Errorf("the response %q does not hold its observations in the turn", got)
				}
			case "tool_call":
				if m := tr.Chat[2]; m.Content != "Let me compute." || len(m.ToolCalls) != 1 || tr.Chat[3].Content != "42" {
					t.Errorf("tool call message %+v, tool message %+v", m, tr.Chat[3])
				}
				if !strings.Contains(tok.Decode(tr.Tokens[:tr.PromptLen], false), "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"python\"") {
					t.Errorf("the prompt has no tools block: %q", tok.Decode(tr.Tokens[:tr.PromptLen], false))
				}
			}
		})
	}
}

// A response budget (rollout.max_response_tokens) that an observation would pass ends the
// trajectory unanswered, as a full context does; max_tool_calls ends one that asks for more.
func TestEpisodeBudgets(t *testing.T) {
	tok := testTokenizer(t)
	imEnd, _ := tok.TokenID("<|im_end|>")
	for _, tc := range []struct {
		name   string
		set    func(r *recipes.Recipe)
		turns  []string
		endsAt int
	}{
		{"response tokens", func(r *recipes.Recipe) { r.Rollout.MaxResponseTokens = 20 }, []string{"<code>\nprint(6 * 7)\n</code>", "more"}, 1},
		{"tool calls", func(r *recipes.Recipe) { r.Env.MaxToolCalls = 1 }, []string{"<code>print(1)</code>", "<code>print(2)</code>", "x"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recipes.Default()
			r.Env.Format = "retool"
			tc.set(r)
			p := &Phase{Recipe: r, Tokenizer: tok, Exec: &sandbox.Starlark{}, Weights: retool.Weights{Outcome: 1, FormatPenalty: 0.1}, Stops: []int32{imEnd}}
			tr := &batch.Trajectory{Task: envs.Task{ID: "t", Prompt: "What is 6 * 7?", Answer: "42"}}
			ep, err := p.newEpisode(context.Background(), tr)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.env.Close()
			for i, text := range tc.turns {
				ids := tok.Encode(text)
				ep.add(ids, true, make([]float32, len(ids)))
				_, done, err := ep.turn(context.Background(), i+1, rollout.Result{IDs: ids, Stop: rollout.StopString})
				if err != nil {
					t.Fatal(err)
				}
				if done {
					if i+1 != tc.endsAt || tr.Reward.FormatPenalty != 1 || tr.Reward.Outcome != 0 {
						t.Errorf("ended at turn %d with %+v; want turn %d, unanswered", i+1, tr.Reward, tc.endsAt)
					}
					return
				}
			}
			t.Errorf("the trajectory did not end")
		})
	}
}

// An opening that leaves no room to answer in the KV slot is an error naming the task, its length
// and what to change, rather than a trajectory of no tokens scored as unanswered.
func TestOpeningTooLong(t *testing.T) {
	tok := testTokenizer(t)
	imEnd, _ := tok.TokenID("<|im_end|>")
	r := recipes.Default()
	r.Env.Format, r.Rollout.MaxTotalTokens = "tool_call", 256 // the python tool's block alone is longer
	p := &Phase{Recipe: r, Tokenizer: tok, Exec: &sandbox.Starlark{}, Weights: retool.Weights{Outcome: 1}, Stops: []int32{imEnd}}
	_, err := p.newEpisode(context.Background(), &batch.Trajectory{Task: envs.Task{ID: "long-1", Prompt: "What is 6 * 7?", Answer: "42"}})
	if err == nil || !strings.Contains(err.Error(), "task long-1: its opening") || !strings.Contains(err.Error(), "256-token KV slot; raise rollout.max_total_tokens") {
		t.Errorf("error %v; want the task, its opening's length, the slot and the fix", err)
	}
	r.Rollout.MaxTotalTokens = 2048
	ep, err := p.newEpisode(context.Background(), &batch.Trajectory{Task: envs.Task{ID: "fits", Prompt: "What is 6 * 7?", Answer: "42"}})
	if err != nil {
		t.Fatal(err)
	}
	ep.env.Close()
}
