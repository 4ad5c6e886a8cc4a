package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/serve"
	"agentrl/envs"
	"agentrl/envs/external"
	"agentrl/envs/retool"
)

// This file is env.name external: each trajectory is a run of the recipe's agent program, which
// calls the policy through an OpenAI-compatible endpoint (engine/serve) on the controller's own
// generator. Lifetimes:
//
//   - the server: started on loopback when the controller is built, closed by Close. It serves
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

// agentEnv is the external environment of a run: the endpoint and the agent runner.
type agentEnv struct {
	srv    *serve.Server
	base   string // the endpoint's base URL, http://127.0.0.1:PORT/v1
	runner *external.Runner
}

// newAgentEnv starts the endpoint on the controller's generator and prepares the runner.
func (c *Controller) newAgentEnv() (*agentEnv, error) {
	r := c.r
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
		bin := c.o.AgentBin
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
		workers = c.gen.Config().Slots
	}
	runner, err := external.NewRunner(external.Config{Command: x.Command, Dir: x.Dir, Env: env, Timeout: x.Timeout}, workers)
	if err != nil {
		return nil, fmt.Errorf("engine: env.external.command: %w", err)
	}
	codeTool := ""
	if r.Model.Path == "" {
		codeTool = "python" // the built-in model writes <code> blocks, never <tool_call> JSON
	}
	srv, err := serve.New(c.gen, c.o.Tokenizer, serve.Options{ModelName: name, MaxTotalTokens: r.Rollout.MaxTotalTokens, StopIDs: c.stops,
		Sampling: serve.Sampling{Temperature: float32(r.Rollout.Temperature), TopP: float32(r.Rollout.TopP), TopK: r.Rollout.TopK}, CodeTool: codeTool})
	if err != nil {
		return nil, fmt.Errorf("engine: env.name external: %w", err)
	}
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("engine: env.name external: %w", err)
	}
	return &agentEnv{srv: srv, base: base, runner: runner}, nil
}

// close stops the endpoint: requests in flight end, every key is refused.
func (a *agentEnv) close() {
	if a != nil {
		_ = a.srv.Close()
	}
}

// dropNoRequests is the drop of an agent that gave a result without calling the model: there is
// nothing to train on.
const dropNoRequests external.Drop = "no_requests"

// runAgent plays one trajectory through the agent: a key of its own on the endpoint, the agent
// run with it, the key finished, and the trajectory filled from the server's record and the
// agent's result. Only a stop (ctx ended) or a server fault is an error; whatever goes wrong
// with the agent drops the trajectory.
func (c *Controller) runAgent(ctx context.Context, t *batch.Trajectory, seed uint64, temperature float64) error {
	a, r := c.ext, c.r
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
	c.fillAgentTrajectory(t, res, rec)
	t.Agent.Key = key
	return nil
}

// fillAgentTrajectory sets t from the agent's result and the server's record: the first
// segment's tokens, the transcript as turns, the token-drift finding, the reward and the summary
// the hinter and the process scorer read.
func (c *Controller) fillAgentTrajectory(t *batch.Trajectory, res external.Result, rec *serve.Trajectory) {
	x := &batch.AgentRun{Result: res, Record: rec, Drop: res.Drop, Why: res.Dropped}
	t.Agent = x
	if x.Drop == external.DropNone && len(rec.Segments) == 0 {
		x.Drop, x.Why = dropNoRequests, "made no request to the model: there is nothing to train on"
	}
	if len(rec.Segments) > 0 {
		s := rec.Segments[0]
		t.Tokens, t.Mask, t.LogProbs, t.PromptLen = s.Tokens, s.Mask, s.LogProbs, s.PromptLen
		for _, s := range rec.Segments[1:] {
			x.Segments = append(x.Segments, &batch.Trajectory{Task: t.Task, Group: t.Group, Sample: t.Sample,
				Tokens: s.Tokens, Mask: s.Mask, LogProbs: s.LogProbs, PromptLen: s.PromptLen, Agent: &batch.AgentRun{Of: t}})
		}
	}
	t.Turns = c.agentTurns(rec)
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
		t.Reward = retool.ScoreAnswer(*res.Answer, t.Task.Answer)
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
	t.Reward = c.composeReward(t)
}

// composeReward is t's reward with its total: the recipe's weights over its parts, or for an
// agent that scored itself, its reward as given plus the weighted process score.
func (c *Controller) composeReward(t *batch.Trajectory) envs.Reward {
	if t.Agent != nil && t.Agent.Result.Reward != nil {
		r := t.Reward
		r.Total = *t.Agent.Result.Reward + c.weights.Process*r.Process
		return r
	}
	return c.weights.Compose(t.Reward)
}

