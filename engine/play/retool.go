package play

import (
	"context"
	"fmt"
	"strings"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/mathverify"
	"agentrl/envs/retool"
)

// playReTool plays one multi-turn episode. The trained tokens are exactly the sampled ones plus
// the tokenized template pieces and observations: decoded text is never re-tokenized.
func (p *Phase) playReTool(ctx context.Context, t *batch.Trajectory, seed uint64, temperature float64) error {
	r := p.Recipe
	cfg := retool.Config{Executor: p.Exec, Pool: p.Pool, MaxTurns: r.Rollout.MaxTurns, Format: r.Env.Observation.Format, MaxObsChars: r.Env.Observation.MaxChars, Weights: p.Weights,
		Verify: mathverify.Options{LastNumberFallback: r.Reward.LastNumberFallback}}
	if retool.LongTrajectory(t.Task.ID, t.Sample, r.Env.LongTail.Share) {
		cfg.MinTurns = r.Env.LongTail.Turns
	}
	env, err := retool.New(cfg)
	if err != nil {
		return err
	}
	defer env.Close()
	msgs, err := env.Reset(ctx, t.Task)
	if err != nil {
		return err
	}
	chat := []envs.Message{{Role: msgs[0].Role, Content: msgs[0].Content}, {Role: msgs[1].Role, Content: msgs[1].Content}}
	prompt, err := p.Prompt(t.Task, "")
	if err != nil {
		return err
	}
	t.PromptLen = len(prompt)
	add := func(ids []int32, policy bool, lps []float32) {
		t.Tokens = append(t.Tokens, ids...)
		for i := range ids {
			t.Mask = append(t.Mask, policy)
			if lps != nil {
				t.LogProbs = append(t.LogProbs, lps[i])
			} else {
				t.LogProbs = append(t.LogProbs, 0)
			}
			if t.Partial != nil {
				t.Versions = append(t.Versions, int32(t.Partial.Version))
			}
		}
	}
	add(prompt, false, nil)
	sess, err := p.open(&ctx, t)
	if err != nil {
		return err
	}
	defer func() { // the session of the last phase it ran in
		if sess != nil {
			sess.Close()
		}
	}()
	next := prompt
	stops := append([]string{"</code>"}, r.Rollout.Stop...)
	for turn := 1; ; turn++ {
		var res rollout.Result
		var ids []int32 // the turn's tokens, over the phases it was paused across
		for {
			room := model.Bucket(r.Rollout.MaxTotalTokens) - len(t.Tokens) - 1
			res, err = sess.Generate(ctx, rollout.Request{Append: next, MaxNew: min(r.Rollout.MaxNewTokens-len(ids), room), StopIDs: p.Stops, StopStrings: stops,
				Sampling: rollout.Sampling{Temperature: float32(temperature), TopP: float32(r.Rollout.TopP), TopK: r.Rollout.TopK, Seed: seed + uint64(turn) + t.ResumeSalt()}})
			if err != nil {
				return err
			}
			add(res.IDs, true, res.LogProbs)
			ids = append(ids, res.IDs...)
			if res.Stop != rollout.StopPaused {
				break
			}
			// The phase ended: the KV slot goes, the tokens stay; the next phase prefills them
			// again under its weights and the turn goes on.
			sess.Close()
			if sess, err = p.pause(&ctx, t); err != nil {
				return err
			}
			next = t.Tokens
		}
		res.IDs = ids
		text := strings.TrimSuffix(p.Tokenizer.Decode(res.IDs, false), "<|im_end|>")
		st, err := env.Step(ctx, text)
		if err != nil {
			return err
		}
		et := event.Turn{Assistant: text}
		if len(st.ToolCalls) > 0 {
			et.Code, et.ToolStatus, et.ToolSeconds = st.ToolCalls[0].Code, st.ToolCalls[0].Status, st.ToolCalls[0].DurationSec
			et.Observation = st.Observation
		}
		t.Turns = append(t.Turns, et)
		chat = append(chat, envs.Message{Role: "assistant", Content: text})
		if st.Done {
			t.Reward = st.Reward
			break
		}
		// Close the assistant turn (unless it ended on <|im_end|>) and add the observation.
		var closing []int32
		if len(res.IDs) == 0 || res.IDs[len(res.IDs)-1] != p.Stops[0] {
			closing = []int32{p.Stops[0]}
		}
		// The observation turn as the chat template renders it: a user turn, or for
		// tool_response a tool turn (a user turn wrapping the text in <tool_response>).
		obsMsg := envs.Message{Role: "user", Content: st.Observation}
		if r.Env.Observation.Format == retool.FormatToolResponse && len(st.ToolCalls) > 0 {
			obsMsg.Role = "tool"
		}
		next = append(closing, p.Tokenizer.Encode(tokenizer.ObservationTurn(obsMsg))...)
		if len(t.Tokens)+len(next)+8 >= model.Bucket(r.Rollout.MaxTotalTokens) || res.Stop == rollout.StopContext {
			t.Reward = p.Weights.Compose(envs.Reward{FormatPenalty: 1}) // out of context: no answer
			break
		}
		add(next, false, nil)
		chat = append(chat, obsMsg)
		// Token-drift probe at the turn boundary: the context must read as the chat template renders it.
		want, err := tokenizer.RenderChat(chat, nil, true)
		if err == nil && p.Tokenizer.Decode(t.Tokens, false) != want && t.Drift == "" {
			t.Drift = fmt.Sprintf("turn %d of %s", turn, t.Task.ID)
		}
	}
	t.Summary = env.Summary()
	return nil
}
