package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// loadInline writes yaml to DIR/bad.yaml and loads it with the environment ignored; the error
// text is returned with DIR/ removed so that it reads "bad.yaml:LINE: …".
func loadInline(t *testing.T, yaml string, opts Options) (*Recipe, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Load(path, opts)
	if err == nil {
		return r, ""
	}
	return r, strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
}

func TestLoadBadRecipes(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"misspelt field", "algorithm:\n  kl_estimater: k3\n",
			"bad.yaml:2: algorithm.kl_estimater: unknown field; did you mean algorithm.kl_estimator?"},
		{"misspelt section", "trian:\n  lr: 1e-5\n",
			"bad.yaml:1: trian: unknown field; did you mean train?"},
		{"field in the wrong section", "rollout:\n  lr: 1e-5\n",
			"bad.yaml:2: rollout.lr: unknown field; did you mean train.lr?"},
		{"unknown field, nothing close", "train:\n  learning_rate: 1e-5\n",
			"bad.yaml:2: train.learning_rate: unknown field; train accepts: lr, warmup_steps, schedule, min_lr_ratio, weight_decay, beta1, beta2, eps, grad_clip, micro_batch, grad_accumulation, updates_per_step, gradient_checkpointing, epochs_per_step, optimizer_bits, lora"},
		{"master offload unknown", "memory:\n  master_offload: cpu\n",
			`bad.yaml:2: memory.master_offload: "cpu" is not one of auto, device, host`},
		{"optimizer bits", "train:\n  optimizer_bits: 16\n",
			"bad.yaml:2: train.optimizer_bits: is 16; want 32 (float32 AdamW moments) or 8 (block-wise 8-bit)"},
		{"lora target unknown", "train:\n  lora:\n    rank: 4\n    targets: [q_proj, lm_head]\n",
			`bad.yaml:4: train.lora.targets: "lm_head" is not a projection; want some of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj`},
		{"lora alpha", "train:\n  lora:\n    alpha: 0\n",
			"bad.yaml:3: train.lora.alpha: 0 is out of range; want a number > 0"},
		{"sandbox isolation unknown", "env:\n  sandbox:\n    isolation: loose\n",
			`bad.yaml:3: env.sandbox.isolation: "loose" is not one of strict, none`},
		{"tool return steps negative", "rollout:\n  tool_return_steps: -1\n",
			"bad.yaml:2: rollout.tool_return_steps: -1 is out of range; want auto or at least 1"},
		{"tool return steps too many", "rollout:\n  tool_return_steps: 5000\n",
			"bad.yaml:2: rollout.tool_return_steps: 5000 is out of range; want auto or 1 to 4096 decode steps"},
		{"long tail share above 1", "env:\n  long_tail:\n    share: 1.5\n",
			"bad.yaml:3: env.long_tail.share: 1.5 is out of range; want a number in [0, 1]"},
		{"long tail of one turn", "env:\n  long_tail:\n    turns: 1\n",
			"bad.yaml:3: env.long_tail.turns: 1 is out of range; want at least 2"},
		{"long tail longer than max turns", "rollout:\n  max_turns: 4\nenv:\n  long_tail:\n    share: 0.25\n    turns: 16\n",
			"bad.yaml:6: env.long_tail.turns: 16 is more than rollout.max_turns 4, so a long trajectory would end before its last turn; raise rollout.max_turns to at least 16"},
		{"partial over-sample negative", "rollout:\n  partial:\n    over_sample: -1\n",
			"bad.yaml:3: rollout.partial.over_sample: -1 is out of range; want 0 to 64"},
		{"partial staleness too large", "rollout:\n  partial:\n    enabled: true\n    max_staleness: 17\n",
			"bad.yaml:4: rollout.partial.max_staleness: 17 is out of range; want 0 to 16"},
		{"partial with an external agent", "rollout:\n  deterministic: false\n  partial:\n    enabled: true\nenv:\n  name: external\n  external:\n    command: [sh]\n",
			"bad.yaml:4: rollout.partial.enabled: rollout.partial pauses trajectories between steps, which an external agent's process cannot do; set rollout.partial.enabled: false or env.name: retool"},
		{"push unknown", "rollout:\n  remote:\n    push: ftp\n",
			`bad.yaml:3: rollout.remote.push: "ftp" is not one of disk, http`},
		{"push over http to an SGLang engine", "rollout:\n  engines: [\"serve http://a:8000\", \"sglang http://b:30000\"]\n  remote:\n    push: http\n",
			"bad.yaml:4: rollout.remote.push: http: entry 1 of rollout.engines is a sglang engine, which loads weights only from a folder it can read (SGLang's tensor route takes pickled torch tensors, vLLM has none); use push: disk with a shared weights_dir, or serve engines"},
		{"sandbox workers negative", "env:\n  sandbox:\n    workers: -2\n",
			"bad.yaml:3: env.sandbox.workers: -2 is out of range; want auto or at least 1"},
		{"sandbox workers a word", "env:\n  sandbox:\n    workers: many\n",
			`bad.yaml:3: env.sandbox.workers: "many" is a string; want auto or an integer`},
		{"sandbox python missing", "env:\n  sandbox:\n    python: /nonexistent/python3\n",
			`bad.yaml:3: env.sandbox.python: "/nonexistent/python3" does not exist; give an interpreter such as /usr/bin/python3, or leave it empty for the system python3`},
		{"sandbox module not a name", "env:\n  sandbox:\n    modules: [numpy, \"os; rm\"]\n",
			`bad.yaml:3: env.sandbox.modules: "os; rm" is not a module name; want top-level import names such as numpy or sympy`},
		{"sandbox misspelt field", "env:\n  sandbox:\n    isolaton: none\n",
			"bad.yaml:3: env.sandbox.isolaton: unknown field; did you mean env.sandbox.isolation?"},
		{"value not in enum", "run:\n  seed: 3\nalgorithm:\n  kl_estimator: k2\n",
			`bad.yaml:4: algorithm.kl_estimator: "k2" is not one of k1, k3`},
		{"hint gate unknown", "hinter:\n  gate: probe\n",
			`bad.yaml:2: hinter.gate: "probe" is not one of none, lift`},
		{"eval context negative", "eval:\n  max_total_tokens: -1\n",
			"bad.yaml:2: eval.max_total_tokens: -1 is out of range; want 0 to 1048576"},
		{"eval context shorter than a call", "eval:\n  max_new_tokens: 1024\n  max_total_tokens: 512\n",
			"bad.yaml:3: eval.max_total_tokens: 512 is less than the evaluation's tokens per call (eval.max_new_tokens, else rollout.max_new_tokens) 1024; an evaluation trajectory must hold at least one full turn: raise it, or 0 for rollout.max_total_tokens"},
		{"eval context shorter than rollout's calls", "eval:\n  max_total_tokens: 64\n",
			"bad.yaml:2: eval.max_total_tokens: 64 is less than the evaluation's tokens per call (eval.max_new_tokens, else rollout.max_new_tokens) 96; an evaluation trajectory must hold at least one full turn: raise it, or 0 for rollout.max_total_tokens"},
		{"eval context with an external agent", "rollout:\n  deterministic: false\nenv:\n  name: external\n  external:\n    command: [sh]\neval:\n  max_total_tokens: 1024\n",
			"bad.yaml:8: eval.max_total_tokens: 1024 differs from rollout.max_total_tokens 512, but env.name external serves its agents from rollout's slots; set it to 0 (or 512)"},
		{"string for a number", "train:\n  lr: fast\n",
			`bad.yaml:2: train.lr: "fast" is a string; want a number`},
		{"fraction for an integer", "rollout:\n  group_size: 8.5\n",
			"bad.yaml:2: rollout.group_size: 8.5 is not an integer"},
		{"yes for a boolean", "train:\n  gradient_checkpointing: yes\n",
			`bad.yaml:2: train.gradient_checkpointing: "yes" is a string; want true or false`},
		{"negative learning rate", "train:\n  lr: -1e-5\n",
			"bad.yaml:2: train.lr: -1e-05 is out of range; want a number in (0, 1)"},
		{"top_p above 1", "rollout:\n  top_p: 1.5\n",
			"bad.yaml:2: rollout.top_p: 1.5 is out of range; want a number in (0, 1]"},
		{"group of one for grpo", "rollout:\n  group_size: 1\n",
			"bad.yaml:2: rollout.group_size: 1 is too small for algorithm.name grpo, whose advantages compare samples of the same task; want at least 2"},
		{"pass_k above the group", "algorithm:\n  pass_k: 16\n",
			"bad.yaml:2: algorithm.pass_k: 16 is larger than rollout.group_size 8, so no group has that many samples to choose from; want 1 to 8, or a larger group"},
		{"pass_k negative", "algorithm:\n  pass_k: -2\n",
			"bad.yaml:2: algorithm.pass_k: -2 is out of range; want 0 (off) or 1 to rollout.group_size (8)"},
		{"pass_k with rloo", "algorithm:\n  baseline: rloo\n  pass_k: 4\n",
			"bad.yaml:3: algorithm.pass_k: 4 brings its own baseline (the mean best-of-4 reward), so algorithm.baseline rloo would be ignored; set algorithm.baseline: mean, or algorithm.pass_k: 0"},
		{"k not positive", "eval:\n  ks: [0, 1]\n",
			"bad.yaml:2: eval.ks: k = 0 is out of range; every k must be at least 1"},
		{"k above n samples", "eval:\n  ks: [1, 2, 4, 16]\n",
			"bad.yaml:2: eval.ks: eval.n_samples 8 is less than the largest k in eval.ks (16); pass@k needs at least k samples per task"},
		{"n samples below k", "eval:\n  n_samples: 4\n",
			"bad.yaml:2: eval.n_samples: 4 is less than the largest k in eval.ks (8); pass@k needs at least k samples per task"},
		{"ks not increasing", "eval:\n  ks: [1, 4, 2]\n",
			"bad.yaml:2: eval.ks: [1, 4, 2] must be increasing without repeats"},
		{"ambiguous size unit", "memory:\n  vram: 24G\n",
			`bad.yaml:2: memory.vram: size "24G": unknown unit "G"; use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), or auto`},
		{"size without unit", "memory:\n  vram: 24\n",
			`bad.yaml:2: memory.vram: size "24" has no unit; write 24GiB (2^30 bytes each) or 24GB (10^9 bytes each), or auto`},
		{"missing jsonl file", "env:\n  tasks:\n    source: jsonl\n    jsonl:\n      path: nope.jsonl\n",
			`bad.yaml:5: env.tasks.jsonl.path: "nope.jsonl" does not exist (relative paths are relative to the current directory)`},
		{"neither: jsonl source without a path", "env:\n  tasks:\n    source: jsonl\n",
			"bad.yaml:3: env.tasks.source: env.tasks.jsonl.path is empty but env.tasks.source is jsonl; give the task file's path, or set env.tasks.source: synthetic"},
		{"both: synthetic source with a path", "env:\n  tasks:\n    jsonl:\n      path: tasks.jsonl\n",
			`bad.yaml:4: env.tasks.jsonl.path: "tasks.jsonl" is set but env.tasks.source is synthetic; set env.tasks.source: jsonl to use the file, or remove the path`},
		{"duplicate key", "train:\n  lr: 1e-5\n  lr: 2e-5\n",
			"bad.yaml:3: train.lr: defined twice (lines 2 and 3); keep one"},
		{"no value", "train:\n  lr:\n",
			"bad.yaml:2: train.lr: has no value; want a number (or delete the line to use the default)"},
		{"scalar for a section", "train: fast\n",
			`bad.yaml:1: train: "fast" is a string; want a mapping of train settings (lr, warmup_steps, schedule, min_lr_ratio, weight_decay, beta1, beta2, eps, grad_clip, micro_batch, grad_accumulation, updates_per_step, gradient_checkpointing, epochs_per_step, optimizer_bits, lora)`},
		{"number for a duration", "env:\n  timeout: 5\n",
			"bad.yaml:2: env.timeout: 5 is a number; want a duration such as 500ms, 5s or 2m"},
		{"malformed duration", "env:\n  timeout: 5 sec\n",
			`bad.yaml:2: env.timeout: "5 sec" is not a duration; want one such as 500ms, 5s or 2m`},
		{"hybrid without a hinter", "algorithm:\n  name: hybrid\n",
			"bad.yaml:2: algorithm.name: hybrid needs hints for its teacher, but hinter.kind is none; set hinter.kind: rules (or self, openai), or prm.kind: model"},
		{"openai without endpoint and model", "hinter:\n  kind: openai\n",
			"bad.yaml:2: hinter.kind: hinter.endpoint is empty but hinter.kind is openai; give the base URL of an OpenAI-compatible server, e.g. http://localhost:8000/v1\n" +
				"bad.yaml:2: hinter.kind: hinter.model is empty but hinter.kind is openai; name the model the endpoint serves"},
		{"endpoint not a URL, key instead of its variable",
			"hinter:\n  kind: openai\n  endpoint: localhost:8000\n  model: m\n  api_key_env: sk-abc123\n",
			`bad.yaml:3: hinter.endpoint: "localhost:8000" is not an http(s) URL such as http://localhost:8000/v1` + "\n" +
				"bad.yaml:5: hinter.api_key_env: looks like an API key itself; write the name of the environment variable that holds the key, e.g. OPENAI_API_KEY"},
		{"early-stop metric not evaluated", "early_stop:\n  metric: pass@3\n",
			`bad.yaml:2: early_stop.metric: "pass@3" is not one of reward, pass@1, pass@2, pass@4, pass@8 (pass@k needs its k in eval.ks)`},
		{"unknown grader", "reward:\n  grader: dapo\n",
			`bad.yaml:2: reward.grader: "dapo" is not one of math_dapo, math_dapo_slime, verifier`},
		{"process weight without a PRM", "reward:\n  process: 0.2\n",
			"bad.yaml:2: reward.process: 0.2 has no effect while prm.kind is none; set prm.kind: rules (or judge), or reward.process: 0"},
		{"PRM without a weight", "prm:\n  kind: rules\n",
			"bad.yaml:2: prm.kind: rules has no effect while reward.process is 0; give reward.process a weight above 0, or set prm.kind: none"},
		{"PRM model beside a hinter", "algorithm:\n  name: hybrid\nhinter:\n  kind: rules\nprm:\n  kind: model\n",
			"bad.yaml:4: hinter.kind: rules would write a second hint; with prm.kind model the PRM writes the bridge thoughts, so set hinter.kind: none"},
		{"PRM model options out of range", "algorithm:\n  name: hybrid\nprm:\n  kind: model\n  samples: 0\n  temperature: 3\n  max_new_tokens: 8\n  max_input_tokens: 100\n  endpoint: judge:8000\n  timeout: 0s\n  retries: 11\n",
			"bad.yaml:5: prm.samples: 0 is out of range; want 1 to 16\n" +
				"bad.yaml:6: prm.temperature: 3 is out of range; want a number in [0, 2]\n" +
				"bad.yaml:7: prm.max_new_tokens: 8 is out of range; want 16 to 32768\n" +
				"bad.yaml:8: prm.max_input_tokens: 100 is too few for the template and one step; want auto or at least 256\n" +
				`bad.yaml:9: prm.endpoint: "judge:8000" is not an http(s) URL such as http://judge:8000/v1` + "\n" +
				"bad.yaml:10: prm.timeout: 0s is out of range; want a duration from 1s to 1h\n" +
				"bad.yaml:11: prm.retries: 11 is out of range; want 0 to 10"},
		{"PRM reference without a reference", "prm:\n  kind: model\n",
			"bad.yaml:2: prm.kind: prm.model reference, but algorithm.name grpo with kl_coef 0 loads no reference model; use prm.model: policy or a model folder, or algorithm.name: hybrid"},
		{"PRM template without the trajectory", "algorithm:\n  name: hybrid\nprm:\n  kind: model\n  prompt: judge {problem}\n",
			"bad.yaml:5: prm.prompt: the template has no {trajectory}, so the PRM would not see the attempt; write {trajectory} where it goes (also {problem}, {answer}, {outcome}, {steps})"},
		{"step-wise without the PRM model", "algorithm:\n  estimator: step_wise\nreward:\n  process: 0.2\nprm:\n  kind: rules\n",
			"bad.yaml:2: algorithm.estimator: step_wise needs a verdict per step, which only prm.kind model gives (prm.kind is rules); set prm.kind: model, or algorithm.estimator: group"},
		{"step-wise without a weight", "algorithm:\n  name: hybrid\n  estimator: step_wise\nprm:\n  kind: model\n",
			"bad.yaml:3: algorithm.estimator: reward.process 0 weighs the step-wise process rewards of algorithm.estimator step_wise by nothing; give reward.process a weight above 0, or set algorithm.estimator: group"},
		{"step-wise for ppo", "algorithm:\n  name: ppo\n  estimator: step_wise\nreward:\n  process: 0.2\nprm:\n  kind: model\n  model: policy\n",
			"bad.yaml:3: algorithm.estimator: step_wise adds per-step process rewards to a group advantage, which algorithm.name ppo has none of; use grpo or hybrid, or algorithm.estimator: group"},
		{"update larger than a step", "train:\n  micro_batch: 16\n  grad_accumulation: 8\n",
			"bad.yaml:3: train.grad_accumulation: train.micro_batch 16 × train.grad_accumulation 8 = 128 sequences per update, more than the 64 a step produces (rollout.tasks_per_step × rollout.group_size)"},
		{"more held-out tasks than exist", "eval:\n  heldout_tasks: 100\n",
			"bad.yaml:2: eval.heldout_tasks: 100 is more than env.tasks.heldout_size 64; evaluate at most the held-out tasks there are"},
		{"number for a list", "eval:\n  ks: 8\n",
			"bad.yaml:2: eval.ks: 8 is a number; want a list of integers such as [1, 2, 4, 8]"},
		{"bad list element", "eval:\n  ks: [1, two, 4]\n",
			`bad.yaml:2: eval.ks[1]: "two" is a string; want an integer`},
		{"not a mapping", "- a\n- b\n",
			"bad.yaml:1: a recipe is a mapping of sections (run, model, backend, memory, rollout, env, data, reward, algorithm, hinter, prm, train, eval, early_stop, checkpoint, ui)"},
		{"zero instead of auto", "memory:\n  kv_slots: 0\n",
			"bad.yaml:2: memory.kv_slots: 0 is out of range; want auto or at least 1"},
		{"unknown attention path", "model:\n  attention: flash\n",
			`bad.yaml:2: model.attention: "flash" is not one of auto, fused, chunked, dense`},
		{"both: plugin with the go backend", "backend:\n  kind: go\n  plugin: /x.so\n",
			"bad.yaml:3: backend.plugin: is set but backend.kind is go, which never loads a plugin; remove the plugin or set backend.kind: cuda"},
		{"early stopping without evaluations", "eval:\n  every: 0\nearly_stop:\n  patience: 3\ncheckpoint:\n  keep_best: 0\n",
			"bad.yaml:2: eval.every: is 0, but early stopping needs evaluations; set eval.every above 0, or early_stop.patience and early_stop.max_drop to 0"},
		{"nothing to learn", "reward:\n  outcome: 0\n",
			"bad.yaml:2: reward.outcome: every reward weight is 0, so nothing can be learned; set reward.outcome above 0"},
		{"turn longer than a trajectory", "rollout:\n  max_new_tokens: 1024\n",
			"bad.yaml:2: rollout.max_new_tokens: rollout.max_total_tokens 512 is less than rollout.max_new_tokens 1024; a trajectory must hold at least one full turn"},
		{"every problem is collected, in file order",
			"ui:\n  mode: fancy\nrun:\n  name: my run\ntrain:\n  lr: 2\n  betas: [0.9, 0.99]\n",
			`bad.yaml:2: ui.mode: "fancy" is not one of auto, tui, plain, json` + "\n" +
				`bad.yaml:4: run.name: "my run" has characters other than letters, digits, '.', '_' and '-'` + "\n" +
				"bad.yaml:6: train.lr: 2 is out of range; want a number in (0, 1)\n" +
				"bad.yaml:7: train.betas: unknown field; did you mean train.beta1?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, got := loadInline(t, tt.yaml, Options{IgnoreEnv: true})
			if got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
			if r != nil {
				t.Errorf("got a recipe with an error")
			}
		})
	}
}

