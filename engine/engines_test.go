package engine

import (
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/serve"
)

// servePolicy serves a copy of tinyRun's random policy as `agentrl-tui serve` does, the engine
// endpoints included (generation, weight reload from a folder, the probe's scores), and returns
// its base URL and how many generation requests it answered so far.
func servePolicy(t *testing.T) (string, func() int64) {
	t.Helper()
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(backend, model.RandomParams(tinyConfig(tok), 1, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := rollout.New(m, rollout.Config{Slots: 4, MaxLen: 256, Truncation: true, Decode: func(ids []int32) string { return tok.Decode(ids, false) }})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(gen, tok, serve.Options{ModelName: "policy", Open: true, Preempt: true, Score: m.NextLogProbs, Reload: m.Params.ReloadFrom})
	if err != nil {
		t.Fatal(err)
	}
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); gen.Close(); m.Close() })
	return base, func() int64 { return gen.Stats().Tokens }
}

// TestRemoteRolloutHoldsNoLocalEngine: with rollout.engines and nothing else decoding the policy
// here, the run builds no local generator, KV cache or inference copy (as its memory plan counts:
// ledger.LocalEngineFor), its ledger events show none, and its two steps and evaluations go to the
// engine: the probe after each push within f32's tolerance, tokens/s from the engine's tokens. A
// run whose self hinter decodes the policy here keeps the local engine.
func TestRemoteRolloutHoldsNoLocalEngine(t *testing.T) {
	base, served := servePolicy(t)
	over := noEval(map[string]string{"rollout.engines": "serve " + base, "rollout.remote.weights_dtype": "f32"})
	over["eval.every"], over["eval.at_start"] = "1", "true" // the evaluations generate on the engine too
	c, _, events := tinyRun(t, over)
	if c.gen != nil || c.dev.Infer != nil || c.evalGen != nil {
		t.Fatalf("generator %v, inference copy %v, evaluation generator %v; want none with rollout.engines", c.gen != nil, c.dev.Infer != nil, c.evalGen != nil)
	}
	var steps []map[event.Metric]float64
	ledgers, evals := 0, 0
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.StepMetrics:
			if v.Metrics[event.MetricLoss] != 0 || v.Metrics[event.MetricUpdates] > 0 {
				steps = append(steps, v.Metrics)
			}
		case event.Ledger:
			ledgers++
			for _, name := range []string{"KV cache", "inference weights"} {
				if n, ok := v.Components[name]; ok {
					t.Errorf("a ledger event holds %s (%d bytes) with rollout.engines", name, n)
				}
			}
		case event.Eval:
			evals++
		}
	}
	if len(steps) != 2 || ledgers == 0 || evals == 0 {
		t.Fatalf("%d trained steps, %d ledger events, %d evaluations; want 2 and some of each", len(steps), ledgers, evals)
	}
	for i, m := range steps {
		if d, ok := m[event.MetricEngineProbeDiffMax]; !ok || d > 1e-3 {
			t.Errorf("step %d: engine_probe_diff_max %v (present %v); want ≤ 1e-3 (f32 weights)", i+1, d, ok)
		}
		if m[event.MetricTokensPerSecond] <= 0 {
			t.Errorf("step %d: tokens_per_second %v; want the engine's rate", i+1, m[event.MetricTokensPerSecond])
		}
	}
	if served() == 0 {
		t.Error("the engine generated nothing")
	}

	self := noEval(map[string]string{"rollout.engines": "serve " + base, "hinter.kind": "self", "run.max_steps": "1"})
	k, _, _ := tinyRun(t, self)
	if k.gen == nil || k.dev.Infer == nil {
		t.Errorf("hinter.kind self with rollout.engines: generator %v, inference copy %v; want the local engine kept for the judge", k.gen != nil, k.dev.Infer != nil)
	}
}
