package recipes

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Remote tunes generation on rollout.engines.
type Remote struct {
	// APIKeyEnv names the variable holding the engines' API key (an engine's own KEY_ENV wins);
	// unset or empty: no key is sent. Never the key itself.
	APIKeyEnv string `mapstructure:"api_key_env" json:"api_key_env"`
	// WeightsDir is the folder the policy is written into after each update, for the engines to
	// load (a vLLM engine must have been started on it); "": engines/RUN next to the store.
	WeightsDir string `mapstructure:"weights_dir" json:"weights_dir"`
	// WeightsDType is the dtype the weights are written in: bf16 (what the servers run) or f32.
	WeightsDType string `mapstructure:"weights_dtype" json:"weights_dtype"`
	// Push is how the engines get the weights: disk (they read WeightsDir, a folder they share
	// with the trainer) or http (the files are sent to each engine; serve engines only).
	Push string `mapstructure:"push" json:"push,omitempty"`
	// Timeout bounds one generation request or weight reload; an engine past it has stalled and
	// its trajectories go on elsewhere.
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
	// ProbeTolerance is the most a probe token's log-prob on an engine may differ from the
	// trainer's before the stale-weights alarm; 0: by weights_dtype (bf16 0.25, f32 1e-3).
	ProbeTolerance float64 `mapstructure:"probe_tolerance" json:"probe_tolerance"`
}

// EngineSpec is one entry of rollout.engines.
type EngineSpec struct {
	Kind, URL, KeyEnv string
}

// EngineKinds are the kinds an engine may be.
var EngineKinds = []string{"sglang", "vllm", "serve"}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEngine reads "KIND URL [KEY_ENV]".
func ParseEngine(s string) (EngineSpec, error) {
	parts := strings.Fields(s)
	if len(parts) < 2 || len(parts) > 3 {
		return EngineSpec{}, fmt.Errorf("%q is not \"KIND URL [KEY_ENV]\", e.g. \"sglang http://10.0.0.5:30000\"", s)
	}
	e := EngineSpec{Kind: parts[0], URL: parts[1]}
	if len(parts) == 3 {
		e.KeyEnv = parts[2]
	}
	ok := false
	for _, k := range EngineKinds {
		ok = ok || e.Kind == k
	}
	if !ok {
		return e, fmt.Errorf("%q: kind %q is not one of %s", s, e.Kind, strings.Join(EngineKinds, ", "))
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return e, fmt.Errorf("%q: %q is not an http(s) URL such as http://10.0.0.5:30000", s, e.URL)
	}
	if e.KeyEnv != "" && !envName.MatchString(e.KeyEnv) {
		return e, fmt.Errorf("%q: %q is not an environment variable name (write the variable's name, never the key)", s, e.KeyEnv)
	}
	return e, nil
}

// EngineSpecs are rollout.engines parsed (validated with the recipe).
func (r *Recipe) EngineSpecs() []EngineSpec {
	var out []EngineSpec
	for _, s := range r.Rollout.Engines {
		if e, err := ParseEngine(s); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// ProbeTolerance is rollout.remote.probe_tolerance with 0 resolved by the weights' dtype: bf16
// weights differ from the trainer's float32 ones by rounding, which moves a small model's
// log-probs by up to a few tenths of a nat.
func (r *Recipe) ProbeTolerance() float64 {
	if t := r.Rollout.Remote.ProbeTolerance; t > 0 {
		return t
	}
	if r.Rollout.Remote.WeightsDType == "f32" {
		return 1e-3
	}
	return 0.25
}

// engines checks rollout.engines and rollout.remote.
func (c *checker) engines() {
	r := c.r.Rollout
	for i, s := range r.Engines {
		if _, err := ParseEngine(s); err != nil {
			c.failf("rollout.engines", "entry %d: %v", i, err)
		}
	}
	rm := r.Remote
	if k := rm.APIKeyEnv; k != "" && !envName.MatchString(k) {
		c.failf("rollout.remote.api_key_env", "%q is not an environment variable name; write the name of the variable that holds the key, never the key", k)
	}
	if rm.WeightsDType != "bf16" && rm.WeightsDType != "f32" {
		c.failf("rollout.remote.weights_dtype", "%q is not one of bf16, f32", rm.WeightsDType)
	}
	if rm.Push != "disk" && rm.Push != "http" {
		c.failf("rollout.remote.push", "%q is not one of disk, http", rm.Push)
	}
	if rm.Timeout < time.Second || rm.Timeout > time.Hour {
		c.failf("rollout.remote.timeout", "%s is out of range; want 1s to 1h", rm.Timeout)
	}
	if rm.ProbeTolerance < 0 || rm.ProbeTolerance > 10 {
		c.failf("rollout.remote.probe_tolerance", "%g is out of range; want 0 (by weights_dtype) to 10 nats", rm.ProbeTolerance)
	}
	if len(r.Engines) == 0 {
		return
	}
	if rm.Push == "http" {
		for i, s := range r.Engines {
			if e, err := ParseEngine(s); err == nil && e.Kind != "serve" {
				c.failf("rollout.remote.push", "http: entry %d of rollout.engines is a %s engine, which loads weights only from a folder it can read (SGLang's tensor route takes pickled torch tensors, vLLM has none); use push: disk with a shared weights_dir, or serve engines", i, e.Kind)
			}
		}
	}
	if c.r.Env.Name == "external" {
		c.fail([]string{"rollout.engines", "env.name"}, "an external agent talks to this process's own endpoint; rollout.engines serves env.name retool only")
	}
}
