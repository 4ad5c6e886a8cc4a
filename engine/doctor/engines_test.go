package doctor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"agentrl/engine/remote"
	"agentrl/recipes"
)

// TestEngines: each engine of rollout.engines is a line of its own, in order; the key comes from
// the engine's KEY_ENV, else rollout.remote.api_key_env; the probe ids are the policy tokenizer's;
// each failed step fails the recipe with its own fix, worded by whether a key was sent.
func TestEngines(t *testing.T) {
	m := cpuBox()
	m.vars = map[string]string{"AGENTRL_ENGINE_API_KEY": "shared", "OWN_KEY": "own"}
	env := m.env()
	var mu sync.Mutex
	sent := map[string]string{} // URL → key
	var probeIDs []int32
	env.Engine = func(_ context.Context, ep remote.Endpoint, ids []int32) remote.Diagnosis {
		mu.Lock()
		sent[ep.URL], probeIDs = ep.APIKey, ids
		mu.Unlock()
		d := remote.Diagnosis{Engine: fmt.Sprintf("%s engine %s", ep.Kind, ep.URL)}
		switch ep.URL {
		case "http://ok:1":
			d.Model, d.Tokens = "Qwen/Qwen3-4B", len(ids)
		case "http://down:1":
			d.Failed, d.Err = remote.StepReach, fmt.Errorf("GET /health: connection refused")
		case "http://key:1", "http://nokey:1":
			d.Failed, d.Err = remote.StepKey, fmt.Errorf("HTTP 401")
		case "http://kind:1":
			d.Failed, d.Err = remote.StepModel, fmt.Errorf("GET /get_model_info answers HTTP 404")
		case "http://tok:1":
			d.Failed, d.Err = remote.StepProbe, fmt.Errorf("13 tokens, not 12: %w", remote.ErrOtherTokenizer)
		case "http://vok:1": // vLLM started on the weights folder
			d.Model, d.Root, d.Tokens = "policy (/shared/policy)", "/shared/policy", len(ids)
		case "http://vdir:1": // vLLM started elsewhere
			d.Model, d.Root, d.Tokens = "policy (/srv/qwen3-4b)", "/srv/qwen3-4b", len(ids)
		}
		return d
	}
	r := defaults(t, func(r *recipes.Recipe) {
		r.Rollout.Engines = []string{"sglang http://ok:1 OWN_KEY", "vllm http://down:1", "serve http://key:1", "serve http://nokey:1 UNSET_KEY",
			"sglang http://kind:1", "sglang http://tok:1", "vllm http://vok:1", "vllm http://vdir:1"}
		r.Rollout.Remote.WeightsDir = "/shared/policy"
	})
	rep := Run(context.Background(), Options{Recipe: r}, env)
	if len(probeIDs) == 0 {
		t.Fatal("the engines got no probe ids; want the policy tokenizer's ids of remote.ProbeText")
	}
	for url, want := range map[string]string{"http://ok:1": "own", "http://down:1": "shared", "http://nokey:1": ""} {
		if sent[url] != want {
			t.Errorf("%s got key %q; want %q (its KEY_ENV, else rollout.remote.api_key_env)", url, sent[url], want)
		}
	}
	for _, tc := range []struct {
		name   string
		status Status
		detail string
		fix    string
	}{
		{"engine 1", OK, "sglang engine http://ok:1: reachable, key $OWN_KEY accepted, serves Qwen/Qwen3-4B; tokenises the probe as the policy does (" +
			fmt.Sprint(len(probeIDs)) + " tokens)", ""},
		{"engine 2", Fail, "vllm engine http://down:1: reach failed: GET /health: connection refused", "start the server"},
		{"engine 3", Fail, "key failed", "$AGENTRL_ENGINE_API_KEY holds a key this server refuses"},
		{"engine 4", Fail, "key failed", "export UNSET_KEY=the key the server was started with"},
		{"engine 5", Fail, "model failed", "rollout.engines says sglang for this server: write its kind"},
		{"engine 6", Fail, "probe failed", "start the server on the policy's folder"},
		{"engine 7", OK, "vllm engine http://vok:1: reachable, key $AGENTRL_ENGINE_API_KEY accepted, serves policy (/shared/policy); tokenises", ""},
		{"engine 8", Fail, "vllm engine http://vdir:1: reachable, key $AGENTRL_ENGINE_API_KEY accepted, serves policy (/srv/qwen3-4b); it would never load the run's updates",
			"it was started on /srv/qwen3-4b, but the policy is written into /shared/policy (rollout.remote.weights_dir): vLLM's reload_weights re-reads the folder it was started on"},
	} {
		c, ok := rep.Find(tc.name)
		if !ok {
			t.Errorf("no %s line in %v", tc.name, rep.Checks)
			continue
		}
		if c.Section != SecEngines || c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
			t.Errorf("%s: %s %s %q → %q; want %s with %q → %q", tc.name, c.Section, c.Status, c.Detail, c.Fix, tc.status, tc.detail, tc.fix)
		}
	}
	if rep.CanRun {
		t.Error("can_run with six engines failing; want not (a run probes every engine before its first rollout)")
	}
	var b strings.Builder
	rep.Write(&b)
	if !strings.Contains(b.String(), "Rollout engines (rollout.engines)\n  OK    engine 1") {
		t.Errorf("report:\n%s\nwant a Rollout engines section, engine 1 first", b.String())
	}

	// A vLLM engine with rollout.remote.weights_dir left empty: the run would write beside its store.
	rep = Run(context.Background(), Options{Recipe: defaults(t, func(r *recipes.Recipe) { r.Rollout.Engines = []string{"vllm http://vok:1"} })}, env)
	if c, ok := rep.Find("engine 1"); !ok || c.Status != Fail || !strings.Contains(c.Fix, "set rollout.remote.weights_dir: /shared/policy") {
		t.Errorf("vLLM with weights_dir empty: %+v; want a failure saying to set rollout.remote.weights_dir: /shared/policy", c)
	}

	// no engines: no section
	rep = Run(context.Background(), Options{Recipe: defaults(t, nil)}, env)
	for _, c := range rep.Checks {
		if c.Section == SecEngines {
			t.Errorf("without rollout.engines: %+v; want no engines line", c)
		}
	}
}
