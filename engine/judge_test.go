package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/hint"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/serve"
	"agentrl/engine/tokenizer"
)

// judgeStep are the overrides of one step of recipes/retool.yaml whose PRM is the built-in model
// as typed (--set hinter.kind=none --set prm.kind=model --set prm.model=reference): 4 tasks × 8
// samples, seed 1, the PRM's prompt and lengths as FitPRM sets them from the model's folder.
func judgeStep(extra map[string]string) map[string]string {
	over := map[string]string{"rollout.tasks_per_step": "4", "rollout.group_size": "8", "hinter.kind": "none",
		"prm.kind": "model", "prm.model": "reference"}
	for k, v := range extra {
		over[k] = v
	}
	return over
}

// fitBuiltinPRM applies FitPRM to a test controller's recipe, as a run's launch does.
func fitBuiltinPRM(t *testing.T) func(*Options) {
	return func(o *Options) {
		if _, err := hint.FitPRM(o.Recipe, filepath.Join("..", model.BuiltinSourceDir)); err != nil {
			t.Fatal(err)
		}
	}
}

// judgedStep runs one step and returns its metrics and its trajectories' PRM judgements by
// task and sample.
func judgedStep(t *testing.T, extra map[string]string, opts ...func(*Options)) (map[event.Metric]float64, map[string]*event.PRM) {
	t.Helper()
	c, events := builtinRunWith(t, judgeStep(extra), func(o *Options) {
		for _, f := range opts {
			f(o)
		}
	})
	var m map[event.Metric]float64
	prm := map[string]*event.PRM{}
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.StepMetrics:
			m = v.Metrics
		case event.Trajectory:
			if !v.Eval {
				prm[fmt.Sprintf("%s/%d/%d", v.TaskID, v.Group, v.Sample)] = v.PRM
			}
		}
	}
	if m == nil {
		t.Fatal("the step did not finish")
	}
	return m, prm
}

// TestBuiltinJudges: the built-in model, taught the PRM's task by make builtin, judges as the
// seed's PRM does on one step of the default recipe with the PRM set as typed: it asks for a
// bridge thought on 20-80 % of the trajectories, at most 5 % of its replies are malformed, and
// its verdicts agree with the verifier on the final step at least 90 % of the time and with
// the environment's checked steps at least 80 % (retool.CheckedSteps); its hints are probed as
// the rules hinter's are.
func TestBuiltinJudges(t *testing.T) {
	if testing.Short() {
		t.Skip("a step of 32 trajectories and their PRM phase")
	}
	m, prm := judgedStep(t, nil, fitBuiltinPRM(t))
	judged, malformed, rate := m[event.MetricPRMJudged], m[event.MetricPRMMalformed], m[event.MetricHintRate]
	final, steps := m[event.MetricPRMAgreementFinal], m[event.MetricPRMAgreementSteps]
	t.Logf("hint_rate %.3f, prm_judged %v of %d, prm_malformed %v, prm_agreement final %.3f steps %.3f", rate, judged, len(prm), malformed, final, steps)
	if rate < 0.2 || rate > 0.8 {
		t.Errorf("hint_rate %.3f; want 0.2 to 0.8", rate)
	}
	if replies := float64(len(prm)); malformed > 0.05*replies {
		t.Errorf("prm_malformed %v of %v replies; want at most 5 %%", malformed, replies)
	}
	if final < 0.9 || steps < 0.8 {
		t.Errorf("prm_agreement final %.3f, steps %.3f; want at least 0.9 and 0.8", final, steps)
	}
	// The model's hints are probed as the rules' are: the teacher's gain on the hinted responses.
	if gain, ok := m[event.MetricHintGain]; rate > 0 && !ok {
		t.Errorf("hints were given but no hint_gain was measured")
	} else {
		t.Logf("hint_gain %.3f, hint_lift %.3f (probed %v)", gain, m[event.MetricHintLift], m[event.MetricHintLiftProbed])
	}
}

// TestBuiltinJudgeElsewhere: the same teacher, greedy, gives the same verdicts and hints on
// every trajectory as the run's reference, as a prm.model folder holding it, and served by this
// project's OpenAI-compatible server as prm.endpoint.
func TestBuiltinJudgeElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("three steps of 32 trajectories and their PRM phases")
	}
	greedy := map[string]string{"prm.temperature": "0"}
	_, ref := judgedStep(t, greedy, fitBuiltinPRM(t))
	dir := filepath.Join("..", model.BuiltinSourceDir)
	folder := map[string]string{"prm.temperature": "0", "prm.model": dir}
	_, fromFolder := judgedStep(t, folder, func(o *Options) {
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(o.Policy.Backend, dir, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		o.PRM, o.PRMTokenizer = m, tok
	}, fitBuiltinPRM(t))

	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	judge, err := model.Load(backend, dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := rollout.New(judge, rollout.Config{Slots: 4, MaxLen: 1024, Decode: func(ids []int32) string { return tok.Decode(ids, false) }})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	srv, err := serve.New(gen, tok, serve.Options{ModelName: "builtin-judge", MaxNewTokens: 256, Open: true, Sampling: serve.Sampling{Temperature: 0}})
	if err != nil {
		t.Fatal(err)
	}
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	endpoint := map[string]string{"prm.temperature": "0", "prm.endpoint": base, "prm.model": "builtin-judge", "prm.api_key_env": "",
		"prm.max_new_tokens": "256", "prm.max_input_tokens": "768"}
	_, served := judgedStep(t, endpoint, func(o *Options) {
		o.Recipe.PRM.PromptFile, o.Recipe.PRM.Prompt = mustRead(t, filepath.Join(dir, "prm_prompt.txt")), "@prm_prompt.txt"
	})
	for name, got := range map[string]map[string]*event.PRM{"a prm.model folder": fromFolder, "prm.endpoint": served} {
		if len(got) != len(ref) {
			t.Fatalf("%s: %d trajectories; the reference judged %d", name, len(got), len(ref))
		}
		for k, want := range ref {
			g := got[k]
			if g == nil || want == nil || g.Status != want.Status || g.Hint != want.Hint || fmt.Sprint(g.Verdicts) != fmt.Sprint(want.Verdicts) {
				t.Errorf("%s: trajectory %s judged %+v; the reference %+v", name, k, g, want)
			}
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