func TestLoadInvalidYAML(t *testing.T) {
	_, got := loadInline(t, "train:\n  lr: [1\n", Options{IgnoreEnv: true})
	if !strings.HasPrefix(got, "bad.yaml: invalid YAML: yaml: line ") {
		t.Errorf("got %q; want it to name the file and say the YAML is invalid", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), Options{IgnoreEnv: true})
	if err == nil || !strings.Contains(err.Error(), "nope.yaml not found") {
		t.Errorf("got %v; want a not-found error naming the file", err)
	}
}

func TestErrorIsTyped(t *testing.T) {
	_, err := Parse("x.yaml", []byte("train:\n  lr: 0\n  eps: 0\n"), Options{IgnoreEnv: true})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %T; want *Error", err)
	}
	if len(e.Problems) != 2 || e.Problems[0].Field != "train.lr" || e.Problems[0].Line != 2 || e.Problems[1].Field != "train.eps" {
		t.Errorf("got %+v; want train.lr at line 2, then train.eps", e.Problems)
	}
}

func TestLoadGood(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(tasks, []byte(`{"prompt":"1+1","answer":"2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := `
run: {name: t-1, max_steps: 3}
memory: {vram: 24 GB, kv_slots: 32}
env:
  timeout: 1500ms
  sandbox: {isolation: none, python: /usr/bin/env, modules: [sympy, mpmath], workers: 4}
  tasks:
    source: jsonl
    jsonl: {path: ` + tasks + `, prompt_field: prompt}
rollout:
  stop: ["</code>", "\n\n\n"]
train: {lr: 3e-6, micro_batch: auto, grad_accumulation: 2, gradient_checkpointing: true}
eval: {ks: [1, 4], n_samples: 4}
hinter:    # an empty section keeps every default
`
	r, errText := loadInline(t, yaml, Options{IgnoreEnv: true})
	if errText != "" {
		t.Fatal(errText)
	}
	want := Default()
	want.Run.Name, want.Run.MaxSteps = "t-1", 3
	want.Memory.VRAM, want.Memory.KVSlots = "24 GB", 32
	want.Env.Timeout = 1500 * time.Millisecond
	want.Env.Sandbox = Sandbox{Isolation: "none", Python: "/usr/bin/env", Modules: []string{"sympy", "mpmath"}, Workers: 4}
	want.Env.Tasks.Source, want.Env.Tasks.JSONL.Path = "jsonl", tasks
	want.Rollout.Stop = []string{"</code>", "\n\n\n"}
	want.Train.LR, want.Train.GradAccumulation, want.Train.GradientCheckpointing = 3e-6, 2, true
	want.Eval.Ks, want.Eval.NSamples = []int{1, 4}, 4
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got\n%s\nwant\n%s", r.CanonicalJSON(), want.CanonicalJSON())
	}
}

func TestLoadEmptyIsDefault(t *testing.T) {
	for _, src := range []string{"", "# nothing\n", "---\n"} {
		r, err := Parse("empty.yaml", []byte(src), Options{IgnoreEnv: true})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, Default()) {
			t.Errorf("%q: got\n%s\nwant the defaults\n%s", src, r.CanonicalJSON(), Default().CanonicalJSON())
		}
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestPrecedence(t *testing.T) {
	// Not parallel: it sets the process environment.
	t.Setenv("AGENTRL_TRAIN_LR", "3e-5")
	t.Setenv("AGENTRL_EVAL_KS", "1,2")
	t.Setenv("AGENTRL_MEMORY_KV_SLOTS", "16")
	t.Setenv("AGENTRL_ENV_TIMEOUT", "2s")
	t.Setenv("AGENTRL_TRAIN_GRADIENT_CHECKPOINTING", "true")
	t.Setenv("AGENTRL_ROLLOUT_TEMPERATURE", "0.7")
	t.Setenv("AGENTRL_DEBUG", "1") // not under a recipe section: left alone
	yaml := "train:\n  lr: 2e-5\n  warmup_steps: 7\nrollout:\n  temperature: 0.9\n"
	r, errText := loadInline(t, yaml, Options{Overrides: map[string]string{
		"rollout.temperature": "0.5", "run.max_steps": "5", "model.path": "", "train.micro_batch": "auto", "model.attention": "chunked",
	}})
	if errText != "" {
		t.Fatal(errText)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"file value", r.Train.WarmupSteps, 7},
		{"env over file", r.Train.LR, 3e-5},
		{"env list", r.Eval.Ks, []int{1, 2}},
		{"env auto-int", r.Memory.KVSlots, AutoInt(16)},
		{"env duration", r.Env.Timeout, 2 * time.Second},
		{"env bool", r.Train.GradientCheckpointing, true},
		{"override over env and file", r.Rollout.Temperature, 0.5},
		{"override", r.Run.MaxSteps, 5},
		{"override of model.attention (--set model.attention=chunked)", r.Model.Attention, "chunked"},
		{"default", r.Train.Beta2, 0.999},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v; want %v", c.name, c.got, c.want)
		}
	}
	r2, errText := loadInline(t, yaml, Options{IgnoreEnv: true})
	if errText != "" {
		t.Fatal(errText)
	}
	if r2.Train.LR != 2e-5 {
		t.Errorf("IgnoreEnv: got lr %v; want the file's 2e-5", r2.Train.LR)
	}
}

func TestEnvAndOverrideProblems(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		overrides map[string]string
		want      string
	}{
		{"env not a number", map[string]string{"AGENTRL_TRAIN_LR": "abc"}, nil,
			`bad.yaml: train.lr (from $AGENTRL_TRAIN_LR): "abc" is not a number`},
		{"env out of range", map[string]string{"AGENTRL_TRAIN_LR": "-1"}, nil,
			"bad.yaml: train.lr (from $AGENTRL_TRAIN_LR): -1 is out of range; want a number in (0, 1)"},
		{"env misspelt", map[string]string{"AGENTRL_TRAIN_LRR": "1e-5"}, nil,
			"bad.yaml: $AGENTRL_TRAIN_LRR matches no recipe field; did you mean $AGENTRL_TRAIN_LR (train.lr)?"},
		{"env list with spaces", map[string]string{"AGENTRL_EVAL_KS": "1, 2"}, nil,
			`bad.yaml: eval.ks (from $AGENTRL_EVAL_KS): "1, 2" is not a comma-separated list of integers such as 1,2,4,8 (no spaces)`},
		{"override unknown", nil, map[string]string{"run.max_step": "5"},
			"bad.yaml: run.max_step (from override): unknown field; did you mean run.max_steps?"},
		{"override bad type", nil, map[string]string{"run.max_steps": "five"},
			`bad.yaml: run.max_steps (from override): "five" is not an integer`},
		{"override out of range", nil, map[string]string{"run.max_steps": "0"},
			"bad.yaml: run.max_steps (from override): 0 is out of range; want at least 1"},
		{"override of a default-valued partner", nil, map[string]string{"eval.ks": "1,16"},
			"bad.yaml: eval.ks (from override): eval.n_samples 8 is less than the largest k in eval.ks (16); pass@k needs at least k samples per task"},
		{"cross-field: reported at the field the user set", nil, map[string]string{"eval.every": "0"},
			"bad.yaml: eval.every (from override): checkpoint.keep_best needs evaluations to rank checkpoints, but eval.every is 0; set eval.every above 0 or checkpoint.keep_best: 0"},
		{"a default made invalid by another field", nil, map[string]string{"eval.ks": "2,4"},
			`bad.yaml: early_stop.metric (default): "pass@1" is not one of reward, pass@2, pass@4 (pass@k needs its k in eval.ks)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, got := loadInline(t, "run:\n  seed: 2\n", Options{Overrides: tt.overrides})
			if got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestEmptyEnvIgnored(t *testing.T) {
	t.Setenv("AGENTRL_TRAIN_LR", "")
	r, err := Parse("x.yaml", []byte("train:\n  lr: 2.0e-5\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Train.LR != 2e-5 {
		t.Errorf("got lr %v; an empty variable must not override the file", r.Train.LR)
	}
}

// FuzzParse checks that no input makes loading panic, and that what loads also validates.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "train:\n  lr: 1e-5\n", "- a\n", "train: fast\n", "eval:\n  ks: [1, two]\n", "a: &x {b: 1}\nc: *x\n",
		"<<: {run: {seed: 1}}\n", "? [a]\n: b\n", "memory: {kv_slots: auto, vram: 24GiB}\n", "env:\n  timeout: -5s\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse("fuzz.yaml", data, Options{IgnoreEnv: true})
		if err == nil {
			if verr := r.Validate(); verr != nil {
				t.Errorf("Parse accepted a recipe that Validate rejects: %v", verr)
			}
		}
	})
}

// TestOverrideMapEntry: --set data.fields.answer=solution sets one entry of a mapping field, as
// the error for a dataset without an answer field says to, keeping the recipe's other entries; a
// whole-map --set data.fields=… is applied first, and an entry of a field that is not a mapping is
// still an unknown field.
func TestOverrideMapEntry(t *testing.T) {
	yaml := "data:\n  fields: {prompt: question, id: uid}\n"
	r, errText := loadInline(t, yaml, Options{IgnoreEnv: true, Overrides: map[string]string{"data.fields.answer": "solution"}})
	if errText != "" {
		t.Fatal(errText)
	}
	if want := map[string]string{"prompt": "question", "id": "uid", "answer": "solution"}; !reflect.DeepEqual(r.Data.Fields, want) {
		t.Errorf("data.fields = %v; want %v", r.Data.Fields, want)
	}
	r, errText = loadInline(t, yaml, Options{IgnoreEnv: true, Overrides: map[string]string{"data.fields": "prompt=problem", "data.fields.answer": "solution"}})
	if errText != "" {
		t.Fatal(errText)
	}
	if want := map[string]string{"prompt": "problem", "answer": "solution"}; !reflect.DeepEqual(r.Data.Fields, want) {
		t.Errorf("data.fields after a whole-map override and an entry = %v; want %v", r.Data.Fields, want)
	}
	if _, errText = loadInline(t, yaml, Options{IgnoreEnv: true, Overrides: map[string]string{"run.seed.x": "1"}}); !strings.Contains(errText, "run.seed.x") || !strings.Contains(errText, "unknown field") {
		t.Errorf("an entry of a non-mapping field: %q", errText)
	}
}

// TestWithLine: an error found after loading names the recipe file and the field's line, or the
// file alone when the file does not set the field to the value in question.
func TestWithLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.yaml")
	if err := os.WriteFile(path, []byte("run:\n  seed: 1\nprm:\n  kind: model\n  model: models/nope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := errors.New(`prm.model "models/nope": not found`)
	for _, c := range []struct{ key, value, want string }{
		{"prm.model", "models/nope", path + `:5: prm.model "models/nope": not found`},
		{"prm.model", "models/other", path + `: prm.model "models/nope": not found`}, // set elsewhere: not that line
		{"prm.endpoint", "", path + `: prm.model "models/nope": not found`},
	} {
		if got := WithLine(path, c.key, c.value, base).Error(); got != c.want {
			t.Errorf("%s=%s: %q; want %q", c.key, c.value, got, c.want)
		}
	}
	if WithLine(path, "prm.model", "models/nope", nil) != nil {
		t.Error("no error became one")
	}
}
