package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
)

// opdClip bounds each token's centred OPD advantage (see train.CenterClip): a teacher that is
// unsure of a digit must not outweigh the outcome, whose GRPO advantage is about ±1 to ±3.
const opdClip = 1.0

// rolloutPhase runs the generation phases (a step's rollout, an evaluation, its validation): a
// batch of trajectories through the generator, each with its own lockstep ticket, played as a
// ReTool episode with its tools on the sandbox's pool (or, with env.name external, by the
// recipe's agent program), and says how the phase used the generator's slots.
type rolloutPhase struct {
	r       *recipes.Recipe
	tok     *tokenizer.Tokenizer
	gen     *rollout.Generator
	exec    sandbox.Executor
	pool    *sandbox.Pool
	weights retool.Weights
	stops   []int32 // the ids that end a turn; stops[0] is <|im_end|>
	// partial is the state partial rollouts keep across steps (rollout.partial.enabled); nil when off.
	partial *partialState
	// agent plays a trajectory with env.name external (Controller.runAgent); nil: ReTool episodes.
	agent func(ctx context.Context, t *batch.Trajectory, seed uint64, temperature float64) error
}

// generation is what a phase measured: the generator's slot use and the time its trajectories
// queued for a sandbox worker.
type generation struct {
	stats     rollout.PhaseStats
	toolQueue time.Duration
}

// prompt renders the opening messages with the generation prompt; a hint (bridge thought) is
// appended to the user's problem for the teacher.
func (p *rolloutPhase) prompt(task envs.Task, hint string) ([]int32, error) {
	text, err := tokenizer.RenderChat([]envs.Message{{Role: "system", Content: retool.SystemFor(p.r.Env.Observation.Format)}, {Role: "user", Content: retool.WithHint(task.Prompt, hint)}}, nil, true)
	if err != nil {
		return nil, err
	}
	return p.tok.Encode(text), nil
}

// run plays every trajectory of batch concurrently, trajectory i with sampling seed
// seed+i·7919, calling finished (from the trajectory's goroutine) as each one ends.
func (p *rolloutPhase) run(ctx context.Context, trajs []*batch.Trajectory, seed uint64, temperature float64, finished func(*batch.Trajectory)) (generation, error) {
	meter := p.gen.Measure()
	defer meter.Stop()
	queued := p.pool.QueueWait()
	var wg sync.WaitGroup
	errs := make(chan error, len(trajs))
	// Each trajectory opens its session with its own ticket, so a lockstep generator admits them
	// in batch order whatever the goroutines' timing; a trajectory that fails before it opens one
	// gives its ticket up.
	base := p.gen.Reserve(len(trajs))
	play := p.playReTool
	if p.agent != nil {
		play = p.agent
	}
	for i, t := range trajs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.gen.Skip(base + int64(i))
			if err := play(rollout.WithTicket(ctx, base+int64(i)), t, seed+uint64(i)*7919, temperature); err != nil {
				errs <- err
				return
			}
			finished(t)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return generation{}, err
	}
	return generation{stats: meter.Stop(), toolQueue: p.pool.QueueWait() - queued}, nil
}

// prompt renders a task's opening messages (see rolloutPhase.prompt).
func (c *Controller) prompt(task envs.Task, hint string) ([]int32, error) {
	return c.ro.prompt(task, hint)
}

// rollout runs batch through the rollout phase, reporting progress as phase (rollout, or eval
// for the held-out tasks: then each trajectory is emitted as it finishes, and pass@k over the
// tasks complete so far), and at the end how the phase used the generator's slots
// (event.Generation, also returned).
func (c *Controller) rollout(ctx context.Context, step int, phase string, trajs []*batch.Trajectory, seed uint64, temperature float64) (event.Generation, error) {
	tk := c.newTracker(step, phase, trajs)
	g, err := c.ro.run(ctx, trajs, seed, temperature, tk.finished)
	if err != nil {
		return event.Generation{}, err
	}
	ev := generationEvent(step, phase, g.stats, g.toolQueue)
	c.emit(ev)
	return ev, nil
}

// playReTool plays one multi-turn episode. The trained tokens are exactly the sampled ones plus
// the tokenized template pieces and observations: decoded text is never re-tokenized.
func (p *rolloutPhase) playReTool(ctx context.Context, t *batch.Trajectory, seed uint64, temperature float64) error {
	r := p.r
	cfg := retool.Config{Executor: p.exec, Pool: p.pool, MaxTurns: r.Rollout.MaxTurns, Format: r.Env.Observation.Format, MaxObsChars: r.Env.Observation.MaxChars, Weights: p.weights}
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
	prompt, err := p.prompt(t.Task, "")
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
			res, err = sess.Generate(ctx, rollout.Request{Append: next, MaxNew: min(r.Rollout.MaxNewTokens-len(ids), room), StopIDs: p.stops, StopStrings: stops,
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
		text := strings.TrimSuffix(p.tok.Decode(res.IDs, false), "<|im_end|>")
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
		if len(res.IDs) == 0 || res.IDs[len(res.IDs)-1] != p.stops[0] {
			closing = []int32{p.stops[0]}
		}
		// The observation turn as the chat template renders it: a user turn, or for
		// tool_response a tool turn (a user turn wrapping the text in <tool_response>).
		obsMsg, body := envs.Message{Role: "user", Content: st.Observation}, st.Observation
		if r.Env.Observation.Format == retool.FormatToolResponse && len(st.ToolCalls) > 0 {
			obsMsg.Role, body = "tool", "<tool_response>\n"+st.Observation+"\n</tool_response>"
		}
		next = append(closing, p.tok.Encode("\n<|im_start|>user\n"+body+"<|im_end|>\n<|im_start|>assistant\n")...)
		if len(t.Tokens)+len(next)+8 >= model.Bucket(r.Rollout.MaxTotalTokens) || res.Stop == rollout.StopContext {
			t.Reward = p.weights.Compose(envs.Reward{FormatPenalty: 1}) // out of context: no answer
			break
		}
		add(next, false, nil)
		chat = append(chat, obsMsg)
		// Token-drift probe at the turn boundary: the context must read as the chat template renders it.
		want, err := tokenizer.RenderChat(chat, nil, true)
		if err == nil && p.tok.Decode(t.Tokens, false) != want && t.Drift == "" {
			t.Drift = fmt.Sprintf("turn %d of %s", turn, t.Task.ID)
		}
	}
	t.Summary = env.Summary()
	return nil
}
