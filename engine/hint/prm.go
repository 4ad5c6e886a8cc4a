package hint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/mathverify"
	"agentrl/envs/retool"
	"agentrl/recipes"
)

// The model PRM (prm.kind model): a language model reads each finished trajectory whole, its
// steps with the tools' outputs, and replies with a verdict per step and one bridge thought or
// \boxed{-1} (envs/retool's PRMPrompt and ParsePRM). Its verdicts become the trajectory's
// process score (their mean) and, with algorithm.estimator step_wise, per-step process rewards;
// its bridge thought is the teacher's hint. It writes on a rollout engine of its own (the
// reference's weights or a folder's, in the PRM phase), on the policy's, or through an
// OpenAI-compatible endpoint.

// ErrUnjudged wraps a failure to get a reply that leaves the trajectory unjudged while the step
// goes on: an endpoint that failed every try. Any other error of a PRMJudge stops the step.
var ErrUnjudged = errors.New("the PRM could not be asked")

// PRMJudge writes the model PRM's replies.
type PRMJudge interface {
	// Reply writes one reply to the PRM's user turn; seed is the reply's random stream.
	Reply(ctx context.Context, prompt string, seed uint64) (string, error)
	// Tokens is the prompt's length in the PRM's tokens, chat template included.
	Tokens(prompt string) int
	// Budget is the most prompt tokens the PRM reads.
	Budget() int
	// Generator is the rollout engine it writes on (its lockstep tickets order the replies), nil
	// for none.
	Generator() *rollout.Generator
}

// GenJudge is a PRM that writes on a rollout engine: the reference's or a folder's model in the
// PRM phase, or the policy's.
type GenJudge struct {
	Tok         *tokenizer.Tokenizer
	Gen         *rollout.Generator
	Stops       []int32 // the ids that end its reply
	MaxNew      int     // prm.max_new_tokens
	Temperature float64 // prm.temperature
	MaxInput    int     // prm.max_input_tokens resolved; bounded by the slot less MaxNew
}

var _ PRMJudge = (*GenJudge)(nil)

func (j *GenJudge) encode(prompt string) []int32 {
	text, err := tokenizer.RenderChat([]envs.Message{{Role: "user", Content: prompt}}, nil, true)
	if err != nil { // a user turn always renders; keep the text as it is if not
		text = prompt
	}
	return j.Tok.Encode(text)
}

// Tokens counts the rendered chat.
func (j *GenJudge) Tokens(prompt string) int { return len(j.encode(prompt)) }

// Budget is prm.max_input_tokens, at most the slot's length less the reply's tokens.
func (j *GenJudge) Budget() int {
	return max(1, min(j.MaxInput, j.Gen.Config().MaxLen-1-min(j.MaxNew, j.Gen.Config().MaxLen/2)))
}

// Generator is the engine it writes on.
func (j *GenJudge) Generator() *rollout.Generator { return j.Gen }

// Reply generates up to MaxNew tokens (fewer when the slot is fuller).
func (j *GenJudge) Reply(ctx context.Context, prompt string, seed uint64) (string, error) {
	ids := j.encode(prompt)
	room := j.Gen.Config().MaxLen - 1 - len(ids)
	if room < 1 {
		return "", fmt.Errorf("%w: its prompt of %d tokens fills the PRM's %d-token slot", ErrUnjudged, len(ids), j.Gen.Config().MaxLen)
	}
	res, err := j.Gen.Generate(ctx, rollout.Request{Append: ids, MaxNew: min(j.MaxNew, room), StopIDs: j.Stops,
		Sampling: rollout.Sampling{Temperature: float32(j.Temperature), Seed: seed}})
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(j.Tok.Decode(res.IDs, false), "<|im_end|>"), nil
}

// EndpointJudge is a PRM served elsewhere (prm.endpoint): one chat request per reply, each
// bounded by Timeout and tried Retries more times after a failure, with a short pause between
// (not after a refusal a retry would meet again: a 4xx other than 408 and 429).
// A reply that failed every try is ErrUnjudged: the step goes on without it.
type EndpointJudge struct {
	Client      retool.OpenAI
	Tok         *tokenizer.Tokenizer // counts the prompt's tokens (the policy's, as an estimate)
	MaxNew      int
	Temperature float64
	MaxInput    int
	Timeout     time.Duration
	Retries     int
	// Pause is the wait before the first retry, doubled for each later one up to 8 s (0: 1 s).
	Pause time.Duration
}

var _ PRMJudge = (*EndpointJudge)(nil)

// Tokens counts the prompt in Tok's tokens.
func (j *EndpointJudge) Tokens(prompt string) int { return len(j.Tok.Encode(prompt)) }

// Budget is prm.max_input_tokens.
func (j *EndpointJudge) Budget() int { return j.MaxInput }

// Generator is none.
func (j *EndpointJudge) Generator() *rollout.Generator { return nil }