// agentTurns is the transcript as turns: one per answered request, with the reply as the model
// wrote it (the sampled tokens decoded), its tool calls, and the messages the agent sent after
// it (the next request's new messages, when that request extended the conversation).
func (c *Controller) agentTurns(rec *serve.Trajectory) []event.Turn {
	turns := make([]event.Turn, len(rec.Turns))
	for i, rt := range rec.Turns {
		e := event.Turn{Assistant: rt.Content, Finish: rt.Finish, NewSegment: i > 0 && rt.Segment != rec.Turns[i-1].Segment}
		if rt.Segment < len(rec.Segments) {
			toks := rec.Segments[rt.Segment].Tokens
			if end := rt.PromptTokens + rt.CompletionTokens; end <= len(toks) {
				e.Assistant = strings.TrimSuffix(c.o.Tokenizer.Decode(toks[rt.PromptTokens:end], false), "<|im_end|>")
			}
		}
		var code []string
		for _, call := range rt.ToolCalls {
			e.ToolCalls = append(e.ToolCalls, event.ToolCall{Name: call.Name, Arguments: call.Arguments})
			var args struct {
				Code string `json:"code"`
			}
			if json.Unmarshal([]byte(call.Arguments), &args) == nil && args.Code != "" {
				code = append(code, args.Code)
			}
		}
		if len(rt.ToolCalls) == 0 {
			code = retool.Parse(e.Assistant).Code // the ReTool text protocol: <code> blocks
		}
		e.Code = strings.Join(code, "\n\n")
		if i+1 < len(rec.Turns) && rec.Turns[i+1].Segment == rt.Segment {
			var obs []string
			for _, m := range rec.Turns[i+1].Messages {
				e.Sent = append(e.Sent, event.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID})
				obs = append(obs, m.Content)
			}
			e.Observation = strings.Join(obs, "\n")
			e.ToolStatus = readObservation(e.Observation).status
		}
		turns[i] = e
	}
	return turns
}

// agentSummary reads what the hinter, the process scorer and the reward need from the
// transcript (rec and its turns): turns; format errors, as the ReTool environment counts them
// (a reply that does not parse, or one with no code, no tool call and no \boxed answer); and the
// tool results the agent sent back when they are in the ReTool format (an <interpreter> block
// in a user message, or a tool message): calls, errors, timeouts, the last output. An agent that
// shows tool output another way reads as one that called no tool.
func agentSummary(rec *serve.Trajectory, turns []event.Turn) retool.Summary {
	var s retool.Summary
	s.Turns = len(rec.Turns)
	for _, turn := range turns {
		if a := retool.Parse(turn.Assistant); a.FormatError != "" || !a.HasAnswer && len(a.Code) == 0 && len(turn.ToolCalls) == 0 {
			s.FormatErrors++
		}
	}
	record := func(o observed) {
		s.ToolCalls++
		switch o.status {
		case "ok":
			if s.ToolErrors+s.Timeouts+s.Killed > 0 {
				s.Recovered = true
			}
			s.LastOutput = strings.TrimSpace(o.body)
		case "error":
			s.ToolErrors++
			s.LastError, s.Recovered = lastLines(o.body, 2), false
		case "timeout":
			s.Timeouts++
			s.LastError, s.Recovered = o.detail, false
		case "killed":
			s.Killed++
			s.LastError, s.Recovered = o.detail, false
		}
	}
	for i, rt := range rec.Turns {
		if i == 0 || rt.Segment != rec.Turns[i-1].Segment {
			continue // a new segment re-sends the conversation: its messages are not new
		}
		for _, m := range rt.Messages {
			switch m.Role {
			case "tool":
				record(readObservation(m.Content))
			case "user":
				for _, body := range interpreterRE.FindAllStringSubmatch(m.Content, -1) {
					record(readObservation(body[1]))
				}
			}
		}
	}
	return s
}

// interpreterRE finds the ReTool observations in a message.
var interpreterRE = regexp.MustCompile(`(?s)<interpreter>\n?(.*?)\n?</interpreter>`)

// errorRE finds an interpreter's error: a traceback, a Starlark "code.py:L:C: " message, or a
// last line naming an error.
var errorRE = regexp.MustCompile(`(?m)Traceback \(most recent call last\)|^code\.py:\d+:\d+: |^[A-Za-z_.]*(Error|Exception)\b`)

// observed is one tool result read from its text: status ok, error, timeout or killed.
type observed struct {
	status, body, detail string
}

// readObservation reads a tool result as the ReTool environment writes it (Observe): a notice
// "[timeout: …]" or "[stopped: …]" at its end, an error's traceback, or plain output. Text in
// <interpreter> tags is read inside them.
func readObservation(text string) observed {
	if m := interpreterRE.FindStringSubmatch(text); m != nil {
		text = m[1]
	}
	body := strings.TrimSpace(text)
	last := body
	if i := strings.LastIndexByte(body, '\n'); i >= 0 {
		last = body[i+1:]
	}
	switch {
	case body == "":
		return observed{}
	case strings.HasPrefix(last, "[timeout: "):
		return observed{status: "timeout", body: body, detail: "timeout: " + strings.TrimSuffix(strings.TrimPrefix(last, "[timeout: "), "]")}
	case strings.HasPrefix(last, "[stopped: "):
		return observed{status: "killed", body: body, detail: strings.TrimSuffix(strings.TrimPrefix(last, "[stopped: "), "]")}
	case errorRE.MatchString(body):
		return observed{status: "error", body: body}
	}
	return observed{status: "ok", body: body}
}

