package play

import (
	"context"
	"fmt"
	"os"
	"strings"

	"agentrl/engine/batch"
	"agentrl/engine/rollout"
	"agentrl/engine/serve"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/external"
	"agentrl/envs/mathverify"
	"agentrl/envs/retool"
	"agentrl/recipes"
)

// This file is env.name external: each trajectory is a run of the recipe's agent program, which
// calls the policy through an OpenAI-compatible endpoint (engine/serve) on the controller's own
// generator. Lifetimes:
//
//   - the server: started on loopback when the controller is built (NewAgentEnv), closed by its
//     Close (the controller's). It serves
//     only keys handed out for live trajectories, so between rollout phases it refuses every
//     request (401) and holds no KV slot.
//   - a key: one per trajectory, from Begin just before its agent starts to Finish just after the
//     agent was reaped (Finish cancels a request still in flight and frees the slot). Every
//     trajectory goroutine finishes its key before rollout returns, so no slot is held when the
//     step releases the KV cache for the reference forward and the update.
//   - an agent process: started by the runner once a worker is free (env.external.workers at
//     once), killed with its process group on the timeout or when a stop cancels the rollout;
//     Run returns only once it and its children are gone.
//
// What the controller trains on: each segment of the trajectory (serve.Segment: the rendered
// prompt, the sampled tokens with their log-probs and the agent's later messages tokenised as
// the chat template renders them) is one training sequence. The first segment lives in the
// trajectory's tokens, mask and log-probs, as a ReTool trajectory's; later ones (an agent that
// rewrote its history) become sequences of their own after scoring (batch.ExpandSegments) that
// share the trajectory's reward and sequence advantage and count once in its group's statistics.
//
// A dropped trajectory (the agent crashed, timed out, printed no or an unusable result, or made
// no request) is not trained on and is left out of its group's statistics: the group is
// normalised over the samples that remain (a group left with one sample, or with equal rewards,
// gives advantage 0), and its drops are counted in the step's metrics by reason (dropped,
// dropped_crashed, …). In an evaluation a dropped trajectory counts as a wrong sample of its
// task, so pass@k measures the agent as it runs. A step where every trajectory is dropped
// ends the run with the reasons: the agent does not work.

// agentModel is the model name the server answers to and the agent is told (AGENTRL_MODEL)
// unless env.external.env sets AGENTRL_MODEL itself.
const agentModel = "agentrl"

// agentPassReward is the smallest reward of an agent that scores itself ({"reward": r}) that
// counts as a solved task for accuracy and pass@k: full marks on the 0/1 and ±1 scales.
const agentPassReward = 1.0

// AgentEnv is the external environment of a run: the endpoint and the agent runner, and what
// filling a trajectory from an agent's run reads (the recipe, the tokenizer, the reward weights).
type AgentEnv struct {
	srv     *serve.Server
	base    string // the endpoint's base URL, http://127.0.0.1:PORT/v1
	runner  *external.Runner
	r       *recipes.Recipe
	tok     *tokenizer.Tokenizer
	weights retool.Weights
}

// NewAgentEnv starts the endpoint on gen (the controller's generator, its turns ended by stops)
// and prepares the runner for r's env.external. agentBin is the agentrl-tui executable the
// agent runs its tools with (AGENTRL_BIN, unless env.external.env sets it); "" is this
// process's own executable. weights compose a trajectory's reward.
func NewAgentEnv(r *recipes.Recipe, gen *rollout.Generator, tok *tokenizer.Tokenizer, stops []int32, agentBin string, weights retool.Weights) (*AgentEnv, error) {
	x := r.Env.External
	env := map[string]string{}
	for k, v := range x.Env {
		env[k] = v
	}
	name := env["AGENTRL_MODEL"]
	if name == "" {
		name = agentModel
		env["AGENTRL_MODEL"] = name
	}
	if env["AGENTRL_BIN"] == "" {
		bin := agentBin
		if bin == "" {
			var err error
			if bin, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("engine: env.external: finding this executable for the agent's AGENTRL_BIN: %w; set AGENTRL_BIN in env.external.env", err)
			}
		}
		env["AGENTRL_BIN"] = bin
	}
	workers := int(x.Workers)
	if workers <= 0 { // auto: one per KV slot; more would only wait for a slot
		workers = gen.Config().Slots
	}
	runner, err := external.NewRunner(external.Config{Command: x.Command, Dir: x.Dir, Env: env, Timeout: x.Timeout}, workers)
	if err != nil {
		return nil, fmt.Errorf("engine: env.external.command: %w", err)
	}
	codeTool := ""
	if r.Model.Path == "" {
		codeTool = "python" // the built-in model writes <code> blocks, never <tool_call> JSON
	}
	srv, err := serve.New(gen, tok, serve.Options{ModelName: name, MaxTotalTokens: r.Rollout.MaxTotalTokens, StopIDs: stops,
		Sampling: serve.Sampling{Temperature: float32(r.Rollout.Temperature), TopP: float32(r.Rollout.TopP), TopK: r.Rollout.TopK}, CodeTool: codeTool})
	if err != nil {
		return nil, fmt.Errorf("engine: env.name external: %w", err)
	}
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("engine: env.name external: %w", err)
	}
	return &AgentEnv{srv: srv, base: base, runner: runner, r: r, tok: tok, weights: weights}, nil
}

