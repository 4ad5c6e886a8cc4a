// Package hint is hindsight for a step's trajectories: the process scorer (prm.kind) that reads
// each finished trajectory, the hinter that writes a failed one's bridge thought (rules, the
// policy itself as a judge, or an OpenAI-compatible model), the fitting of a hint to
// hinter.max_hint_tokens, and the probes that say whether the teacher can read the hints
// (hint_lift on a correct sibling, hint_lift_demo on the task's reference demonstration, and
// ProbeKinds for `sft probe`).
package hint

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"agentrl/engine/batch"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/mathverify"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
)

// judgeConcurrency bounds the judge requests in flight (sessions of the generator, or HTTP
// requests to an OpenAI-compatible endpoint).
const judgeConcurrency = 8

// selfJudge is the policy model prompted as a judge through the rollout engine: a hinter (the
// "self" hinter) and a process scorer (prm.kind judge). It decodes greedily, so a judgement is
// reproducible, and runs in the score phase, while the generator still holds its KV cache.
type selfJudge struct {
	tok      *tokenizer.Tokenizer
	gen      *rollout.Generator
	stops    []int32      // the ids that end a turn
	maxHint  int          // hinter.max_hint_tokens
	unparsed atomic.Int64 // replies with no usable \boxed{} (then: no hint, or the rules score)
}

var (
	_ retool.Hinter = (*selfJudge)(nil)
	_ retool.Scorer = (*selfJudge)(nil)
)

// ask renders a judge prompt with the chat template, generates up to maxNew tokens and returns
// the reply text.
func (j *selfJudge) ask(ctx context.Context, system, user string, maxNew int) (string, error) {
	text, err := tokenizer.RenderChat([]envs.Message{{Role: "system", Content: system}, {Role: "user", Content: user}}, nil, true)
	if err != nil {
		return "", err
	}
	ids := j.tok.Encode(text)
	room := j.gen.Config().MaxLen - 1
	if len(ids) >= room {
		ids = ids[len(ids)-room/2:] // keep the end: the attempt's last turns and the question
	}
	res, err := j.gen.Generate(ctx, rollout.Request{Append: ids, MaxNew: min(maxNew, room-len(ids)), StopIDs: j.stops,
		Sampling: rollout.Sampling{Temperature: 0}})
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(j.tok.Decode(res.IDs, false), "<|im_end|>"), nil
}

// Hint asks the policy for a bridge thought; an unusable reply is no hint.
func (j *selfJudge) Hint(ctx context.Context, req retool.HintRequest) (string, error) {
	system, user := retool.JudgeHintPrompt(req)
	n := j.maxHint
	reply, err := j.ask(ctx, system, user, n+16) // room for \boxed{ … } around the sentence
	if err != nil {
		return "", err
	}
	hint, ok := retool.ParseJudgeHint(reply, req.Task.Answer, 8*n)
	if !ok {
		j.unparsed.Add(1)
	}
	return hint, nil
}

// Score asks the policy for a 0–10 process score.
func (j *selfJudge) Score(ctx context.Context, req retool.HintRequest) (float64, bool, error) {
	system, user := retool.JudgeScorePrompt(req)
	reply, err := j.ask(ctx, system, user, 24)
	if err != nil {
		return 0, false, err
	}
	s, ok := retool.ParseJudgeScore(reply)
	if !ok {
		j.unparsed.Add(1)
	}
	return s, ok, nil
}

// Hinting is a run's hindsight: its hinter (nil: no hints), its process scorer (nil: no process
// reward), the policy as a judge when the recipe names it, and what the probes keep across steps.
type Hinting struct {
	Hinter retool.Hinter
	Scorer retool.Scorer
	// PRM writes the model PRM's replies (prm.kind model; Judge reads them), nil otherwise.
	PRM   PRMJudge
	cfg   Config
	judge *selfJudge
	demos map[string]*Demo // each task's reference demonstration as the probe scores it
	// lifts are this step's demonstration lifts by task and hint (Gate resets them): the gate
	// and the probe measure the same hints, each once.
	lifts map[liftKey]float64
}

// liftKey names a hint's demonstration lift: its task and its text.
type liftKey struct{ task, hint string }

