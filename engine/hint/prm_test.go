package hint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/recipes"
)

// scriptedPRM answers from a fixed script: the replies of each task, by sample (found from the
// reply's seed); a task missing from the script cannot be asked (ErrUnjudged), as a dead
// endpoint.
type scriptedPRM struct {
	mu      sync.Mutex
	replies map[string][]string
	prompts map[string]string
	sample  map[uint64]int // seed → sample
}

func (s *scriptedPRM) Reply(_ context.Context, prompt string, seed uint64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, rs := range s.replies {
		if strings.Contains(prompt, "problem "+id+".") {
			s.prompts[id] = prompt
			return rs[s.sample[seed]], nil
		}
	}
	return "", fmt.Errorf("%w: connection refused", ErrUnjudged)
}
func (s *scriptedPRM) Tokens(p string) int           { return len(strings.Fields(p)) }
func (s *scriptedPRM) Budget() int                   { return 10000 }
func (s *scriptedPRM) Generator() *rollout.Generator { return nil }

// A scripted PRM, malformed replies among its replies, drives the parsing of verdicts and hints,
// the hint rate, the counts and the step-wise advantages, against values worked out by hand.
func TestScriptedPRM(t *testing.T) {
	r := recipes.Default()
	r.Algorithm.Name, r.PRM.Kind, r.PRM.Samples = "hybrid", "model", 2
	tok, err := tokenizer.Load(filepath.Join("..", "..", model.BuiltinSourceDir))
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptedPRM{prompts: map[string]string{}, sample: map[uint64]int{}, replies: map[string][]string{
		"t0": {"Step 1: correct\nStep 2: wrong\n\\boxed{Check the sign of x.}", "Step 1: correct\nStep 2: wrong\n\\boxed{Check the sign of x first.}"},
		"t1": {"Step 1: correct\n\\boxed{-1}", "I think it is fine."},              // one malformed
		"t2": {"Step 1: correct", "<think>Step 1: wrong"},                          // both malformed
		"t4": {"Step 1: wrong\n\\boxed{Use sympy.}", "Step 1: wrong\n\\boxed{-1}"}, // half ask: a hint
		// t3 is not in the script: the endpoint fails, t3 is unjudged.
	}}
	for i := range 5 {
		s.sample[prmSeed(r.Run.Seed, 1, i, 0)], s.sample[prmSeed(r.Run.Seed, 1, i, 1)] = 0, 1
	}
	h, err := New(Config{Recipe: r, Tokenizer: tok, PRM: s,
		TeacherPrompt: func(*batch.Trajectory, string) ([]int32, bool, error) { return nil, true, nil }})
	if err != nil {
		t.Fatal(err)
	}
	turn := func(text, obs string) event.Turn { return event.Turn{Assistant: text, Observation: obs} }
	trajs := []*batch.Trajectory{
		{Group: 0, Turns: []event.Turn{turn("<code>print(2+3)</code>", "5"), turn("so -5", "")}},
		{Group: 0, Turns: []event.Turn{turn("\\boxed{7}", "")}, Summary: envs.Summary{Answered: true, Correct: true}},
		{Group: 1, Turns: []event.Turn{turn("hmm", "")}},
		{Group: 1, Turns: []event.Turn{turn("hmm", "")}},
		{Group: 1, Turns: []event.Turn{turn("\\boxed{8}", "")}, Summary: envs.Summary{Answered: true}},
	}
	for i, tr := range trajs {
		tr.Task = envs.Task{ID: fmt.Sprintf("t%d", i), Prompt: fmt.Sprintf("Solve problem t%d.", i), Answer: "7"}
	}
	if err := h.Judge(context.Background(), 1, trajs); err != nil {
		t.Fatal(err)
	}
	if p := s.prompts["t0"]; !strings.Contains(p, "Step 1:\n<code>print(2+3)</code>\n[tool output]\n5") || !strings.Contains(p, "Step 2:\nso -5") ||
		!strings.Contains(p, "The attempt, 2 steps:") {
		t.Errorf("t0's prompt does not hold the whole trajectory with its tool output:\n%s", p)
	}
	want := []struct {
		status        string
		verdicts      []float64
		malformed     int
		hint, process string
	}{
		{event.PRMJudged, []float64{1, 0}, 0, "Check the sign of x.", "0.5"},
		{event.PRMJudged, []float64{1}, 1, "", "1"},
		{event.PRMMalformed, nil, 2, "", fmt.Sprint(retool.RulesProcessScore(envs.Summary{}))},
		{event.PRMUnjudged, nil, 0, "", fmt.Sprint(retool.RulesProcessScore(envs.Summary{}))},
		{event.PRMJudged, []float64{0}, 0, "Use sympy.", "0"},
	}
	for i, w := range want {
		p := trajs[i].PRM
		if p == nil || p.Status != w.status || fmt.Sprint(p.Verdicts) != fmt.Sprint(w.verdicts) || p.Malformed != w.malformed ||
			trajs[i].Hint != w.hint || fmt.Sprint(trajs[i].Reward.Process) != w.process || p.Replies != 2 {
			t.Errorf("t%d: got %+v, hint %q, process %v; want %+v", i, p, trajs[i].Hint, trajs[i].Reward.Process, w)
		}
	}
	if trajs[3].PRM.Why == "" || !strings.Contains(trajs[3].PRM.Why, "connection refused") {
		t.Errorf("t3 unjudged without the reason: %q", trajs[3].PRM.Why)
	}
	judged, malformed, unjudged, hinted := PRMCounts(trajs)
	if judged != 3 || malformed != 3 || unjudged != 1 || hinted != 2 {
		t.Errorf("counts judged %d, malformed %d, unjudged %d, hinted %d; want 3, 3, 1, 2 (hint_rate 2/3)", judged, malformed, unjudged, hinted)
	}
	// Step-wise: group 0's judged steps 1, 0, 1 have mean 2/3 and std √2/3, so correct → +1/√2
	// and wrong → −√2: t0 P = [1/√2 − √2, −√2] = [−1/√2, −√2], t1 [1/√2]; group 1 has one judged
	// step (t4's), which carries no signal: 0; t2 and t3 none.
	steps := make([][]float64, len(trajs))
	groups := make([]int, len(trajs))
	for i, tr := range trajs {
		steps[i], groups[i] = StepRewards(tr), tr.Group
	}
	got, err := train.StepWise(steps, groups, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	r2 := math.Sqrt2
	wantP := [][]float64{{-1 / r2, -r2}, {1 / r2}, nil, nil, {0}}
	for i := range wantP {
		if len(got[i]) != len(wantP[i]) {
			t.Fatalf("t%d: P %v; want %v", i, got[i], wantP[i])
		}
		for k := range wantP[i] {
			if math.Abs(got[i][k]-wantP[i][k]) > 1e-9 {
				t.Errorf("t%d step %d: P %v; want %v", i, k+1, got[i][k], wantP[i][k])
			}
		}
	}
}

// The endpoint judge tries a failed request again after a pause, gives each try its timeout, and
// reports a reply it never got as ErrUnjudged (the step goes on); a cancelled step is not that.
func TestEndpointJudgeRetries(t *testing.T) {
	var calls atomic.Int64
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case strings.Contains(r.URL.Path, "hang"):
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		case n == 1:
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"Step 1: correct\\n\\boxed{-1}"}}]}`)
		}
	}))
	defer srv.Close()
	defer close(hang) // before the server closes: it waits for the hanging handlers
	j := &EndpointJudge{Client: retool.OpenAI{Endpoint: srv.URL + "/v1", Model: "judge", Client: &http.Client{}}, MaxNew: 16,
		Timeout: 200 * time.Millisecond, Retries: 1, Pause: 10 * time.Millisecond}
	reply, err := j.Reply(context.Background(), "judge this", 1)
	if err != nil || !strings.Contains(reply, `\boxed{-1}`) || calls.Load() != 2 {
		t.Fatalf("after one failure: reply %q, err %v, %d calls; want the second try's reply", reply, err, calls.Load())
	}
	j.Client.Endpoint = srv.URL + "/hang/v1"
	t0 := time.Now()
	_, err = j.Reply(context.Background(), "judge this", 1)
	if !errors.Is(err, ErrUnjudged) || !strings.Contains(err.Error(), "2 tries") || time.Since(t0) > 5*time.Second {
		t.Errorf("a hanging server: err %v after %s; want ErrUnjudged after 2 tries of 200ms", err, time.Since(t0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Reply(ctx, "judge this", 1); errors.Is(err, ErrUnjudged) || err == nil {
		t.Errorf("a cancelled step: err %v; want the context's error, not unjudged", err)
	}
}

// A refusal that a retry would meet again (a 4xx other than 408 and 429) is not retried, and its
// error names the PRM's fields, not the hinter's; a 429 or 5xx is tried Retries more times.
func TestEndpointJudgeRefusalNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		calls     int64
		errHas    []string
		errHasNot string
	}{
		{"context length", http.StatusBadRequest, `{"error":{"message":"This model's maximum context length is 1023 tokens","code":"context_length_exceeded"}}`, 1,
			[]string{"400", "context_length_exceeded", "prm.max_input_tokens"}, "hinter."},
		{"unknown model", http.StatusNotFound, `{"error":{"message":"no such model"}}`, 1, []string{"404", "prm.endpoint", "prm.model"}, "hinter."},
		{"bad key", http.StatusUnauthorized, `{"error":{"message":"bad key"}}`, 1, []string{"401", "prm.api_key_env"}, "hinter."},
		{"rate limited", http.StatusTooManyRequests, `{"error":{"message":"slow down"}}`, 3, []string{"3 tries", "429"}, ""},
		{"server failed", http.StatusBadGateway, `upstream down`, 3, []string{"3 tries", "502"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				http.Error(w, tc.body, tc.status)
			}))
			defer srv.Close()
			j := &EndpointJudge{Client: retool.OpenAI{Endpoint: srv.URL + "/v1", Model: "judge", Client: &http.Client{}, Section: "prm"}, MaxNew: 16,
				Timeout: time.Second, Retries: 2, Pause: time.Millisecond}
			_, err := j.Reply(context.Background(), "judge this", 1)
			if !errors.Is(err, ErrUnjudged) || calls.Load() != tc.calls {
				t.Fatalf("err %v after %d requests; want ErrUnjudged after %d", err, calls.Load(), tc.calls)
			}
			for _, want := range tc.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q; want it to name %q", err, want)
				}
			}
			if tc.errHasNot != "" && strings.Contains(err.Error(), tc.errHasNot) {
				t.Errorf("error %q names %q: the PRM's endpoint has prm.* fields", err, tc.errHasNot)
			}
		})
	}
}
