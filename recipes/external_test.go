package recipes

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// external is a recipe head that selects env.name external with a program found everywhere.
const external = "rollout:\n  deterministic: false\nenv:\n  name: external\n  external:\n"

// TestExternalFields: env.external's errors name the field, the value and what would fix it.
func TestExternalFields(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string
	}{
		{"unknown environment", "env:\n  name: agent\n",
			`bad.yaml:2: env.name: "agent" is not one of retool, external`},
		{"no command", "rollout:\n  deterministic: false\nenv:\n  name: external\n",
			"bad.yaml:4: env.name: env.external.command is empty but env.name is external; give the agent's argv, e.g. [node, examples/retool-agent/agent.mjs]"},
		{"empty program", external + "    command: [\"\", agent.mjs]\n",
			"bad.yaml:6: env.external.command: starts with an empty program name; give the program first, e.g. [node, agent.mjs]"},
		{"program not on PATH", external + "    command: [no-such-agent-program, agent.mjs]\n",
			`bad.yaml:6: env.external.command: program "no-such-agent-program" is not found on PATH; install it, or give its path (relative to env.external.dir)`},
		{"program missing in dir", external + "    command: [./agent.mjs]\n    dir: .\n",
			`bad.yaml:6: env.external.command: program "agent.mjs" does not exist; give its path relative to env.external.dir (".", or the current directory when empty), or an absolute one`},
		{"program not executable", external + "    command: [./recipe.go]\n",
			`bad.yaml:6: env.external.command: program "recipe.go" is not an executable file; make it executable (chmod +x) or run it through its interpreter, e.g. [node, ./recipe.go]`},
		{"dir missing", external + "    command: [sh]\n    dir: no-such-folder\n",
			`bad.yaml:7: env.external.dir: "no-such-folder" does not exist (relative paths are relative to the current directory); give the agent's working folder, or leave it empty for the current one`},
		{"dir a file", external + "    command: [sh]\n    dir: recipe.go\n",
			`bad.yaml:7: env.external.dir: "recipe.go" is a file; give the agent's working folder`},
		{"deterministic by default", "env:\n  name: external\n  external:\n    command: [sh]\n",
			"bad.yaml:2: env.name: rollout.deterministic is true (the default), which env.name external cannot honour: an external agent calls the model at wall-clock times, so which requests share a decode step depends on timing and the run cannot be reproduced from its seed; set rollout.deterministic: false"},
		{"deterministic written", "rollout:\n  deterministic: true\nenv:\n  name: external\n  external:\n    command: [sh]\n",
			"bad.yaml:2: rollout.deterministic: is true, which env.name external cannot honour: an external agent calls the model at wall-clock times, so which requests share a decode step depends on timing and the run cannot be reproduced from its seed; set rollout.deterministic: false"},
		{"timeout zero", external + "    command: [sh]\n    timeout: 0s\n",
			"bad.yaml:7: env.external.timeout: 0s is out of range; want a duration above 0s and at most 24h, such as 5m"},
		{"timeout a number", external + "    command: [sh]\n    timeout: 300\n",
			"bad.yaml:7: env.external.timeout: 300 is a number; want a duration such as 500ms, 5s or 2m"},
		{"timeout too long", external + "    command: [sh]\n    timeout: 48h\n",
			"bad.yaml:7: env.external.timeout: 48h0m0s is out of range; want a duration above 0s and at most 24h, such as 5m"},
		{"no workers", external + "    command: [sh]\n    workers: 0\n",
			"bad.yaml:7: env.external.workers: 0 is out of range; want auto or at least 1"},
		{"too many workers", external + "    command: [sh]\n    workers: 5000\n",
			"bad.yaml:7: env.external.workers: 5000 is out of range; want auto or 1 to 1024"},
		{"reserved variable", external + "    command: [sh]\n    env: {OPENAI_API_KEY: sk-mine}\n",
			"bad.yaml:7: env.external.env: sets OPENAI_API_KEY, which the workbench sets for each trajectory (the endpoint, the trajectory's key, the task); remove it"},
		{"not a variable name", external + "    command: [sh]\n    env: {\"1ST\": x}\n",
			`bad.yaml:7: env.external.env: "1ST" is not an environment variable name (letters, digits and '_', not starting with a digit)`},
		{"variable without a value", external + "    command: [sh]\n    env:\n      DEBUG:\n",
			"bad.yaml:8: env.external.env.DEBUG: has no value; want a value such as production (quote it to keep it as written)"},
		{"variable a list", external + "    command: [sh]\n    env:\n      PATHS: [a, b]\n",
			"bad.yaml:8: env.external.env.PATHS: is a list; want a value such as production (quote it to keep it as written)"},
		{"env a list", external + "    command: [sh]\n    env: [A=1]\n",
			"bad.yaml:7: env.external.env: is a list; want a mapping of names to values such as {NODE_ENV: production}"},
		{"command while env is retool", "env:\n  external:\n    command: [sh]\n",
			"bad.yaml:3: env.external.command: is set but env.name is retool; set env.name: external to train through the agent, or remove the command"},
		{"misspelt field", external + "    comand: [sh]\n",
			"bad.yaml:4: env.name: env.external.command is empty but env.name is external; give the agent's argv, e.g. [node, examples/retool-agent/agent.mjs]\n" +
				"bad.yaml:6: env.external.comand: unknown field; did you mean env.external.command?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := loadInline(t, tc.yaml, Options{IgnoreEnv: true})
			if got != tc.want {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

// TestExternalGood: a full env.external section loads as written, variable names keep their case
// (viper would lower-case them), and the environment and overrides replace the mapping.
func TestExternalGood(t *testing.T) {
	yaml := external + `    command: [sh, -c, 'echo {"reward": 1}']
    dir: .
    workers: 4
    timeout: 90s
    env:
      NODE_OPTIONS: --max-old-space-size=256
      Mixed_Case: 3
      EMPTY: ""
`
	r, errText := loadInline(t, yaml, Options{IgnoreEnv: true})
	if errText != "" {
		t.Fatal(errText)
	}
	want := External{Command: []string{"sh", "-c", `echo {"reward": 1}`}, Dir: ".", Workers: 4, Timeout: 90 * time.Second,
		Env: map[string]string{"NODE_OPTIONS": "--max-old-space-size=256", "Mixed_Case": "3", "EMPTY": ""}}
	if !reflect.DeepEqual(r.Env.External, want) || r.Env.Name != "external" || r.Rollout.Deterministic {
		t.Errorf("got %+v; want %+v", r.Env.External, want)
	}

	t.Setenv("AGENTRL_ENV_EXTERNAL_ENV", "From_Env=1,B=x=y")
	r, errText = loadInline(t, yaml, Options{})
	if errText != "" {
		t.Fatal(errText)
	}
	if want := map[string]string{"From_Env": "1", "B": "x=y"}; !reflect.DeepEqual(r.Env.External.Env, want) {
		t.Errorf("from the environment: got %v; want %v", r.Env.External.Env, want)
	}
	r, errText = loadInline(t, yaml, Options{Overrides: map[string]string{"env.external.env": "Over=1", "env.external.workers": "auto"}})
	if errText != "" {
		t.Fatal(errText)
	}
	if want := map[string]string{"Over": "1"}; !reflect.DeepEqual(r.Env.External.Env, want) || !r.Env.External.Workers.IsAuto() {
		t.Errorf("override: got %v, workers %v; want %v, auto", r.Env.External.Env, r.Env.External.Workers, want)
	}
	t.Setenv("AGENTRL_ENV_EXTERNAL_ENV", "NOEQUALS")
	_, errText = loadInline(t, yaml, Options{})
	if want := `bad.yaml: env.external.env (from $AGENTRL_ENV_EXTERNAL_ENV): "NOEQUALS" is not a comma-separated list of NAME=value such as NODE_ENV=production,DEBUG=1`; errText != want {
		t.Errorf("got %q; want %q", errText, want)
	}
}

func TestExternalHash(t *testing.T) {
	a, b := Default(), Default()
	a.Env.External.Env = map[string]string{"A": "1", "B": "2"}
	b.Env.External.Env = map[string]string{"B": "2", "A": "1"}
	if a.Hash() != b.Hash() {
		t.Errorf("the same variables hash differently")
	}
	c := Default()
	c.Env.External.Env, c.Env.External.Command = nil, nil
	if c.Hash() != Default().Hash() {
		t.Errorf("absent and empty env.external.env or command hash differently")
	}
	a.Env.External.Env["A"] = "3"
	if a.Hash() == b.Hash() {
		t.Errorf("a changed variable did not change the hash")
	}
}

// TestAgentRecipe: recipes/agent-retool.yaml loads from the repository root (its agent folder is
// relative to it), documents every field, and is retool-baseline.yaml's budget through the agent.
func TestAgentRecipe(t *testing.T) {
	base, err := Load("retool-baseline.yaml", Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := leafLines(t, "agent-retool.yaml")
	for _, key := range Keys() {
		if line, ok := lines[key]; !ok {
			t.Errorf("agent-retool.yaml does not list %s", key)
		} else if !strings.Contains(line, "#") {
			t.Errorf("agent-retool.yaml: %s has no comment", key)
		}
	}
	t.Chdir("..")
	r, err := Load("recipes/agent-retool.yaml", Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	var diff []string
	for _, f := range newSchema().leaves {
		if !reflect.DeepEqual(f.value(r).Interface(), f.value(base).Interface()) {
			diff = append(diff, f.key)
		}
	}
	want := []string{"run.name", "rollout.deterministic", "env.name", "env.external.command", "env.external.dir", "env.external.env"}
	if !reflect.DeepEqual(diff, want) {
		t.Errorf("agent-retool.yaml differs from retool-baseline.yaml in %v; want exactly %v", diff, want)
	}
	if r.Env.Name != "external" || r.Env.External.Env["AGENTRL_AGENT_TOOLS"] != "none" || r.Rollout.Deterministic {
		t.Errorf("agent-retool.yaml: env.name %s, agent env %v, deterministic %v", r.Env.Name, r.Env.External.Env, r.Rollout.Deterministic)
	}
}
