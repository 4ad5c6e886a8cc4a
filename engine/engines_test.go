package engine

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/residency"
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
// engine: the probe after each push within f32's tolerance, the engine's samples trained with the
// decoupled objective, tokens/s from the engine's tokens. A run whose self hinter decodes the
// policy here keeps the local engine.
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
		// The engine's samples get the decoupled objective: the proximal forward ran, and the
		// engine's mismatch with the trainer is measured there (f32 weights: rounding only).
		if _, ok := m[event.MetricProximalSeconds]; !ok || m[event.MetricLogProbDiffMax] > 1e-3 {
			t.Errorf("step %d: proximal_s present %v, logprob_diff_max %v; want the decoupled objective's forward and a mismatch ≤ 1e-3", i+1, ok, m[event.MetricLogProbDiffMax])
		}
		if m[event.MetricTokensPerSecond] <= 0 {
			t.Errorf("step %d: tokens_per_second %v; want the engine's rate", i+1, m[event.MetricTokensPerSecond])
		}
	}
	if served() == 0 {
		t.Error("the engine generated nothing")
	}

	// bf16 weights on the engine: a rounded policy sampled the tokens; the mismatch the trainer
	// measures is the rounding's, not the rewritten batch's zero.
	b, _, bevents := tinyRun(t, noEval(map[string]string{"rollout.engines": "serve " + base, "run.max_steps": "1"}))
	bm := trainedSteps(t, b, bevents, 1)[0]
	if bm[event.MetricLogProbDiffMax] < 1e-5 || bm[event.MetricLogProbDiffMean] <= 0 || bm[event.MetricLogProbDiffMean] > bm[event.MetricLogProbDiffMax] {
		t.Errorf("bf16 engine: metrics %v; want logprob_diff_max ≥ 1e-5 and a mean within it (the engine's rounding, measured)", bm)
	} else {
		t.Logf("bf16 engine: logprob_diff max %.3g, mean %.3g", bm[event.MetricLogProbDiffMax], bm[event.MetricLogProbDiffMean])
	}

	self := noEval(map[string]string{"rollout.engines": "serve " + base, "hinter.kind": "self", "run.max_steps": "1"})
	k, _, _ := tinyRun(t, self)
	if k.gen == nil || k.dev.Infer == nil {
		t.Errorf("hinter.kind self with rollout.engines: generator %v, inference copy %v; want the local engine kept for the judge", k.gen != nil, k.dev.Infer != nil)
	}
}

