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
	"agentrl/envs/grade"
	"agentrl/envs/mathverify"
	"agentrl/envs/retool"
	"agentrl/recipes"
)

// Format is what a recipe's env.format, env.system_prompt and env.tools resolve to: the layout
// of a trajectory, its system prompt and the tools the chat template lists.
type Format struct {
	Layout retool.Layout
	System string
	Tools  []tokenizer.Tool
	Names  []string // the names a tool call may give (nil: python and code_interpreter)
}

// FormatOf resolves r's trajectory format: the layout of env.format, env.system_prompt or the
// layout's own prompt, and env.tools (the python tool by default in the tool_call layout).
func FormatOf(r *recipes.Recipe) Format {
	f := Format{Layout: retool.Layout(r.Env.Format), System: r.Env.SystemText(), Names: r.Env.ToolNames()}
	if f.Layout == "" {
		f.Layout = retool.LayoutChat
	}
	if f.System == "" {
		f.System = retool.SystemForLayout(f.Layout, r.Env.Observation.Format)
	}
	schemas, python, _ := r.Env.ToolSchemas() // validated with the recipe
	for _, s := range schemas {
		f.Tools = append(f.Tools, tokenizer.Tool(s))
	}
	if python || (r.Env.Tools == "" && f.Layout == retool.LayoutToolCall) {
		f.Tools = []tokenizer.Tool{tokenizer.Tool(retool.PythonTool)}
	}
	return f
}

// Opening is a problem's opening messages: the system prompt and the problem (with hint before
// it, "" for none) as the user's turn.
func (f Format) Opening(problem, hint string) []envs.Message {
	return []envs.Message{{Role: "system", Content: f.System}, {Role: "user", Content: retool.WithHint(problem, hint)}}
}

