package doctor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"agentrl/engine/remote"
	"agentrl/engine/tokenizer"
)

// engineTimeout bounds the checks of all the engines together.
const engineTimeout = 30 * time.Second

// engines checks each engine of rollout.engines, a line each: reachable, its key accepted, the
// model it serves, and the probe prompt's token ids against the policy's tokenizer. A run starts
// only when every engine passes all four (it probes each before the first rollout), so a failed
// step fails the recipe.
func (d *doc) engines(ctx context.Context) {
	r := d.o.Recipe
	if r == nil || d.o.RecipeErr != nil {
		return
	}
	specs := r.EngineSpecs()
	if len(specs) == 0 {
		return
	}
	if d.env.Engine == nil {
		d.add(SecEngines, "engines", Info, fmt.Sprintf("%d engine(s) not checked", len(specs)), "")
		return
	}
	var ids []int32
	noProbe := ""
	if d.policyDir == "" {
		noProbe = "; the probe's tokens not checked: the policy's model folder is wrong (see model above)"
	} else if tok, err := tokenizer.Load(d.policyDir); err != nil {
		noProbe = fmt.Sprintf("; the probe's tokens not checked: the policy's tokenizer: %v", err)
	} else {
		ids = tok.Encode(remote.ProbeText)
	}
	getenv := d.env.Device.Getenv
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	out := make([]remote.Diagnosis, len(specs))
	keyEnvs := make([]string, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		keyEnvs[i] = s.KeyEnv
		if keyEnvs[i] == "" {
			keyEnvs[i] = r.Rollout.Remote.APIKeyEnv
		}
		ep := remote.Endpoint{URL: s.URL, Kind: remote.Kind(s.Kind)}
		if keyEnvs[i] != "" && getenv != nil {
			ep.APIKey = getenv(keyEnvs[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = d.env.Engine(ctx, ep, ids)
		}()
	}
	wg.Wait()
	for i, g := range out {
		keyEnv, sent := keyEnvs[i], keyEnvs[i] != "" && getenv != nil && getenv(keyEnvs[i]) != ""
		name := fmt.Sprintf("engine %d", i+1)
		if g.Failed != "" {
			d.add(SecEngines, name, Fail, fmt.Sprintf("%s: %s failed: %v", g.Engine, g.Failed, g.Err), engineFix(g, specs[i].Kind, keyEnv, sent, d.policyDir))
			continue
		}
		key := "no key needed"
		if sent {
			key = "key $" + keyEnv + " accepted"
		}
		probe := fmt.Sprintf("tokenises the probe as the policy does (%d tokens)", g.Tokens)
		if ids == nil {
			probe = noProbe[2:]
		}
		if err := remote.ReloadFolderErr(remote.Kind(specs[i].Kind), g.Root, r.Rollout.Remote.WeightsDir); err != nil {
			d.add(SecEngines, name, Fail, fmt.Sprintf("%s: reachable, %s, serves %s; it would never load the run's updates", g.Engine, key, g.Model), "it "+err.Error())
			continue
		}
		d.add(SecEngines, name, OK, fmt.Sprintf("%s: reachable, %s, serves %s; %s", g.Engine, key, g.Model, probe), "")
	}
}

// engineFix is what to do about an engine that failed a step.
func engineFix(g remote.Diagnosis, kind, keyEnv string, sent bool, policyDir string) string {
	switch g.Failed {
	case remote.StepReach:
		return "start the server (docs/engines.md gives each kind's launch command) or correct its URL in rollout.engines; GET URL/health must answer from this machine"
	case remote.StepKey:
		switch {
		case keyEnv == "":
			return `name the variable holding the server's key (its --api-key): rollout.remote.api_key_env, or "KIND URL KEY_ENV" in rollout.engines`
		case !sent:
			return fmt.Sprintf("export %s=the key the server was started with (its --api-key)", keyEnv)
		}
		return fmt.Sprintf("$%s holds a key this server refuses: set it to the server's --api-key, or give this engine its own variable (\"KIND URL KEY_ENV\")", keyEnv)
	case remote.StepModel:
		return fmt.Sprintf("rollout.engines says %s for this server: write its kind (sglang, vllm or serve) before the URL; docs/engines.md lists the endpoints each kind needs", kind)
	}
	if errors.Is(g.Err, remote.ErrOtherTokenizer) {
		return fmt.Sprintf("start the server on the policy's folder (%s), so that it serves the policy's tokenizer; the trainer then pushes each update into rollout.remote.weights_dir", policyDir)
	}
	return "the server must score the probe as docs/engines.md describes for its kind (SGLang: /generate with return_logprob and logprob_start_len; vLLM 0.10.2 or later: return_token_ids and prompt_logprobs)"
}
