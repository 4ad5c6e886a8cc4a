package recipes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file holds what env.external (an agent program per trajectory) adds to the schema: its
// validation, and the mapping fields ({NAME: value}, kStringMap) that its env introduced. Mapping
// fields bypass viper, which lower-cases map keys: the loader keeps them in loader.maps.

// checkMapNode checks a mapping field's YAML value: plain names, each once, with scalar values.
// Entries are reported as key.NAME and mark key as bad.
func checkMapNode(v *yaml.Node, key string, l *loader) string {
	if v.Kind != yaml.MappingNode {
		return describe(v) + "; want " + kStringMap.want()
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		name, val := v.Content[i], v.Content[i+1]
		if val.Kind == yaml.AliasNode && val.Alias != nil {
			val = val.Alias
		}
		var msg string
		switch {
		case name.Kind != yaml.ScalarNode || name.Value == "":
			msg = "names must be plain words such as NODE_ENV"
		case seen[name.Value]:
			msg = "defined twice; keep one"
		case val.Kind != yaml.ScalarNode || val.ShortTag() == "!!null":
			msg = describe(val) + "; want a value such as production (quote it to keep it as written)"
		}
		seen[name.Value] = true
		if msg != "" {
			l.add(key+"."+name.Value, name.Line, msg)
			l.bad[key] = true
		}
	}
	return ""
}

// mapOf returns a checked mapping node's names and values as written.
func mapOf(v *yaml.Node) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		val := v.Content[i+1]
		if val.Kind == yaml.AliasNode && val.Alias != nil {
			val = val.Alias
		}
		m[v.Content[i].Value] = val.Value
	}
	return m
}

// parseMap parses a mapping field from the environment or an override: NAME=value,NAME2=value2.
func parseMap(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not a comma-separated list of NAME=value such as NODE_ENV=production,DEBUG=1", s)
		}
		m[name] = val
	}
	return m, nil
}

// external checks env.external: always its values, and with env.name external that the agent's
// program is found and that the run is not asked to be reproducible.
func (c *checker) external() {
	x := c.r.Env.External
	c.auto("env.external.workers", x.Workers)
	if x.Workers > 1024 {
		c.failf("env.external.workers", "%d is out of range; want auto or 1 to 1024", int(x.Workers))
	}
	if x.Timeout <= 0 || x.Timeout > 24*time.Hour {
		c.failf("env.external.timeout", "%s is out of range; want a duration above 0s and at most 24h, such as 5m", x.Timeout)
	}
	names := make([]string, 0, len(x.Env))
	for name := range x.Env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch name {
		case "OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTRL_TASK":
			c.failf("env.external.env", "sets %s, which the workbench sets for each trajectory (the endpoint, the trajectory's key, the task); remove it", name)
		default:
			if !isEnvName(name) {
				c.failf("env.external.env", "%q is not an environment variable name (letters, digits and '_', not starting with a digit)", name)
			}
		}
	}
	if c.r.Env.Name != "external" {
		if len(x.Command) > 0 {
			c.fail([]string{"env.external.command", "env.name"}, fmt.Sprintf(
				"env.external.command is set but env.name is %s; set env.name: external to train through the agent, or remove the command", c.r.Env.Name))
		}
		return
	}
	if c.r.Rollout.Deterministic {
		is := "rollout.deterministic is true"
		if _, src := c.loc.at("rollout.deterministic"); src == "default" {
			is += " (the default)"
		}
		c.fail([]string{"rollout.deterministic", "env.name"}, is+
			", which env.name external cannot honour: an external agent calls the model at wall-clock times, so which requests share a decode step depends on timing and the run cannot be reproduced from its seed; set rollout.deterministic: false")
	}
	dirOK := true
	if x.Dir != "" {
		switch st, err := os.Stat(x.Dir); {
		case err != nil:
			dirOK = false
			c.failf("env.external.dir", "%q does not exist (relative paths are relative to the current directory); give the agent's working folder, or leave it empty for the current one", x.Dir)
		case !st.IsDir():
			dirOK = false
			c.failf("env.external.dir", "%q is a file; give the agent's working folder", x.Dir)
		}
	}
	switch {
	case len(x.Command) == 0:
		c.fail([]string{"env.external.command", "env.name"},
			"env.external.command is empty but env.name is external; give the agent's argv, e.g. [node, examples/retool-agent/agent.mjs]")
	case x.Command[0] == "":
		c.failf("env.external.command", "starts with an empty program name; give the program first, e.g. [node, agent.mjs]")
	case !strings.Contains(x.Command[0], "/"):
		if _, err := exec.LookPath(x.Command[0]); err != nil {
			c.failf("env.external.command", "program %q is not found on PATH; install it, or give its path (relative to env.external.dir)", x.Command[0])
		}
	case dirOK:
		path := x.Command[0]
		if !filepath.IsAbs(path) {
			path = filepath.Join(x.Dir, path)
		}
		switch st, err := os.Stat(path); {
		case err != nil:
			c.failf("env.external.command", "program %q does not exist; give its path relative to env.external.dir (%q, or the current directory when empty), or an absolute one", path, x.Dir)
		case st.IsDir() || st.Mode()&0o111 == 0:
			c.failf("env.external.command", "program %q is not an executable file; make it executable (chmod +x) or run it through its interpreter, e.g. [node, %s]", path, x.Command[0])
		}
	}
}