// Reply asks the endpoint, with the timeout and retries.
func (j *EndpointJudge) Reply(ctx context.Context, prompt string, _ uint64) (string, error) {
	pause := j.Pause
	if pause <= 0 {
		pause = time.Second
	}
	var last error
	for try := 0; try <= j.Retries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(pause):
			}
			pause = min(2*pause, 8*time.Second)
		}
		actx, cancel := context.WithTimeout(ctx, j.Timeout)
		reply, err := j.Client.Ask(actx, "", prompt, j.MaxNew, j.Temperature)
		cancel()
		if err == nil {
			return reply, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		last = err
		var status *retool.StatusError
		if errors.As(err, &status) && !status.Retryable() { // the same request would be refused again
			return "", fmt.Errorf("%w: %v", ErrUnjudged, err)
		}
	}
	return "", fmt.Errorf("%w: %d tries: %v", ErrUnjudged, j.Retries+1, last)
}

// NewEndpointJudge is the recipe's prm.endpoint judge; tok counts prompts.
func NewEndpointJudge(r *recipes.Recipe, tok *tokenizer.Tokenizer) *EndpointJudge {
	p := r.PRM
	key := ""
	if p.APIKeyEnv != "" {
		key = os.Getenv(p.APIKeyEnv)
	}
	return &EndpointJudge{Client: retool.OpenAI{Endpoint: p.Endpoint, Model: p.Model, APIKey: key, Client: &http.Client{}, Section: "prm"},
		Tok: tok, MaxNew: p.MaxNewTokens, Temperature: p.Temperature, MaxInput: r.PRMInputTokens(), Timeout: p.Timeout, Retries: p.Retries}
}

// prmSeed is reply s of trajectory i's random stream in step step of a run seeded seed.
func prmSeed(seed int64, step, i, s int) uint64 {
	x := uint64(seed)*0x9e3779b97f4a7c15 ^ uint64(step)<<40 ^ uint64(i)<<12 ^ uint64(s)
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	return x ^ x>>29
}

// PRMSteps are a trajectory's steps as the PRM reads them: each turn's text and tool output.
func PRMSteps(t *batch.Trajectory) []string {
	steps := make([]string, len(t.Turns))
	for i, turn := range t.Turns {
		steps[i] = retool.PRMStepText(turn.Assistant, turn.Observation)
	}
	return steps
}