// Close stops the endpoint: requests in flight end, every key is refused. A nil AgentEnv (a
// ReTool run) has nothing to close.
func (a *AgentEnv) Close() {
	if a != nil {
		_ = a.srv.Close()
	}
}

// Play plays one trajectory through the agent: a key of its own on the endpoint, the agent
// run with it, the key finished, and the trajectory filled from the server's record and the
// agent's result. Only a stop (ctx ended) or a server fault is an error; whatever goes wrong
// with the agent drops the trajectory.
func (a *AgentEnv) Play(ctx context.Context, t *batch.Trajectory, seed uint64, temperature float64) error {
	r := a.r
	pol := serve.Sampling{Temperature: float32(temperature), TopP: float32(r.Rollout.TopP), TopK: r.Rollout.TopK}
	key := a.srv.Begin(fmt.Sprintf("%s#%d", t.Task.ID, t.Sample), serve.TrajectoryOptions{Seed: seed, Sampling: &pol, Override: true})
	res, runErr := a.runner.Run(ctx, t.Task, a.base, key)
	rec, err := a.srv.Finish(key) // after the agent is gone: its slot is free, its key refused
	if runErr != nil && ctx.Err() != nil {
		return runErr // a stop: the rollout is abandoned
	}
	if err != nil {
		return fmt.Errorf("engine: trajectory %s#%d: %w", t.Task.ID, t.Sample, err)
	}
	a.fillAgentTrajectory(t, res, rec)
	AgentRunOf(t).Key = key
	return nil
}

// AgentRun is what an external agent's run left with its trajectory (batch.Trajectory's Agent):
// the agent's result, the server's record of its requests, its key and why it is dropped.
type AgentRun struct {
	Result external.Result
	Record *serve.Trajectory
	Key    string        // the trajectory's API key, refused since its end
	Drop   external.Drop // why the trajectory is dropped, "" when usable
	Why    string        // the reason in a sentence
}

// AgentRunOf is t's agent run, nil for a ReTool trajectory and for a later segment.
func AgentRunOf(t *batch.Trajectory) *AgentRun {
	x, _ := t.Agent.(*AgentRun)
	return x
}

// fillAgentTrajectory sets t from the agent's result and the server's record: the first
// segment's tokens, the transcript as turns, the token-drift finding, the reward and the summary
// the hinter and the process scorer read.
func (a *AgentEnv) fillAgentTrajectory(t *batch.Trajectory, res external.Result, rec *serve.Trajectory) {
	x := &AgentRun{Result: res, Record: rec, Drop: res.Drop, Why: res.Dropped}
	t.Agent = x
	if x.Drop == external.DropNone && len(rec.Segments) == 0 {
		x.Drop, x.Why = dropNoRequests, "made no request to the model: there is nothing to train on"
	}
	if len(rec.Segments) > 0 {
		s := rec.Segments[0]
		t.Tokens, t.Mask, t.LogProbs, t.PromptLen = s.Tokens, s.Mask, s.LogProbs, s.PromptLen
		for _, s := range rec.Segments[1:] {
			t.LaterSegments = append(t.LaterSegments, &batch.Trajectory{Task: t.Task, Group: t.Group, Sample: t.Sample,
				Tokens: s.Tokens, Mask: s.Mask, LogProbs: s.LogProbs, PromptLen: s.PromptLen, SegmentOf: t})
		}
	}
	t.Turns = agentTurns(rec, a.tok)
	t.Drift = rec.Drift
	if x.Drop != external.DropNone {
		return
	}
	t.Summary = agentSummary(rec, t.Turns)
	switch {
	case res.Reward != nil:
		t.Reward = envs.Reward{Outcome: *res.Reward}
		t.Summary.Correct = *res.Reward >= agentPassReward
	case res.Answer != nil:
		// Scored as the ReTool loop scores its own: the verifier's outcome, the format penalty
		// for no answer or a malformed reply, the tool-use shaping term.
		t.Reward = retool.ScoreAnswer(*res.Answer, t.Task.Answer, mathverify.Options{LastNumberFallback: a.r.Reward.LastNumberFallback})
		t.Summary.Answered, t.Summary.Answer = strings.TrimSpace(*res.Answer) != "", *res.Answer
		if a := retool.Parse(*res.Answer); a.HasAnswer {
			t.Summary.Answer = a.Answer
		}
		t.Summary.Correct = t.Reward.Outcome == 1
		if t.Summary.FormatErrors > 0 {
			t.Reward.FormatPenalty = 1
		}
		t.Reward.Shaping = retool.ToolShaping(t.Summary)
	}
	t.Reward = ComposeReward(a.weights, t)
}

// ComposeReward is t's reward with its total: the recipe's weights w over its parts, or for an
// agent that scored itself, its reward as given plus the weighted process score.
func ComposeReward(w retool.Weights, t *batch.Trajectory) envs.Reward {
	if x := AgentRunOf(t); x != nil && x.Result.Reward != nil {
		r := t.Reward
		r.Total = *x.Result.Reward + w.Process*r.Process
		return r
	}
	return w.Compose(t.Reward)
}
