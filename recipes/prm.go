package recipes

import (
	_ "embed"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultPRMPrompt is the default prompt of prm.kind model (recipes/prm-retool.txt), in the
// seed's convention: the whole trajectory with its tool outputs, a verdict per step, then one
// bridge thought as \boxed{…} or \boxed{-1} when no hint is needed.
//
//go:embed prm-retool.txt
var DefaultPRMPrompt string

// PRMPlaceholders are the names prm.prompt's template may use, each in braces.
var PRMPlaceholders = []string{"problem", "answer", "outcome", "steps", "trajectory"}

// ResolveFiles reads the file prm.prompt names with "@PATH" (relative to dir, the recipe file's
// folder) into PromptFile; without "@" it clears it.
func (p *PRM) ResolveFiles(dir string) []Problem {
	p.PromptFile = ""
	path, ok := strings.CutPrefix(p.Prompt, "@")
	if !ok {
		return nil
	}
	if path == "" {
		return []Problem{{Field: "prm.prompt", Message: fmt.Sprintf("prm.prompt %q names no file; want @PATH, e.g. @prm-retool.txt", p.Prompt)}}
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return []Problem{{Field: "prm.prompt", Message: fmt.Sprintf("prm.prompt %q: %v (a relative path is relative to the recipe file's folder)", p.Prompt, err)}}
	}
	p.PromptFile = string(data)
	return nil
}

// PromptText is the PRM's prompt template: the file's text for "@PATH", the text itself, or
// DefaultPRMPrompt for "".
func (p PRM) PromptText() string {
	switch {
	case strings.HasPrefix(p.Prompt, "@"):
		return p.PromptFile
	case p.Prompt == "":
		return DefaultPRMPrompt
	}
	return p.Prompt
}

// prm checks prm.kind model's fields (the others are ignored while prm.kind is not model) and
// how the PRM fits with the hinter and the estimator.
func (c *checker) prm() {
	p := c.r.PRM
	a := c.r.Algorithm
	c.oneOf("algorithm.estimator", a.Estimator, "group", "step_wise")
	if a.Estimator == "step_wise" {
		switch {
		case a.Name != "grpo" && a.Name != "hybrid":
			c.fail([]string{"algorithm.estimator", "algorithm.name"}, fmt.Sprintf(
				"algorithm.estimator step_wise adds per-step process rewards to a group advantage, which algorithm.name %s has none of; use grpo or hybrid, or algorithm.estimator: group", a.Name))
		case p.Kind != "model":
			c.fail([]string{"algorithm.estimator", "prm.kind"}, fmt.Sprintf(
				"algorithm.estimator step_wise needs a verdict per step, which only prm.kind model gives (prm.kind is %s); set prm.kind: model, or algorithm.estimator: group", p.Kind))
		case c.r.Env.Name == "external":
			c.failf("algorithm.estimator", "step_wise needs the steps of a ReTool trajectory; env.name external trains one advantage per trajectory, so use algorithm.estimator: group")
		}
	}
	if p.Kind != "model" {
		return
	}
	if c.r.Hinter.Kind != "none" {
		c.fail([]string{"hinter.kind", "prm.kind"}, fmt.Sprintf(
			"hinter.kind %s would write a second hint; with prm.kind model the PRM writes the bridge thoughts, so set hinter.kind: none", c.r.Hinter.Kind))
	}
	switch {
	case strings.TrimSpace(p.Model) == "":
		c.failf("prm.model", "is empty; want reference, policy, a HuggingFace model folder, or with prm.endpoint the model name the endpoint serves")
	case p.Endpoint == "" && p.Model == "reference" && !c.r.UsesReference():
		c.fail([]string{"prm.model", "algorithm.name", "prm.kind"}, fmt.Sprintf(
			"prm.model reference, but algorithm.name %s with kl_coef 0 loads no reference model; use prm.model: policy or a model folder, or algorithm.name: hybrid", a.Name))
	}
	if strings.HasPrefix(p.Prompt, "@") && p.PromptFile == "" {
		c.failf("prm.prompt", "%q was not read (or the file is empty); a recipe built in code calls PRM.ResolveFiles first", p.Prompt)
	} else if text := p.PromptText(); !strings.Contains(text, "{trajectory}") {
		c.failf("prm.prompt", "the template has no {trajectory}, so the PRM would not see the attempt; write {trajectory} where it goes (also {problem}, {answer}, {outcome}, {steps})")
	}
	c.between("prm.samples", p.Samples, 1, 16)
	c.interval("prm.temperature", p.Temperature, 0, 2, false, false)
	c.between("prm.max_new_tokens", p.MaxNewTokens, 16, 32768)
	c.auto("prm.max_input_tokens", p.MaxInputTokens)
	if !p.MaxInputTokens.IsAuto() && p.MaxInputTokens < 256 {
		c.failf("prm.max_input_tokens", "%d is too few for the template and one step; want auto or at least 256", int(p.MaxInputTokens))
	}
	c.auto("prm.kv_slots", p.KVSlots)
	if k := p.APIKeyEnv; k != "" {
		switch {
		case strings.HasPrefix(k, "sk-") || len(k) > 64:
			c.failf("prm.api_key_env", "looks like an API key itself; write the name of the environment variable that holds the key, e.g. OPENAI_API_KEY")
		case !isEnvName(k):
			c.failf("prm.api_key_env", "%q is not an environment variable name (letters, digits and '_', not starting with a digit)", k)
		}
	}
	if p.Endpoint != "" {
		if u, err := url.Parse(p.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.failf("prm.endpoint", "%q is not an http(s) URL such as http://judge:8000/v1", p.Endpoint)
		}
		if p.Timeout < time.Second || p.Timeout > time.Hour {
			c.failf("prm.timeout", "%s is out of range; want a duration from 1s to 1h", p.Timeout)
		}
		c.between("prm.retries", p.Retries, 0, 10)
	}
}