// Config is what hindsight works with.
type Config struct {
	Recipe    *recipes.Recipe
	Tokenizer *tokenizer.Tokenizer
	Gen       *rollout.Generator // the self judge generates on it, in the score phase
	Stops     []int32            // the ids that end a turn; Stops[0] is <|im_end|>
	// PRM is prm.kind model's judge when it writes on a rollout engine (the engine builds it);
	// nil with prm.endpoint, whose judge New builds, and in an evaluation-only run (no PRM).
	PRM       PRMJudge
	Reference *model.Model     // the teacher the probes score with
	Exec      sandbox.Executor // runs the tasks' reference programs for the demonstrations
	// TeacherPrompt is a trajectory's prompt with a hint placed in it, as the teacher reads it
	// (ok false where a hint has nowhere to go: an agent's prompt without the problem's text).
	TeacherPrompt func(t *batch.Trajectory, hint string) (ids []int32, ok bool, err error)
	// Interrupt ends a probe between reference forwards with the error it returns (a stop).
	Interrupt func() error
}

// New builds the recipe's hinter (hinter.kind) and process scorer (prm.kind).
func New(cfg Config) (*Hinting, error) {
	r := cfg.Recipe
	h := &Hinting{cfg: cfg, judge: &selfJudge{tok: cfg.Tokenizer, gen: cfg.Gen, stops: cfg.Stops, maxHint: r.Hinter.MaxHintTokens}}
	switch r.Hinter.Kind {
	case "rules":
		h.Hinter = retool.Rules{Verify: mathverify.Options{LastNumberFallback: r.Reward.LastNumberFallback}}
	case "self":
		h.Hinter = h.judge
	case "openai":
		key := ""
		if r.Hinter.APIKeyEnv != "" {
			key = os.Getenv(r.Hinter.APIKeyEnv)
		}
		h.Hinter = retool.OpenAI{Endpoint: r.Hinter.Endpoint, Model: r.Hinter.Model, APIKey: key,
			MaxTokens: r.Hinter.MaxHintTokens + 16, Unparsed: &h.judge.unparsed}
	case "none", "":
	default:
		return nil, fmt.Errorf("engine: hinter.kind %q is not one of none, rules, self, openai", r.Hinter.Kind)
	}
	switch r.PRM.Kind {
	case "rules":
		h.Scorer = retool.Rules{Verify: mathverify.Options{LastNumberFallback: r.Reward.LastNumberFallback}}
	case "judge":
		h.Scorer = h.judge
	case "model":
		h.PRM = cfg.PRM
		if r.PRM.Endpoint != "" {
			h.PRM = NewEndpointJudge(r, cfg.Tokenizer)
		}
	case "none", "":
	default:
		return nil, fmt.Errorf("engine: prm.kind %q is not one of none, rules, judge, model", r.PRM.Kind)
	}
	return h, nil
}

// Unparsed returns, and resets, the count of judge replies with no usable \boxed{} since the last
// call (the step's judge_unparsed).
func (h *Hinting) Unparsed() int64 { return h.judge.unparsed.Swap(0) }

// Hindsight scores each finished trajectory's process (when the recipe has a PRM) and, for
// algorithms with a teacher (hybrid, opd), asks the hinter for a bridge thought. A judge is only
// asked about trajectories that the rules do not already pass as clean successes. Judge failures
// to answer usefully fall back to no hint and the rules' process score.
func (h *Hinting) Hindsight(ctx context.Context, trajs []*batch.Trajectory) error {
	wantHints := h.Hinter != nil && (h.cfg.Recipe.Algorithm.Name == "hybrid" || h.cfg.Recipe.Algorithm.Name == "opd")
	reqs := make([]retool.HintRequest, len(trajs))
	for i, t := range trajs {
		reqs[i] = retool.HintRequest{Task: t.Task, Response: transcript(t), Summary: t.Summary}
	}
	if h.Scorer != nil {
		err := h.judgeAll(ctx, h.Scorer == retool.Scorer(h.judge), len(trajs), func(ctx context.Context, i int) error {
			s, ok, err := h.Scorer.Score(ctx, reqs[i])
			if err != nil {
				return err
			}
			if !ok {
				s = retool.RulesProcessScore(trajs[i].Summary)
			}
			trajs[i].Reward.Process = s
			return nil
		})
		if err != nil {
			return err
		}
	}
	if !wantHints {
		return nil
	}
	return h.judgeAll(ctx, h.Hinter == retool.Hinter(h.judge), len(trajs), func(ctx context.Context, i int) error {
		if retool.RulesHint(trajs[i].Summary) == "" { // a clean success needs no hint
			return nil
		}
		text, err := h.Hinter.Hint(ctx, reqs[i])
		if err != nil {
			return err
		}
		trajs[i].Hint, trajs[i].HintCut = h.Fit(text)
		if _, ok, err := h.cfg.TeacherPrompt(trajs[i], trajs[i].Hint); err != nil {
			return err
		} else if !ok { // an agent's prompt without the problem's text: nowhere to put the hint
			trajs[i].Hint, trajs[i].HintCut = "", Dropped
		}
		return nil
	})
}