// Judge is the PRM phase's work (prm.kind model): prm.samples replies per trajectory, read into
// t.PRM, the process score (the mean verdict; the rules' score when unjudged or malformed) and,
// for algorithms with a teacher, the bridge thought as the hint. Replies that cannot be read are
// counted, never an error; a reply the PRM could not be asked for (ErrUnjudged) leaves its
// trajectory unjudged and the rest go on. Other errors (a stop, a failed generator) are returned.
func (h *Hinting) Judge(ctx context.Context, step int, trajs []*batch.Trajectory) error {
	j := h.PRM
	if j == nil {
		return nil
	}
	r := h.cfg.Recipe
	S := r.PRM.Samples
	template := r.PRM.PromptText()
	n := len(trajs)
	prompts := make([]string, n)
	shown := make([][]int, n)
	steps := make([][]string, n)
	budget := j.Budget()
	for i, t := range trajs {
		steps[i] = PRMSteps(t)
		prompts[i], shown[i] = retool.PRMPrompt(template, retool.PRMCase{Task: t.Task, Steps: steps[i], Summary: t.Summary}, j.Tokens, budget)
	}
	replies := make([][]string, n)
	unjudged := make([]string, n)
	tooLong := make([]bool, n)
	for i := range replies {
		replies[i] = make([]string, S)
		if tooLong[i] = shown[i] == nil && len(steps[i]) > 0; tooLong[i] {
			unjudged[i] = fmt.Sprintf("not even its last step fits the PRM's %d-token budget", budget)
		}
	}
	var mu sync.Mutex
	err := h.judgeOn(ctx, j.Generator(), n*S, func(ctx context.Context, k int) error {
		i, s := k/S, k%S
		if tooLong[i] {
			return nil
		}
		reply, err := j.Reply(ctx, prompts[i], prmSeed(r.Run.Seed, step, i, s))
		if errors.Is(err, ErrUnjudged) {
			mu.Lock()
			if unjudged[i] == "" {
				unjudged[i] = err.Error()
			}
			mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		replies[i][s] = reply
		return nil
	})
	if err != nil {
		return err
	}
	wantHints := r.Algorithm.Name == "hybrid" || r.Algorithm.Name == "opd"
	maxChars := 8 * r.Hinter.MaxHintTokens
	for i, t := range trajs {
		p := &event.PRM{Replies: S}
		hint := ""
		if unjudged[i] != "" {
			p.Status, p.Why = event.PRMUnjudged, unjudged[i]
			if tooLong[i] {
				p.Replies = 0 // none was asked for
			}
		} else {
			p.Status, p.Verdicts, hint, p.Malformed, p.Why = combine(replies[i], len(steps[i]), shown[i], t.Task.Answer, maxChars)
			p.Hint = hint != ""
		}
		t.PRM = p
		t.Reward.Process = retool.RulesProcessScore(t.Summary)
		if s, ok := meanVerdict(p.Verdicts); ok {
			t.Reward.Process = s
		}
		if !wantHints || hint == "" {
			continue
		}
		t.Hint, t.HintCut = h.Fit(hint)
		if _, ok, err := h.cfg.TeacherPrompt(t, t.Hint); err != nil {
			return err
		} else if !ok {
			t.Hint, t.HintCut = "", Dropped
		}
	}
	return nil
}

// combine reads a trajectory's replies: the well-formed ones' mean verdict per step (−1 where
// none gave one), and a hint when at least half of them ask for one (the first such reply's).
// Every reply malformed: status malformed and no verdicts.
func combine(replies []string, n int, shown []int, answer string, maxChars int) (status string, verdicts []float64, hint string, malformed int, why string) {
	sum := make([]float64, n)
	cnt := make([]int, n)
	well, asks := 0, 0
	for _, reply := range replies {
		pr := retool.ParsePRM(reply, n, shown, answer, maxChars)
		if !pr.OK {
			malformed++
			if why == "" {
				why = pr.Why
			}
			continue
		}
		well++
		for k, v := range pr.Verdicts {
			if !math.IsNaN(v) {
				sum[k] += v
				cnt[k]++
			}
		}
		if pr.Hint != "" {
			asks++
			if hint == "" {
				hint = pr.Hint
			}
		}
	}
	if well == 0 {
		return event.PRMMalformed, nil, "", malformed, why
	}
	verdicts = make([]float64, n)
	for k := range verdicts {
		verdicts[k] = -1
		if cnt[k] > 0 {
			verdicts[k] = sum[k] / float64(cnt[k])
		}
	}
	if 2*asks < well {
		hint = ""
	}
	return event.PRMJudged, verdicts, hint, malformed, ""
}

// meanVerdict is the mean of the judged steps' verdicts (ok false without any).
func meanVerdict(v []float64) (float64, bool) {
	var s float64
	n := 0
	for _, x := range v {
		if x >= 0 {
			s += x
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return s / float64(n), true
}

// StepRewards is the PRM's per-step rewards of t for the step_wise estimator: its verdicts with
// NaN for a step without one; nil when the PRM did not judge it.
func StepRewards(t *batch.Trajectory) []float64 {
	if t.PRM == nil || t.PRM.Status != event.PRMJudged {
		return nil
	}
	out := make([]float64, len(t.PRM.Verdicts))
	for k, v := range t.PRM.Verdicts {
		out[k] = v
		if v < 0 {
			out[k] = math.NaN()
		}
	}
	return out
}

// PRMCounts are a step's PRM figures: trajectories judged, malformed replies, trajectories
// unjudged, and the judged ones the PRM gave a bridge thought.
func PRMCounts(trajs []*batch.Trajectory) (judged, malformed, unjudged, hinted int) {
	for _, t := range trajs {
		p := t.PRM
		if p == nil {
			continue
		}
		malformed += p.Malformed
		switch p.Status {
		case event.PRMJudged:
			judged++
			if p.Hint {
				hinted++
			}
		case event.PRMUnjudged:
			unjudged++
		}
	}
	return judged, malformed, unjudged, hinted
}

// PRMAgreement compares the PRM's verdicts with what the environment knows of the judged
// trajectories (retool.CheckedSteps): the share of final steps whose verdict is the verifier's
// outcome, and the share of all judged steps whose verdict is the step's checked result. A
// verdict counts as the mean of the well-formed replies' (≥ ½ is correct). ok is false when no
// trajectory was judged.
func PRMAgreement(trajs []*batch.Trajectory, opts mathverify.Options) (final, steps float64, ok bool) {
	var finals, finalAgree, all, agree int
	for _, t := range trajs {
		p := t.PRM
		if p == nil || p.Status != event.PRMJudged || len(p.Verdicts) == 0 {
			continue
		}
		checked := retool.CheckedSteps(StepFacts(t), t.Summary, t.Task, opts)
		for k, v := range p.Verdicts {
			if v < 0 || k >= len(checked) {
				continue // a step the PRM did not see
			}
			same := (v >= 0.5) == (checked[k] == retool.VerdictCorrect)
			all++
			if same {
				agree++
			}
			if k == len(p.Verdicts)-1 {
				finals++
				if same {
					finalAgree++
				}
			}
		}
	}
	if all == 0 {
		return 0, 0, false
	}
	return float64(finalAgree) / float64(max(finals, 1)), float64(agree) / float64(all), true
}

// StepFacts are what the environment recorded of each of t's turns, for retool.CheckedSteps.
func StepFacts(t *batch.Trajectory) []retool.StepFacts {
	out := make([]retool.StepFacts, len(t.Turns))
	for i, turn := range t.Turns {
		f := retool.StepFacts{ToolStatus: turn.ToolStatus, FormatError: turn.ToolStatus == "" && retool.IsFormatErrorObservation(turn.Observation)}
		if turn.ToolStatus != "" {
			f.Output = retool.ObservationOutput(turn.Observation)
		}
		out[i] = f
	}
	return out
}
