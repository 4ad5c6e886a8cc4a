package engine

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/serve"
	"agentrl/engine/serve/servetest"
)

// A short PRM prompt for the built-in model, whose context is 1,024 tokens of a small vocabulary
// (the default template alone is longer than that).
const tinyPRMPrompt = `Judge this attempt at {problem} (reference {answer}, {outcome}). {steps} steps:
{trajectory}
Reply "Step k: correct" or "Step k: wrong" for each step, then \boxed{one short hint} or \boxed{-1}.`

// builtinPRM are the overrides of a 2-step Hybrid run whose PRM is the built-in model (the
// run's reference, no second copy), with step-wise advantages.
func builtinPRM() map[string]string {
	return map[string]string{"run.max_steps": "2", "rollout.group_size": "2", "hinter.kind": "none",
		"prm.kind": "model", "prm.model": "reference", "prm.prompt": tinyPRMPrompt, "prm.max_new_tokens": "24",
		"prm.max_input_tokens": "640", "prm.samples": "2", "algorithm.estimator": "step_wise", "reward.process": "0.2"}
}

// TestBuiltinPRMEndToEnd: the built-in model as the PRM runs a 2-step Hybrid recipe on the CPU:
// a PRM phase in each step, every trajectory judged by 2 replies (whatever the small model
// writes: a malformed reply is counted, never an error), the metrics hint_rate, prm_judged,
// prm_malformed and prm_unjudged, and the step trains.
func TestBuiltinPRMEndToEnd(t *testing.T) {
	c, events := builtinRun(t, builtinPRM())
	phases, steps := 0, 0
	var trajs []event.Trajectory
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.Phase:
			if v.Phase == event.PhasePRM {
				phases++
			}
		case event.Trajectory:
			if !v.Eval {
				trajs = append(trajs, v)
			}
		case event.StepMetrics:
			steps++
			m := v.Metrics
			judged, malformed, unjudged, rate := m[event.MetricPRMJudged], m[event.MetricPRMMalformed], m[event.MetricPRMUnjudged], m[event.MetricHintRate]
			if _, ok := m[event.MetricHintRate]; !ok || rate < 0 || rate > 1 || judged+unjudged > 4 || malformed > 2*4 || math.IsNaN(m[event.MetricLoss]) {
				t.Errorf("step %d: hint_rate %v, judged %v, malformed %v, unjudged %v, loss %v", v.Step, rate, judged, malformed, unjudged, m[event.MetricLoss])
			}
			t.Logf("step %d: hint_rate %.3f, prm_judged %v, prm_malformed %v, prm_unjudged %v", v.Step, rate, judged, malformed, unjudged)
		}
	}
	if phases != 2 || steps != 2 || len(trajs) != 8 {
		t.Fatalf("%d PRM phases, %d steps, %d trajectories; want 2, 2, 8", phases, steps, len(trajs))
	}
	for _, tr := range trajs {
		if tr.PRM == nil || tr.PRM.Replies != 2 || tr.PRM.Status == "" {
			t.Errorf("trajectory %s/%d: PRM %+v; want a judgement of 2 replies", tr.TaskID, tr.Sample, tr.PRM)
		}
	}
}

// TestPRMEndpointKilledMidStep serves the PRM through prm.endpoint from this project's own
// OpenAI-compatible server (engine/serve, as `agentrl-tui serve` runs it) and kills the server
// after its first two replies, mid-step: the step goes on, the trajectories the PRM could not
// judge counted as unjudged.
func TestPRMEndpointKilledMidStep(t *testing.T) {
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	judge, err := model.New(backend, model.RandomParams(tinyConfig(tok), 3, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := rollout.New(judge, rollout.Config{Slots: 2, MaxLen: 2048, Decode: func(ids []int32) string { return tok.Decode(ids, false) }})
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	srv, err := serve.New(gen, tok, serve.Options{ModelName: "judge", MaxNewTokens: 8, Open: true, Preempt: true, Sampling: serve.Sampling{Temperature: 0.6}})
	if err != nil {
		t.Fatal(err)
	}
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The PRM's requests reach the server one at a time through this door, which kills the
	// server when the third arrives.
	door := servetest.NewDoor(t, base, 3, func() { srv.Close() })
	start := time.Now()
	c, _, events := tinyRun(t, noEval(map[string]string{"run.max_steps": "1", "hinter.kind": "none", "algorithm.name": "hybrid",
		"prm.kind": "model", "prm.endpoint": door.URL, "prm.model": "judge", "prm.timeout": "5s", "prm.retries": "1",
		"prm.max_new_tokens": "16", "prm.api_key_env": ""}))
	var m map[event.Metric]float64
	unjudged := 0
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.StepMetrics:
			m = v.Metrics
		case event.Trajectory:
			if v.PRM != nil && v.PRM.Status == event.PRMUnjudged {
				unjudged++
				if !strings.Contains(v.PRM.Why, "2 tries") {
					t.Errorf("unjudged without the reason: %q", v.PRM.Why)
				}
			}
		}
	}
	if m == nil {
		t.Fatal("the step did not finish")
	}
	if answered := door.Answered(); answered != 2 || m[event.MetricPRMUnjudged] != 2 || unjudged != 2 || m[event.MetricPRMJudged]+m[event.MetricPRMMalformed] != 2 {
		t.Errorf("answered %d, metrics judged %v, malformed %v, unjudged %v (trajectories unjudged %d); want 2 answered, 2 unjudged",
			answered, m[event.MetricPRMJudged], m[event.MetricPRMMalformed], m[event.MetricPRMUnjudged], unjudged)
	}
	t.Logf("step done in %s with the PRM killed after 2 replies", time.Since(start).Round(time.Millisecond))
}

// TestFolderPRMRuns: prm.model naming a folder judges with weights and a tokenizer of its own
// (the built-in model's, loaded apart from the policy and the reference), moved onto the device
// for the PRM phase only.
func TestFolderPRMRuns(t *testing.T) {
	dir := filepath.Join("..", model.BuiltinSourceDir)
	over := builtinPRM()
	over["run.max_steps"], over["prm.model"], over["prm.samples"] = "1", dir, "1"
	c, events := builtinRunWith(t, over, func(o *Options) {
		var err error
		if o.PRM, err = model.Load(o.Policy.Backend, dir, model.Options{}); err != nil {
			t.Fatal(err)
		}
		o.PRMTokenizer = testTokenizer(t)
	})
	if c.dev.PRM == nil || c.prmGen == nil {
		t.Fatalf("the PRM's own weights (%v) and engine (%v) are not set", c.dev.PRM != nil, c.prmGen != nil)
	}
	judged := 0
	for _, e := range runEvents(t, c, events) {
		if v, ok := e.(event.Trajectory); ok && v.PRM != nil && v.PRM.Replies == 1 {
			judged++
		}
	}
	if judged != 4 {
		t.Errorf("%d trajectories with a PRM judgement; want 4", judged)
	}
}