// judgeAll calls fn for trajectories 0..n-1 concurrently and returns the first error. Call i
// opens its generator session (if any) with ticket i of a reserved run, so a lockstep generator
// serves the judge's requests in trajectory order whatever their timing. An OpenAI endpoint gets
// at most judgeConcurrency requests at once; the self judge is bounded by the generator's slots
// instead, since lockstep admission waits for each ticket in turn and a ticket must not wait for
// an earlier request's reply.
func (h *Hinting) judgeAll(ctx context.Context, onGenerator bool, n int, fn func(ctx context.Context, i int) error) error {
	if onGenerator {
		return h.judgeOn(ctx, h.cfg.Gen, n, fn)
	}
	return h.judgeOn(ctx, nil, n, fn)
}

// judgeOn is judgeAll on generator gen (tickets of a run reserved on it, and no bound but its
// slots), or without one (nil: an endpoint, judgeConcurrency requests at once). The tickets
// are reserved on the policy's generator when gen is nil, as judgeAll always did.
func (h *Hinting) judgeOn(ctx context.Context, gen *rollout.Generator, n int, fn func(ctx context.Context, i int) error) error {
	limit := judgeConcurrency
	if gen != nil {
		limit = max(1, n)
	} else {
		gen = h.cfg.Gen
	}
	sem := make(chan struct{}, limit)
	var base int64
	if gen != nil {
		base = gen.Reserve(n)
	}
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			jctx := ctx
			if gen != nil {
				defer gen.Skip(base + int64(i))
				jctx = rollout.WithTicket(ctx, base+int64(i))
			}
			if err := fn(jctx, i); err != nil {
				once.Do(func() { firstErr = err })
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// Why a hint was changed to fit hinter.max_hint_tokens (batch.Trajectory.HintCut).
const (
	Shortened = "shortened" // its last sentences left out
	Dropped   = "dropped"   // not even its first sentence fits
)

// Fit keeps a hint within hinter.max_hint_tokens tokens of the policy's tokenizer without
// ever cutting a sentence: the whole hint when it fits, else its longest run of leading sentences
// that fits (Shortened), else nothing (Dropped). A cut hint would hand the teacher a
// clause without its instruction ("The final answer does not match the printed result:").
//
// A hint is user text in the teacher's prompt: the text of special tokens in it (a rules hint
// quoting an answer the policy wrote with <|im_start|> in it, a judge's reply) is removed first,
// as it would encode as the token and open or close a chat turn.
func (h *Hinting) Fit(text string) (hint, cut string) {
	tok := h.cfg.Tokenizer
	return wholeHint(tok, tok.StripSpecial(text), h.cfg.Recipe.Hinter.MaxHintTokens)
}

func wholeHint(tok *tokenizer.Tokenizer, h string, n int) (hint, cut string) {
	h = strings.TrimSpace(h)
	if n <= 0 || h == "" {
		return h, ""
	}
	switch hint = retool.LeadingSentences(h, func(s string) bool { return len(tok.Encode(s)) <= n }); hint {
	case h:
		return hint, ""
	case "":
		return "", Dropped
	}
	return hint, Shortened
}

// transcript is the trajectory after the prompt as the judge reads it: each assistant turn and
// the tool's output.
func transcript(t *batch.Trajectory) string {
	var b strings.Builder
	for _, turn := range t.Turns {
		b.WriteString(turn.Assistant)
		b.WriteString("\n")
		if turn.Observation != "" {
			b.WriteString(turn.Observation)
			b.WriteString("\n")
		}
	}
	return b.String()
}