// holdingProxy forwards requests to the engine at base, except that, until the weight push after
// step 1 (the second), a /generate request of token ids that does not extend the prompt of one of
// the first two tasks it saw is held until its client gives up (the partial phase's pause cancels
// it). So step 1's two groups of those tasks finish and the other groups' trajectories are all
// held when the phase pauses; later steps pass.
func holdingProxy(t *testing.T, base string) (url string, held func() int) {
	base = strings.TrimSuffix(base, "/v1")
	var mu sync.Mutex
	var prompts [][]int32
	n, pushes := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var q struct {
			InputIDs []int32 `json:"input_ids"`
		}
		if r.URL.Path == "/generate" && json.Unmarshal(body, &q) == nil && len(q.InputIDs) > 0 { // not the probe (text)
			mu.Lock()
			hold := pushes < 2 && !slices.ContainsFunc(prompts, func(p []int32) bool { return len(q.InputIDs) >= len(p) && slices.Equal(q.InputIDs[:len(p)], p) })
			if hold && len(prompts) < 2 {
				prompts, hold = append(prompts, q.InputIDs), false
			}
			if hold {
				n++
			}
			mu.Unlock()
			if hold {
				<-r.Context().Done()
				return
			}
		}
		if r.URL.Path == "/update_weights_from_disk" {
			mu.Lock()
			pushes++
			mu.Unlock()
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestPartialRolloutOnEngines: partial rollouts on a remote engine. In step 1 the engine holds the
// requests of two of the four groups in flight until the phase pauses: the two others finish and
// train, the held requests are cancelled (not counted against the engine) and their four
// trajectories pause; step 2 resumes them on the engine under the new weights, and the batch's
// older tokens get the decoupled objective.
func TestPartialRolloutOnEngines(t *testing.T) {
	base, _ := servePolicy(t)
	proxy, held := holdingProxy(t, base)
	c, _, events := tinyRun(t, noEval(map[string]string{"rollout.engines": "serve " + proxy, "rollout.remote.weights_dtype": "f32",
		"run.max_steps": "2", "rollout.partial.enabled": "true", "rollout.partial.over_sample": "2", "rollout.partial.max_staleness": "2"}))
	steps := trainedSteps(t, c, events, 2)
	if steps[0][event.MetricPaused] != 4 || steps[1][event.MetricResumed] != 4 || held() == 0 {
		t.Errorf("step 1 paused %v, step 2 resumed %v, requests held %d; want 4, 4 and some", steps[0][event.MetricPaused], steps[1][event.MetricResumed], held())
	}
	for i, m := range steps {
		if m[event.MetricEngineFailovers] != 0 || m[event.MetricEnginesDown] != 0 {
			t.Errorf("step %d: failovers %v, engines down %v; a cancelled request is not the engine's failure", i+1, m[event.MetricEngineFailovers], m[event.MetricEnginesDown])
		}
	}
}

// TestLoRAOnEngines: a LoRA run on an engine that serves the plain model: each push writes the
// adapters merged into the base (the engine loads a plain folder), and after every update the
// engine's probe equals the trainer's, adapters and all, within f32's tolerance.
func TestLoRAOnEngines(t *testing.T) {
	base, _ := servePolicy(t)
	over := noEval(map[string]string{"rollout.engines": "serve " + base, "rollout.remote.weights_dtype": "f32", "run.max_steps": "2",
		"train.lora.rank": "4", "train.lora.targets": "q_proj,v_proj,up_proj", "train.lr": "0.05"})
	c, events := tinyRunWith(t, nil, over, func(o *Options) {
		backend, err := device.NewGo(device.GoConfig)
		if err != nil {
			t.Fatal(err)
		}
		if o.Policy, o.Reference, err = residency.LoRAModels(backend, model.RandomParams(tinyConfig(testTokenizer(t)), 1, 0.02), dtypes.Float32, o.Recipe); err != nil {
			t.Fatal(err)
		}
	})
	steps := trainedSteps(t, c, events, 2)
	for i, m := range steps {
		if d, ok := m[event.MetricEngineProbeDiffMax]; !ok || d > 1e-3 {
			t.Errorf("step %d: engine_probe_diff_max %v (present %v); want ≤ 1e-3: the engine serves the merged policy", i+1, d, ok)
		}
	}
	// The adapters moved: the merged policy is not the base the engine started on.
	var moved float64
	for i, s := range c.opts.Policy.Params.Specs {
		if strings.HasSuffix(s.Name, ".lora_B.weight") {
			for _, v := range tensors.MustCopyFlatData[float32](c.opts.Policy.Params.Values[i]) {
				moved = max(moved, math.Abs(float64(v)))
			}
		}
	}
	if moved == 0 {
		t.Error("no adapter moved: the test proves nothing")
	}
}

// trainedSteps runs c and returns the metrics of its trained steps, which must be want.
func trainedSteps(t *testing.T, c *Controller, events chan event.Event, want int) []map[event.Metric]float64 {
	t.Helper()
	var steps []map[event.Metric]float64
	for _, e := range runEvents(t, c, events) {
		if v, ok := e.(event.StepMetrics); ok && v.Metrics[event.MetricUpdates] > 0 {
			steps = append(steps, v.Metrics)
		}
	}
	if len(steps) != want {
		t.Fatalf("%d trained steps; want %d", len(steps), want)
	}
	return steps
}
