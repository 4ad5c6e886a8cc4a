// Package play is the rollout phase's players: a batch of trajectories through the generator,
// each played as a ReTool episode with its tools on the sandbox's pool or, with env.name
// external, by a run of the recipe's agent program against the generator's endpoint; with
// partial rollouts, trajectories that pause at a phase's end and resume in the next. The
// controller loop (package engine) decides what to play and trains on what comes back.
package play

import (
	"context"
	"strings"
	"sync"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
)

// Phase runs the generation phases (a step's rollout, an evaluation, its validation): a
// batch of trajectories through the generator, each with its own lockstep ticket, played as a
// ReTool episode with its tools on the sandbox's pool (or, with env.name external, by the
// recipe's agent program), and says how the phase used the generator's slots.
type Phase struct {
	Recipe    *recipes.Recipe
	Tokenizer *tokenizer.Tokenizer
	Gen       *rollout.Generator
	Exec      sandbox.Executor
	Pool      *sandbox.Pool
	Weights   retool.Weights
	Stops     []int32 // the ids that end a turn; Stops[0] is <|im_end|>
	// Partial is the state partial rollouts keep across steps (rollout.partial.enabled); nil when off.
	Partial *PartialState
	// Agent plays a trajectory with env.name external (AgentEnv.Play); nil: ReTool episodes.
	Agent func(ctx context.Context, t *batch.Trajectory, seed uint64, temperature float64) error
	// Engine, when set, is where the ReTool players generate instead of Gen: remote inference
	// servers (rollout.engines, engine/remote). Gen's tickets, meter and pauses are then unused.
	Engine Engine
	// remotePause is the current partial phase's pause on Engine (partial.go).
	remotePause *remotePause
}

// Engine is what a player generates through: one Session per trajectory, token ids in, token
// ids out with each sampled token's log-prob. The local generator's sessions are one
// (rollout.Session); remote servers' another (engine/remote).
type Engine interface {
	Open(ctx context.Context) (Session, error)
}

// Session is one trajectory's context on an Engine, across its turns.
type Session interface {
	Generate(ctx context.Context, req rollout.Request) (rollout.Result, error)
	Close()
}

// EngineFunc makes a function an Engine.
type EngineFunc func(ctx context.Context) (Session, error)

// Open calls f.
func (f EngineFunc) Open(ctx context.Context) (Session, error) { return f(ctx) }

var _ Session = (*rollout.Session)(nil)

// Generation is what a phase measured: the generator's slot use and the time its trajectories
// queued for a sandbox worker.
type Generation struct {
	Stats     rollout.PhaseStats
	ToolQueue time.Duration
}

// Prompt renders the opening messages with the generation prompt; a hint (bridge thought) is
// appended to the user's problem for the teacher.
func (p *Phase) Prompt(task envs.Task, hint string) ([]int32, error) {
	return PromptIDs(p.Tokenizer, p.Recipe, task.Prompt, hint)
}

// PromptIDs is a problem's opening as the rollout renders it in r's trajectory format
// (FormatOf): the system prompt with the tools, the problem (with hint before it, "" for none) as
// the user's turn, and the generation prompt. `generate --prompt` renders a question the same way.
func PromptIDs(tok *tokenizer.Tokenizer, r *recipes.Recipe, problem, hint string) ([]int32, error) {
	f := FormatOf(r)
	text, err := tokenizer.RenderChat(f.Opening(problem, hint), f.Tools, true)
	if err != nil {
		return nil, err
	}
	return tok.Encode(text), nil
}

// Run plays every trajectory of batch concurrently, trajectory i with sampling seed
// seed+i·7919, calling finished (from the trajectory's goroutine) as each one ends.
func (p *Phase) Run(ctx context.Context, trajs []*batch.Trajectory, seed uint64, temperature float64, finished func(*batch.Trajectory)) (Generation, error) {
	if p.Engine != nil {
		return p.runRemote(ctx, trajs, seed, temperature, finished)
	}
	meter := p.Gen.Measure()
	defer meter.Stop()
	queued := p.Pool.QueueWait()
	// Each trajectory opens its session with its own ticket, so a lockstep generator admits them
	// in batch order whatever the goroutines' timing; a trajectory that fails before it opens one
	// gives its ticket up.
	base := p.Gen.Reserve(len(trajs))
	play := p.PlayReTool
	if p.Agent != nil {
		play = p.Agent
	}
	err := playAll(trajs, func(i int, t *batch.Trajectory) error {
		defer p.Gen.Skip(base + int64(i))
		return play(rollout.WithTicket(ctx, base+int64(i)), t, seed+uint64(i)*7919, temperature)
	}, finished)
	if err != nil {
		return Generation{}, err
	}
	return Generation{Stats: meter.Stop(), ToolQueue: p.Pool.QueueWait() - queued}, nil
}

// playAll runs play on every trajectory in its own goroutine, calling finished (from that
// goroutine) as each one ends well, and returns one of the errors once all have returned.
func playAll(trajs []*batch.Trajectory, play func(i int, t *batch.Trajectory) error, finished func(*batch.Trajectory)) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(trajs))
	for i, t := range trajs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := play(i, t); err != nil {
				errs <- err
				return
			}
			finished(t)
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TeacherPrompt is the prompt the teacher and the hint probe read t's response after, with hint
// before the problem as retool.WithHint puts it ("" for none): ReTool's own prompt for a ReTool
// trajectory; for an agent's, its own first prompt with the problem text replaced by the hinted
// one (ok false when the prompt does not hold the problem's text, so no hint can be placed).
func (p *Phase) TeacherPrompt(t *batch.Trajectory, hint string) (ids []int32, ok bool, err error) {
	if t.Agent == nil {
		ids, err = p.Prompt(t.Task, hint)
		return ids, err == nil, err
	}
	prompt := t.Tokens[:t.PromptLen]
	if hint == "" {
		return append([]int32{}, prompt...), true, nil
	}
	text := p.Tokenizer.Decode(prompt, false)
	i := strings.LastIndex(text, t.Task.Prompt)
	if t.Task.Prompt == "" || i < 0 {
		return nil, false, nil
	}
	return p.Tokenizer.Encode(text[:i] + retool.WithHint(t.Task.Prompt, hint) + text[i+len(t.Task.Prompt):]), true, nil
}

// runRemote is Run on Engine: every trajectory at once, each with the same seed the local
// generator would give it; the servers batch them as they come.
func (p *Phase) runRemote(ctx context.Context, trajs []*batch.Trajectory, seed uint64, temperature float64, finished func(*batch.Trajectory)) (Generation, error) {
	queued := p.Pool.QueueWait()
	err := playAll(trajs, func(i int, t *batch.Trajectory) error {
		return p.PlayReTool(ctx, t, seed+uint64(i)*7919, temperature)
	}, finished)
	if err != nil {
		return Generation{}, err
	}
	return Generation{ToolQueue: p.Pool.QueueWait() - queued}, nil
}