// lastLines is the last n lines of s, trimmed.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// splitDropped separates the trajectories whose agent gave nothing usable from the rest: the
// step trains on the usable ones and shows and stores both. A step with nothing usable is an
// error that says why (the agent does not work; fixing it and resuming goes on).
func splitDropped(step int, trajs []*batch.Trajectory) (usable, dropped []*batch.Trajectory, err error) {
	for _, t := range trajs {
		if t.Agent != nil && t.Agent.Drop != external.DropNone {
			dropped = append(dropped, t)
		} else {
			usable = append(usable, t)
		}
	}
	if len(usable) == 0 && len(dropped) > 0 {
		x := dropped[0].Agent
		msg := fmt.Sprintf("engine: step %d: every one of its %d trajectories was dropped (%s); the first: %s", step, len(dropped), dropCounts(dropped), x.Why)
		if tail := strings.TrimSpace(x.Result.StderrTail); tail != "" {
			msg += "; its stderr ends:\n" + lastLines(tail, 8)
		}
		return nil, dropped, errors.New(msg + "\nrun the agent by hand against `agentrl-tui serve` to see what it does, fix it, and resume the run")
	}
	return usable, dropped, nil
}

// dropCounts says how many trajectories were dropped for each reason: "3 crashed, 1 timeout".
func dropCounts(dropped []*batch.Trajectory) string {
	n := map[external.Drop]int{}
	for _, t := range dropped {
		n[t.Agent.Drop]++
	}
	kinds := make([]string, 0, len(n))
	for k := range n {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", n[external.Drop(k)], k)
	}
	return strings.Join(parts, ", ")
}

// dropReasons are the drop kinds a step's metrics always count, so that their curves have a
// point at every step; the others (cancelled, not_started) appear when they happen.
var dropReasons = []external.Drop{external.DropCrashed, external.DropTimeout, external.DropNoResult, external.DropBadResult, dropNoRequests}

// dropMetrics counts an external run's dropped trajectories in the step's metrics: dropped, and
// dropped_REASON for each reason. A ReTool run drops nothing and gets none of these.
func (c *Controller) dropMetrics(metrics map[string]float64, dropped []*batch.Trajectory) {
	if c.ext == nil {
		return
	}
	metrics["dropped"] = float64(len(dropped))
	for _, k := range dropReasons {
		metrics["dropped_"+string(k)] = 0
	}
	for _, t := range dropped {
		metrics["dropped_"+string(t.Agent.Drop)]++
	}
}

// teacherPrompt is the prompt the teacher and the hint probe read t's response after, with hint
// before the problem as retool.WithHint puts it ("" for none): ReTool's own prompt for a ReTool
// trajectory; for an agent's, its own first prompt with the problem text replaced by the hinted
// one (ok false when the prompt does not hold the problem's text, so no hint can be placed).
func (c *Controller) teacherPrompt(t *batch.Trajectory, hint string) (ids []int32, ok bool, err error) {
	if t.Agent == nil {
		ids, err = c.prompt(t.Task, hint)
		return ids, err == nil, err
	}
	prompt := t.Tokens[:t.PromptLen]
	if hint == "" {
		return append([]int32{}, prompt...), true, nil
	}
	text := c.o.Tokenizer.Decode(prompt, false)
	i := strings.LastIndex(text, t.Task.Prompt)
	if t.Task.Prompt == "" || i < 0 {
		return nil, false, nil
	}
	return c.o.Tokenizer.Encode(text[:i] + retool.WithHint(t.Task.Prompt, hint) + text[i+len(t.Task.Prompt):]), true, nil
}

// agentEvent adds an external trajectory's agent run to its event: the drop, the result, the
// stderr tail, and its later segments' tokens (with their advantages) in the token view.
func (c *Controller) agentEvent(e *event.Trajectory, t *batch.Trajectory) {
	x := t.Agent
	if x == nil || x.Of != nil {
		return
	}
	res := x.Result
	a := &event.Agent{Drop: string(x.Drop), Dropped: x.Why, Answer: res.Answer, Reward: res.Reward, Info: res.Info,
		StderrTail: res.StderrTail, ExitCode: res.ExitCode, Signal: res.Signal, Seconds: res.Duration.Seconds(), Queued: res.Queued.Seconds()}
	if rec := x.Record; rec != nil {
		a.Requests, a.Segments = rec.Requests, len(rec.Segments)
		if len(rec.Turns) > 0 {
			for _, m := range rec.Turns[0].Messages {
				a.Opening = append(a.Opening, event.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID})
			}
		}
	}
	e.Agent = a
	for _, s := range x.Segments {
		e.Tokens += len(s.Tokens)
		if e.Eval {
			continue
		}
		for j := s.PromptLen; j < len(s.Tokens); j++ {
			if s.Mask[j] {
				e.Pieces = append(e.Pieces, c.o.Tokenizer.Decode(s.Tokens[j:j+1], false))
				if s.Advantages != nil {
					e.Advantages = append(e.Advantages, s.Advantages[j])
				}
			}
		}
	}
}