// PlayReTool plays one episode in the recipe's format. The trained tokens are exactly the sampled
// ones; the tokenized template pieces and observations are kept in the context, masked: decoded
// text is never re-tokenized.
func (p *Phase) PlayReTool(ctx context.Context, t *batch.Trajectory, seed uint64, temperature float64) error {
	r := p.Recipe
	ep, err := p.newEpisode(ctx, t)
	if err != nil {
		return err
	}
	defer ep.env.Close()
	prompt := t.Tokens
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
	stops := append([]string{ep.f.Layout.Stop()}, r.Rollout.Stop...)
	for turn := 1; ; turn++ {
		var res rollout.Result
		var ids []int32 // the turn's tokens, over the phases it was paused across
		var lps []float32
		for {
			room := min(model.Bucket(r.Rollout.MaxTotalTokens)-len(t.Tokens)-1, ep.budgetLeft())
			res, err = sess.Generate(ctx, rollout.Request{Append: next, MaxNew: min(r.Rollout.MaxNewTokens-len(ids), room), StopIDs: p.Stops, StopStrings: stops,
				Sampling: rollout.Sampling{Temperature: float32(temperature), TopP: float32(r.Rollout.TopP), TopK: r.Rollout.TopK, Seed: seed + uint64(turn) + t.ResumeSalt()}})
			if err != nil {
				return err
			}
			ep.add(res.IDs, true, res.LogProbs)
			ids = append(ids, res.IDs...)
			lps = append(lps, res.LogProbs...)
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
		res.IDs, res.LogProbs = ids, lps
		var done bool
		if next, done, err = ep.turn(ctx, turn, res); err != nil || done {
			return err
		}
	}
}

// episode is one ReTool episode's state between the generator's turns: the environment, the
// message list its format renders, and the trajectory it fills.
type episode struct {
	p   *Phase
	t   *batch.Trajectory
	f   Format
	env *retool.Env
	// chat is the conversation so far: the opening, then per layout the assistant messages and
	// observations (chat, tool_call) or the one assistant turn (retool, its content in content).
	chat    []envs.Message
	content strings.Builder
}

// newEpisode starts t's environment and fills t with its prompt.
func (p *Phase) newEpisode(ctx context.Context, t *batch.Trajectory) (*episode, error) {
	r := p.Recipe
	f := FormatOf(r)
	cfg := retool.Config{Executor: p.Exec, Pool: p.Pool, MaxTurns: r.Rollout.MaxTurns, Format: r.Env.Observation.Format, MaxObsChars: r.Env.Observation.MaxChars, Weights: p.Weights,
		Layout: f.Layout, System: f.System, MaxToolCalls: r.Env.MaxToolCalls, ToolNames: f.Names,
		Verify: mathverify.Options{LastNumberFallback: r.Reward.LastNumberFallback}}
	if r.Reward.Grader != "" && r.Reward.Grader != grade.Default { // the verifier judges the parsed answer, as always
		g, err := grade.New(r.Reward.Grader, cfg.Verify)
		if err != nil {
			return nil, fmt.Errorf("reward.grader: %w", err)
		}
		cfg.Grader = g
	}
	if retool.LongTrajectory(t.Task.ID, t.Sample, r.Env.LongTail.Share) {
		cfg.MinTurns = r.Env.LongTail.Turns
	}
	env, err := retool.New(cfg)
	if err != nil {
		return nil, err
	}
	msgs, err := env.Reset(ctx, t.Task)
	if err != nil {
		env.Close()
		return nil, err
	}
	prompt, err := p.Prompt(t.Task, "")
	if err != nil {
		env.Close()
		return nil, err
	}
	if slot := model.Bucket(r.Rollout.MaxTotalTokens); len(prompt)+1 >= slot {
		env.Close()
		return nil, fmt.Errorf("task %s: its opening (system prompt, tools and problem) is %d tokens, which leaves no room to answer in a %d-token KV slot; raise rollout.max_total_tokens, or shorten env.system_prompt, env.tools or data.prompt_template", t.Task.ID, len(prompt), slot)
	}
	ep := &episode{p: p, t: t, f: f, env: env, chat: msgs}
	t.PromptLen = len(prompt)
	ep.add(prompt, false, nil)
	return ep, nil
}

// add appends ids to the trajectory: policy ones with their log-probs, others masked.
func (e *episode) add(ids []int32, policy bool, lps []float32) {
	t := e.t
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

// budgetLeft is how many more response tokens rollout.max_response_tokens allows (a large
// number without a bound).
func (e *episode) budgetLeft() int {
	b := e.p.Recipe.Rollout.MaxResponseTokens
	if b <= 0 {
		return 1 << 30
	}
	return b - (len(e.t.Tokens) - e.t.PromptLen)
}

// turn takes the generator's turn res (in the retool layout, a stretch of the response) to the
// environment and returns what the context takes next (the observation, masked, already added
// to the trajectory), or done when the trajectory ended.
func (e *episode) turn(ctx context.Context, turn int, res rollout.Result) (next []int32, done bool, err error) {
	p, t, r := e.p, e.t, e.p.Recipe
	text := strings.TrimSuffix(p.Tokenizer.Decode(res.IDs, false), "<|im_end|>")
	st, err := e.env.Step(ctx, text)
	if err != nil {
		return nil, false, err
	}
	et := event.Turn{Assistant: text}
	if len(st.ToolCalls) > 0 {
		et.Code, et.ToolStatus, et.ToolSeconds = st.ToolCalls[0].Code, st.ToolCalls[0].Status, st.ToolCalls[0].DurationSec
		et.Observation = st.Observation
	}
	t.Turns = append(t.Turns, et)
	retoolLayout := e.f.Layout == retool.LayoutReTool
	var obsMsg envs.Message
	if retoolLayout {
		// The response goes on in the same turn: the observation follows the </code> as it is.
		e.content.WriteString(text)
		if !st.Done {
			next = p.Tokenizer.Encode(st.Observation)
		}
	} else {
		msg := envs.Message{Role: "assistant", Content: text}
		if e.f.Layout == retool.LayoutToolCall {
			if a := retool.ParseAs(retool.LayoutToolCall, text, e.f.Names); len(a.Calls) > 0 {
				msg.Content, msg.ToolCalls = a.Content, a.Calls
			}
		}
		e.chat = append(e.chat, msg)
		if !st.Done {
			// Close the assistant turn (unless it ended on <|im_end|>) and add the observation
			// turn as the chat template renders it: a user turn, or after a tool call (the
			// tool_call layout, or chat's tool_response observations) a tool turn.
			var closing []int32
			if len(res.IDs) == 0 || res.IDs[len(res.IDs)-1] != p.Stops[0] {
				closing = []int32{p.Stops[0]}
			}
			obsMsg = envs.Message{Role: "user", Content: st.Observation}
			if (e.f.Layout == retool.LayoutToolCall || r.Env.Observation.Format == retool.FormatToolResponse) && len(st.ToolCalls) > 0 {
				obsMsg.Role = "tool"
			}
			next = append(closing, p.Tokenizer.Encode(tokenizer.ObservationTurn(obsMsg))...)
		}
	}
	if st.Done {
		t.Reward = st.Reward
		e.finish()
		return nil, true, nil
	}
	if len(t.Tokens)+len(next)+8 >= model.Bucket(r.Rollout.MaxTotalTokens) || res.Stop == rollout.StopContext || len(next) >= e.budgetLeft() {
		t.Reward = p.Weights.Compose(envs.Reward{FormatPenalty: 1}) // out of context or of budget: no answer
		e.finish()
		return nil, true, nil
	}
	e.add(next, false, nil)
	var want string
	if retoolLayout {
		e.content.WriteString(st.Observation)
		want, err = tokenizer.RenderChat(e.chat[:2], e.f.Tools, true)
		want += e.content.String()
	} else {
		e.chat = append(e.chat, obsMsg)
		want, err = tokenizer.RenderChat(e.chat, e.f.Tools, true)
	}
	// Token-drift probe at the turn boundary: the context must read as the chat template renders it.
	if err == nil && p.Tokenizer.Decode(t.Tokens, false) != want && t.Drift == "" {
		t.Drift = fmt.Sprintf("turn %d of %s", turn, t.Task.ID)
	}
	return next, false, nil
}

// finish keeps the episode's summary and conversation with the trajectory.
func (e *episode) finish() {
	if e.f.Layout == retool.LayoutReTool {
		e.chat = append(e.chat, envs.Message{Role: "assistant", Content: e.content.String()})
	}
	e.t.Summary = e.env.Summary()
	e.t.Chat = e.chat
}
