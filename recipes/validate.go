package recipes

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks a recipe built in code (Load and Parse already validate what they return).
// The error is an *Error listing every problem.
func (r *Recipe) Validate() error {
	ps := validate(r, &locator{file: "recipe"}, nil)
	if len(ps) == 0 {
		return nil
	}
	sortProblems(ps)
	return &Error{Problems: ps}
}

// locator knows where each key's value came from.
type locator struct {
	file    string
	lines   map[string]int    // key → line in file
	sources map[string]string // key → "$AGENTRL_…" or "override"
}

// at returns the line of key in the file (0 when its value came from elsewhere) and its source.
func (l *locator) at(key string) (int, string) {
	if s := l.sources[key]; s != "" {
		return 0, s
	}
	if n := l.lines[key]; n > 0 {
		return n, ""
	}
	if l.lines == nil {
		return 0, ""
	}
	return 0, "default"
}

// checker accumulates semantic problems.
type checker struct {
	r     *Recipe
	loc   *locator
	skip  map[string]bool
	probs []Problem
	// noDataFiles: data paths are not checked for existence (Options.NoDataFiles).
	noDataFiles bool
}

func validate(r *Recipe, loc *locator, skip map[string]bool) []Problem {
	return validateWith(r, loc, skip, false)
}

func validateWith(r *Recipe, loc *locator, skip map[string]bool, noDataFiles bool) []Problem {
	c := &checker{r: r, loc: loc, skip: skip, noDataFiles: noDataFiles}
	c.run()
	c.model()
	c.backend()
	c.memory()
	c.rollout()
	c.env()
	c.data()
	c.reward()
	c.algorithm()
	c.hinter()
	c.prm()
	c.train()
	c.eval()
	c.earlyStop()
	c.checkpoint()
	c.oneOf("ui.mode", r.UI.Mode, "auto", "tui", "plain", "json")
	return c.probs
}

// fail reports msg against the first of keys that the user wrote (in the file, the environment
// or an override), else against the first key; a message that starts with the chosen key loses
// that prefix. Nothing is reported when one of the keys already failed.
func (c *checker) fail(keys []string, msg string) {
	for _, k := range keys {
		if c.skip[k] {
			return
		}
	}
	anchor := keys[0]
	for _, k := range keys {
		if line, src := c.loc.at(k); line > 0 || (src != "" && src != "default") {
			anchor = k
			break
		}
	}
	// "a.b X is …" reads "a.b: X is …" once the field leads the line.
	msg = strings.TrimPrefix(msg, anchor+" ")
	line, src := c.loc.at(anchor)
	c.probs = append(c.probs, Problem{File: c.loc.file, Line: line, Field: anchor, Source: src, Message: msg})
}

func (c *checker) failf(key, format string, args ...any) {
	c.fail([]string{key}, fmt.Sprintf(format, args...))
}

func (c *checker) oneOf(key, val string, allowed ...string) {
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	c.failf(key, "%q is not one of %s", val, strings.Join(allowed, ", "))
}

func (c *checker) atLeast(key string, v, lo int) {
	if v < lo {
		c.failf(key, "%d is out of range; want at least %d", v, lo)
	}
}

func (c *checker) between(key string, v, lo, hi int) {
	if v < lo || v > hi {
		c.failf(key, "%d is out of range; want %d to %d", v, lo, hi)
	}
}

func (c *checker) auto(key string, v AutoInt) {
	if v < 0 {
		c.failf(key, "%d is out of range; want auto or at least 1", int(v))
	}
}

// interval checks lo ⋖ v ⋖ hi, with each end open or closed; NaN always fails.
func (c *checker) interval(key string, v, lo, hi float64, loOpen, hiOpen bool) {
	ok := !math.IsNaN(v) && (v > lo || !loOpen && v == lo) && (v < hi || !hiOpen && v == hi)
	if ok {
		return
	}
	var want string
	switch {
	case math.IsInf(hi, 1) && loOpen:
		want = "a number > " + ftoa(lo)
	case math.IsInf(hi, 1):
		want = "a number ≥ " + ftoa(lo)
	default:
		l, r := "[", "]"
		if loOpen {
			l = "("
		}
		if hiOpen {
			r = ")"
		}
		want = "a number in " + l + ftoa(lo) + ", " + ftoa(hi) + r
	}
	c.failf(key, "%s is out of range; want %s", ftoa(v), want)
}

func (c *checker) nonNegative(key string, v float64) {
	c.interval(key, v, 0, math.Inf(1), false, false)
}

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func (c *checker) run() {
	r := c.r.Run
	for _, ch := range r.Name {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			c.failf("run.name", "%q has characters other than letters, digits, '.', '_' and '-'", r.Name)
			break
		}
	}
	c.atLeast("run.max_steps", r.MaxSteps, 1)
	if strings.TrimSpace(r.Store) == "" {
		c.failf("run.store", "is empty; want a database file path such as runs/agentrl.db")
	}
}

func (c *checker) model() {
	m := c.r.Model
	c.oneOf("model.dtype", m.DType, "auto", "f32", "bf16")
	c.oneOf("model.attention", m.Attention, "auto", "fused", "chunked", "dense")
	if m.Path == "" {
		return
	}
	st, err := os.Stat(m.Path)
	switch {
	case err != nil:
		c.failf("model.path", "%q does not exist; give a HuggingFace model folder (config.json, model.safetensors, tokenizer.json), or leave it empty for the built-in model", m.Path)
	case !st.IsDir():
		c.failf("model.path", "%q is a file; give the model folder that holds config.json", m.Path)
	default:
		if _, err := os.Stat(filepath.Join(m.Path, "config.json")); err != nil {
			c.failf("model.path", "%q has no config.json; give a HuggingFace model folder", m.Path)
		}
	}
}

func (c *checker) backend() {
	b := c.r.Backend
	c.oneOf("backend.kind", b.Kind, "auto", "go", "cuda")
	if b.Plugin == "" {
		return
	}
	if b.Kind == "go" {
		c.fail([]string{"backend.plugin", "backend.kind"}, "backend.plugin is set but backend.kind is go, which never loads a plugin; remove the plugin or set backend.kind: cuda")
		return
	}
	if _, err := os.Stat(b.Plugin); err != nil {
		c.failf("backend.plugin", "%q does not exist; give the plugin file (xla_cuda_plugin.so or pjrt_c_api_cuda_plugin.so) or a folder holding one, or leave it empty to search for it", b.Plugin)
	}
}

func (c *checker) memory() {
	m := c.r.Memory
	if m.VRAM != "auto" {
		if n, err := ParseBytes(m.VRAM); err != nil {
			c.failf("memory.vram", "%v, or auto", err)
		} else if n <= 0 {
			c.failf("memory.vram", "%q is not a usable budget; want a positive size such as 24GiB, or auto", m.VRAM)
		}
	}
	c.auto("memory.kv_slots", m.KVSlots)
	c.oneOf("memory.optimizer_offload", m.OptimizerOffload, "auto", "device", "host")
	c.oneOf("memory.master_offload", m.MasterOffload, "auto", "device", "host")
}

func (c *checker) rollout() {
	r := c.r.Rollout
	c.atLeast("rollout.tasks_per_step", r.TasksPerStep, 1)
	c.atLeast("rollout.group_size", r.GroupSize, 1)
	if name := c.r.Algorithm.Name; r.GroupSize == 1 && (name == "grpo" || name == "hybrid") {
		c.fail([]string{"rollout.group_size", "algorithm.name"}, fmt.Sprintf(
			"1 is too small for algorithm.name %s, whose advantages compare samples of the same task; want at least 2", name))
	}
	c.between("rollout.max_turns", r.MaxTurns, 1, 64)
	c.atLeast("rollout.max_new_tokens", r.MaxNewTokens, 1)
	c.between("rollout.max_total_tokens", r.MaxTotalTokens, 1, 1<<20)
	if r.MaxNewTokens >= 1 && r.MaxTotalTokens >= 1 && r.MaxTotalTokens < r.MaxNewTokens {
		c.fail([]string{"rollout.max_total_tokens", "rollout.max_new_tokens"}, fmt.Sprintf(
			"rollout.max_total_tokens %d is less than rollout.max_new_tokens %d; a trajectory must hold at least one full turn",
			r.MaxTotalTokens, r.MaxNewTokens))
	}
	c.interval("rollout.temperature", r.Temperature, 0, 5, true, false)
	c.interval("rollout.top_p", r.TopP, 0, 1, true, false)
	c.atLeast("rollout.top_k", r.TopK, 0)
	for i, s := range r.Stop {
		if s == "" {
			c.failf("rollout.stop", "entry %d is empty; every stop string needs at least one character", i)
		}
	}
	c.auto("rollout.tool_return_steps", r.ToolReturnSteps)
	c.engines()
	lt := c.r.Env.LongTail
	c.interval("env.long_tail.share", lt.Share, 0, 1, false, false)
	c.atLeast("env.long_tail.turns", lt.Turns, 2)
	if lt.Share > 0 && lt.Share <= 1 && lt.Turns > r.MaxTurns && r.MaxTurns >= 1 {
		c.fail([]string{"env.long_tail.turns", "rollout.max_turns"}, fmt.Sprintf(
			"env.long_tail.turns %d is more than rollout.max_turns %d, so a long trajectory would end before its last turn; raise rollout.max_turns to at least %d",
			lt.Turns, r.MaxTurns, lt.Turns))
	}
	if lt.Share > 0 && c.r.Env.Name == "external" {
		c.fail([]string{"env.long_tail.share", "env.name"},
			"env.long_tail asks the ReTool environment for more turns, but env.name is external, whose agent decides its own turns; set env.long_tail.share: 0")
	}
	pr := r.Partial
	c.between("rollout.partial.over_sample", pr.OverSample, 0, 64)
	c.between("rollout.partial.max_staleness", pr.MaxStaleness, 0, 16)
	if pr.Enabled && c.r.Env.Name == "external" {
		c.fail([]string{"rollout.partial.enabled", "env.name"},
			"rollout.partial pauses trajectories between steps, which an external agent's process cannot do; set rollout.partial.enabled: false or env.name: retool")
	}
	if r.ToolReturnSteps > 4096 {
		c.failf("rollout.tool_return_steps", "%d is out of range; want auto or 1 to 4096 decode steps", int(r.ToolReturnSteps))
	}
}

func (c *checker) sandbox() {
	sb := c.r.Env.Sandbox
	c.oneOf("env.sandbox.isolation", sb.Isolation, "strict", "none")
	c.auto("env.sandbox.workers", sb.Workers)
	if sb.Workers > 1024 {
		c.failf("env.sandbox.workers", "%d is out of range; want auto or 1 to 1024", int(sb.Workers))
	}
	if sb.Python != "" {
		switch st, err := os.Stat(sb.Python); {
		case err != nil && !strings.Contains(sb.Python, "/"):
			// A bare name is looked up on PATH when the executor starts.
		case err != nil:
			c.failf("env.sandbox.python", "%q does not exist; give an interpreter such as /usr/bin/python3, or leave it empty for the system python3", sb.Python)
		case st.IsDir() || st.Mode()&0o111 == 0:
			c.failf("env.sandbox.python", "%q is not an executable file; give an interpreter such as /usr/bin/python3", sb.Python)
		}
	}
	for _, m := range sb.Modules {
		if !isIdentifier(m) {
			c.failf("env.sandbox.modules", "%q is not a module name; want top-level import names such as numpy or sympy", m)
		}
	}
}

// isIdentifier reports whether s is a Python top-level module name.
func isIdentifier(s string) bool {
	for i, ch := range s {
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return s != ""
}

func (c *checker) env() {
	e := c.r.Env
	c.oneOf("env.name", e.Name, "retool", "external")
	c.external()
	c.oneOf("env.executor", e.Executor, "starlark", "python")
	c.oneOf("env.session", e.Session, "fresh", "persistent")
	if e.Timeout <= 0 || e.Timeout > 10*time.Minute {
		c.failf("env.timeout", "%s is out of range; want a duration above 0s and at most 10m", e.Timeout)
	}
	c.atLeast("env.limits.max_output_bytes", e.Limits.MaxOutputBytes, 1)
	c.atLeast("env.limits.max_steps", e.Limits.MaxSteps, 1)
	c.atLeast("env.limits.max_memory_mb", e.Limits.MaxMemoryMB, 16)
	c.sandbox()
	c.oneOf("env.observation.format", e.Observation.Format, "interpreter", "tool_response")
	c.format()
	c.atLeast("env.observation.max_chars", e.Observation.MaxChars, 1)

	t := e.Tasks
	c.oneOf("env.tasks.source", t.Source, "synthetic", "jsonl")
	if len(t.Synthetic.Levels) == 0 {
		c.failf("env.tasks.synthetic.levels", "is empty; want at least one level from 0 to 6")
	}
	seen := map[int]bool{}
	for _, lv := range t.Synthetic.Levels {
		if lv < 0 || lv > 6 {
			c.failf("env.tasks.synthetic.levels", "level %d is out of range; want levels from 0 to 6 (0-5 by difficulty, 6 named operations)", lv)
		} else if seen[lv] {
			c.failf("env.tasks.synthetic.levels", "level %d is listed twice", lv)
		}
		seen[lv] = true
	}
	switch t.Source {
	case "synthetic":
		if t.JSONL.Path != "" {
			c.fail([]string{"env.tasks.jsonl.path", "env.tasks.source"}, fmt.Sprintf(
				"env.tasks.jsonl.path %q is set but env.tasks.source is synthetic; set env.tasks.source: jsonl to use the file, or remove the path", t.JSONL.Path))
		}
	case "jsonl":
		switch st, err := os.Stat(t.JSONL.Path); {
		case t.JSONL.Path == "":
			c.fail([]string{"env.tasks.jsonl.path", "env.tasks.source"},
				"env.tasks.jsonl.path is empty but env.tasks.source is jsonl; give the task file's path, or set env.tasks.source: synthetic")
		case errors.Is(err, os.ErrNotExist):
			c.failf("env.tasks.jsonl.path", "%q does not exist (relative paths are relative to the current directory)", t.JSONL.Path)
		case err != nil:
			c.failf("env.tasks.jsonl.path", "%q cannot be read: %v", t.JSONL.Path, err)
		case st.IsDir():
			c.failf("env.tasks.jsonl.path", "%q is a folder; want a JSON Lines file", t.JSONL.Path)
		}
		if t.JSONL.PromptField == "" {
			c.failf("env.tasks.jsonl.prompt_field", "is empty; name the JSON field that holds the problem text")
		}
		if t.JSONL.AnswerField == "" {
			c.failf("env.tasks.jsonl.answer_field", "is empty; name the JSON field that holds the reference answer")
		}
	}
	c.atLeast("env.tasks.train_size", t.TrainSize, 1)
	c.atLeast("env.tasks.heldout_size", t.HeldoutSize, 1)
}

func (c *checker) reward() {
	w := c.r.Reward
	c.nonNegative("reward.outcome", w.Outcome)
	c.nonNegative("reward.process", w.Process)
	c.nonNegative("reward.shaping", w.Shaping)
	c.nonNegative("reward.format_penalty", w.FormatPenalty)
	c.oneOf("reward.grader", w.Grader, Graders...)
	if w.Outcome == 0 && w.Process == 0 && w.Shaping == 0 {
		c.fail([]string{"reward.outcome", "reward.process", "reward.shaping"},
			"every reward weight is 0, so nothing can be learned; set reward.outcome above 0")
	}
	prm := c.r.PRM.Kind
	c.oneOf("prm.kind", prm, "none", "rules", "judge", "model")
	switch {
	case w.Process > 0 && prm == "none":
		c.fail([]string{"reward.process", "prm.kind"}, fmt.Sprintf(
			"reward.process %s has no effect while prm.kind is none; set prm.kind: rules (or judge), or reward.process: 0", ftoa(w.Process)))
	case w.Process == 0 && c.r.Algorithm.Estimator == "step_wise":
		c.fail([]string{"reward.process", "algorithm.estimator"},
			"reward.process 0 weighs the step-wise process rewards of algorithm.estimator step_wise by nothing; give reward.process a weight above 0, or set algorithm.estimator: group")
	case w.Process == 0 && (prm == "rules" || prm == "judge"):
		c.fail([]string{"prm.kind", "reward.process"}, fmt.Sprintf(
			"prm.kind %s has no effect while reward.process is 0; give reward.process a weight above 0, or set prm.kind: none", prm))
	}
}

func (c *checker) algorithm() {
	a := c.r.Algorithm
	c.oneOf("algorithm.name", a.Name, "grpo", "ppo", "hybrid", "opd")
	c.oneOf("algorithm.baseline", a.Baseline, "mean", "rloo")
	c.interval("algorithm.clip_low", a.ClipLow, 0, 1, true, true)
	c.interval("algorithm.clip_high", a.ClipHigh, 0, 10, true, false)
	c.interval("algorithm.kl_coef", a.KLCoef, 0, 10, false, false)
	c.oneOf("algorithm.kl_estimator", a.KLEstimator, "k1", "k3")
	c.oneOf("algorithm.kl_mode", a.KLMode, "loss", "reward")
	c.interval("algorithm.entropy_coef", a.EntropyCoef, 0, 1, false, false)
	c.oneOf("algorithm.aggregation", a.Aggregation, "token-mean", "seq-mean")
	c.interval("algorithm.opd_lambda", a.OPDLambda, 0, 100, false, false)
	c.interval("algorithm.gae_gamma", a.GAEGamma, 0, 1, false, false)
	c.interval("algorithm.gae_lambda", a.GAELambda, 0, 1, false, false)
	c.nonNegative("algorithm.value_coef", a.ValueCoef)
	distil := a.Name == "hybrid" || a.Name == "opd"
	if distil && a.OPDLambda == 0 {
		c.fail([]string{"algorithm.opd_lambda", "algorithm.name"}, fmt.Sprintf(
			"algorithm.opd_lambda is 0, which turns off the distillation that algorithm.name %s is for; want a weight above 0 (0.5 is a good start)", a.Name))
	}
	if distil && c.r.Hinter.Kind == "none" && c.r.PRM.Kind != "model" {
		c.fail([]string{"hinter.kind", "algorithm.name"}, fmt.Sprintf(
			"algorithm.name %s needs hints for its teacher, but hinter.kind is none; set hinter.kind: rules (or self, openai), or prm.kind: model", a.Name))
	}
	if a.PassK != 0 {
		switch g := c.r.Rollout.GroupSize; {
		case a.PassK < 0:
			c.failf("algorithm.pass_k", "%d is out of range; want 0 (off) or 1 to rollout.group_size (%d)", a.PassK, g)
		case a.PassK > g:
			c.fail([]string{"algorithm.pass_k", "rollout.group_size"}, fmt.Sprintf(
				"algorithm.pass_k %d is larger than rollout.group_size %d, so no group has that many samples to choose from; want 1 to %d, or a larger group", a.PassK, g, g))
		}
		switch {
		case a.Name == "ppo" || a.Name == "opd":
			c.fail([]string{"algorithm.pass_k", "algorithm.name"}, fmt.Sprintf(
				"algorithm.pass_k scores groups of samples, which algorithm.name %s has no use for; set algorithm.pass_k: 0, or algorithm.name: grpo or hybrid", a.Name))
		case a.Baseline == "rloo":
			c.fail([]string{"algorithm.pass_k", "algorithm.baseline"}, fmt.Sprintf(
				"%d brings its own baseline (the mean best-of-%d reward), so algorithm.baseline rloo would be ignored; set algorithm.baseline: mean, or algorithm.pass_k: 0", a.PassK, a.PassK))
		}
	}
	if a.Name == "ppo" && a.ValueCoef == 0 {
		c.fail([]string{"algorithm.value_coef", "algorithm.name"},
			"algorithm.value_coef is 0, so ppo's value head never learns; want a weight above 0 (0.5 is usual)")
	}
}

func (c *checker) hinter() {
	h := c.r.Hinter
	c.oneOf("hinter.kind", h.Kind, "none", "rules", "self", "openai")
	c.between("hinter.max_hint_tokens", h.MaxHintTokens, 1, 256)
	c.oneOf("hinter.gate", h.Gate, "none", "lift")
	if k := h.APIKeyEnv; k != "" {
		switch {
		case strings.HasPrefix(k, "sk-") || len(k) > 64:
			c.failf("hinter.api_key_env", "looks like an API key itself; write the name of the environment variable that holds the key, e.g. OPENAI_API_KEY")
		case !isEnvName(k):
			c.failf("hinter.api_key_env", "%q is not an environment variable name (letters, digits and '_', not starting with a digit)", k)
		}
	}
	if h.Kind == "openai" {
		if h.Endpoint == "" {
			c.fail([]string{"hinter.endpoint", "hinter.kind"},
				"hinter.endpoint is empty but hinter.kind is openai; give the base URL of an OpenAI-compatible server, e.g. http://localhost:8000/v1")
		} else if u, err := url.Parse(h.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.failf("hinter.endpoint", "%q is not an http(s) URL such as http://localhost:8000/v1", h.Endpoint)
		}
		if h.Model == "" {
			c.fail([]string{"hinter.model", "hinter.kind"}, "hinter.model is empty but hinter.kind is openai; name the model the endpoint serves")
		}
		return
	}
	if h.Endpoint != "" {
		c.failf("hinter.endpoint", "is set but hinter.kind is %s; the endpoint is only used with hinter.kind: openai", h.Kind)
	}
	if h.Model != "" {
		c.failf("hinter.model", "is set but hinter.kind is %s; the model is only used with hinter.kind: openai", h.Kind)
	}
}

func isEnvName(s string) bool {
	for i, ch := range s {
		if !(ch == '_' || ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return s != ""
}

func (c *checker) train() {
	t := c.r.Train
	c.interval("train.lr", t.LR, 0, 1, true, true)
	c.atLeast("train.warmup_steps", t.WarmupSteps, 0)
	c.oneOf("train.schedule", t.Schedule, "constant", "cosine")
	c.interval("train.min_lr_ratio", t.MinLRRatio, 0, 1, false, false)
	c.interval("train.weight_decay", t.WeightDecay, 0, 1, false, true)
	c.interval("train.beta1", t.Beta1, 0, 1, false, true)
	c.interval("train.beta2", t.Beta2, 0, 1, false, true)
	c.interval("train.eps", t.Eps, 0, 1, true, true)
	c.nonNegative("train.grad_clip", t.GradClip)
	c.auto("train.micro_batch", t.MicroBatch)
	c.auto("train.grad_accumulation", t.GradAccumulation)
	c.between("train.epochs_per_step", t.EpochsPerStep, 1, 16)
	c.between("train.updates_per_step", t.UpdatesPerStep, 0, 64)
	if t.UpdatesPerStep > 0 && t.GradAccumulation > 0 {
		c.fail([]string{"train.updates_per_step", "train.grad_accumulation"}, fmt.Sprintf(
			"train.updates_per_step %d and train.grad_accumulation %d both say how often AdamW steps; keep one (grad_accumulation: auto)", t.UpdatesPerStep, t.GradAccumulation))
	}
	if t.OptimizerBits != 32 && t.OptimizerBits != 8 {
		c.failf("train.optimizer_bits", "is %d; want 32 (float32 AdamW moments) or 8 (block-wise 8-bit)", t.OptimizerBits)
	}
	c.lora()
	batch := c.r.BatchSize()
	if batch < 1 {
		return
	}
	mb, ga := int(t.MicroBatch), int(t.GradAccumulation)
	switch {
	case mb > batch:
		c.fail([]string{"train.micro_batch", "rollout.tasks_per_step", "rollout.group_size"}, fmt.Sprintf(
			"train.micro_batch %d is more than the %d sequences a step produces (rollout.tasks_per_step × rollout.group_size)", mb, batch))
	case mb > 0 && ga > 0 && mb*ga > batch:
		c.fail([]string{"train.grad_accumulation", "train.micro_batch"}, fmt.Sprintf(
			"train.micro_batch %d × train.grad_accumulation %d = %d sequences per update, more than the %d a step produces (rollout.tasks_per_step × rollout.group_size)",
			mb, ga, mb*ga, batch))
	case t.UpdatesPerStep > batch:
		c.fail([]string{"train.updates_per_step"}, fmt.Sprintf(
			"train.updates_per_step %d is more than the %d sequences a step produces (rollout.tasks_per_step × rollout.group_size)", t.UpdatesPerStep, batch))
	case ga > batch:
		c.fail([]string{"train.grad_accumulation"}, fmt.Sprintf(
			"train.grad_accumulation %d is more than the %d sequences a step produces (rollout.tasks_per_step × rollout.group_size)", ga, batch))
	}
}

// lora checks train.lora: a rank ≥ 0, alpha > 0 and, with adapters, known distinct targets.
func (c *checker) lora() {
	l := c.r.Train.LoRA
	c.atLeast("train.lora.rank", l.Rank, 0)
	c.interval("train.lora.alpha", l.Alpha, 0, math.Inf(1), true, true)
	if l.Rank == 0 {
		return
	}
	if len(l.Targets) == 0 {
		c.failf("train.lora.targets", "is empty but train.lora.rank is %d; list projections such as [q_proj, v_proj], or set the rank to 0", l.Rank)
	}
	known := []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
	seen := map[string]bool{}
	for _, t := range l.Targets {
		switch {
		case !slices.Contains(known, t):
			c.failf("train.lora.targets", "%q is not a projection; want some of %s", t, strings.Join(known, ", "))
		case seen[t]:
			c.failf("train.lora.targets", "lists %q twice", t)
		}
		seen[t] = true
	}
}

func (c *checker) eval() {
	e := c.r.Eval
	c.atLeast("eval.every", e.Every, 0)
	c.atLeast("eval.n_samples", e.NSamples, 1)
	c.atLeast("eval.heldout_tasks", e.HeldoutTasks, 1)
	c.between("eval.validation_tasks", e.ValidationTasks, 0, 4096)
	c.atLeast("eval.validation_samples", e.ValidationSamples, 1)
	c.interval("eval.temperature", e.Temperature, 0, 5, true, false)
	c.atLeast("eval.max_new_tokens", e.MaxNewTokens, 0)
	c.between("eval.max_total_tokens", e.MaxTotalTokens, 0, 1<<20)
	if newTokens := cmp.Or(e.MaxNewTokens, c.r.Rollout.MaxNewTokens); e.MaxTotalTokens >= 1 && newTokens >= 1 && e.MaxTotalTokens < newTokens {
		c.fail([]string{"eval.max_total_tokens", "eval.max_new_tokens"}, fmt.Sprintf(
			"eval.max_total_tokens %d is less than the evaluation's tokens per call (eval.max_new_tokens, else rollout.max_new_tokens) %d; an evaluation trajectory must hold at least one full turn: raise it, or 0 for rollout.max_total_tokens",
			e.MaxTotalTokens, newTokens))
	}
	if e.MaxTotalTokens > 0 && e.MaxTotalTokens != c.r.Rollout.MaxTotalTokens && c.r.Env.Name == "external" {
		c.fail([]string{"eval.max_total_tokens", "env.name"}, fmt.Sprintf(
			"eval.max_total_tokens %d differs from rollout.max_total_tokens %d, but env.name external serves its agents from rollout's slots; set it to 0 (or %d)",
			e.MaxTotalTokens, c.r.Rollout.MaxTotalTokens, c.r.Rollout.MaxTotalTokens))
	}
	if len(e.Ks) == 0 {
		c.failf("eval.ks", "is empty; want the k of pass@k, e.g. [1, 2, 4, 8]")
	}
	increasing := true
	for i, k := range e.Ks {
		if k < 1 {
			c.failf("eval.ks", "k = %d is out of range; every k must be at least 1", k)
			return
		}
		if i > 0 && k <= e.Ks[i-1] {
			increasing = false
		}
	}
	if !increasing {
		c.failf("eval.ks", "%s must be increasing without repeats", fmtInts(e.Ks))
	}
	if n := len(e.Ks); n > 0 && e.NSamples >= 1 {
		if maxK := e.Ks[n-1]; maxK > e.NSamples && increasing {
			c.fail([]string{"eval.n_samples", "eval.ks"}, fmt.Sprintf(
				"eval.n_samples %d is less than the largest k in eval.ks (%d); pass@k needs at least k samples per task", e.NSamples, maxK))
		}
	}
	var k int
	if _, err := fmt.Sscanf(c.r.EarlyStop.Metric, "pass@%d", &k); err == nil && e.ValidationTasks > 0 && k > e.ValidationSamples && e.ValidationSamples >= 1 {
		c.fail([]string{"eval.validation_samples", "early_stop.metric"}, fmt.Sprintf(
			"eval.validation_samples %d is less than the k of early_stop.metric %s, which is chosen on the validation tasks; raise eval.validation_samples to at least %d", e.ValidationSamples, c.r.EarlyStop.Metric, k))
	}
	if e.HeldoutTasks > c.r.Env.Tasks.HeldoutSize && c.r.Env.Tasks.HeldoutSize >= 1 && len(c.r.Data.Eval) == 0 {
		c.fail([]string{"eval.heldout_tasks", "env.tasks.heldout_size"}, fmt.Sprintf(
			"eval.heldout_tasks %d is more than env.tasks.heldout_size %d; evaluate at most the held-out tasks there are", e.HeldoutTasks, c.r.Env.Tasks.HeldoutSize))
	}
}

func fmtInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func (c *checker) earlyStop() {
	s := c.r.EarlyStop
	allowed := []string{"reward"}
	for _, k := range c.r.Eval.Ks {
		allowed = append(allowed, "pass@"+strconv.Itoa(k))
	}
	ok := false
	for _, a := range allowed {
		ok = ok || s.Metric == a
	}
	if !ok {
		c.fail([]string{"early_stop.metric"}, fmt.Sprintf("%q is not one of %s (pass@k needs its k in eval.ks)", s.Metric, strings.Join(allowed, ", ")))
	}
	c.atLeast("early_stop.patience", s.Patience, 0)
	c.interval("early_stop.max_drop", s.MaxDrop, 0, 1, false, false)
	if (s.Patience > 0 || s.MaxDrop > 0) && c.r.Eval.Every == 0 {
		c.fail([]string{"eval.every", "early_stop.patience", "early_stop.max_drop"},
			"eval.every is 0, but early stopping needs evaluations; set eval.every above 0, or early_stop.patience and early_stop.max_drop to 0")
	}
}

func (c *checker) checkpoint() {
	k := c.r.Checkpoint
	c.atLeast("checkpoint.every", k.Every, 0)
	c.atLeast("checkpoint.keep_best", k.KeepBest, 0)
	c.atLeast("checkpoint.keep_last", k.KeepLast, 0)
	if k.KeepBest > 0 && c.r.Eval.Every == 0 {
		c.fail([]string{"checkpoint.keep_best", "eval.every"},
			"checkpoint.keep_best needs evaluations to rank checkpoints, but eval.every is 0; set eval.every above 0 or checkpoint.keep_best: 0")
	}
	if k.Every > 0 && k.KeepBest == 0 && k.KeepLast == 0 {
		c.fail([]string{"checkpoint.keep_last", "checkpoint.every"},
			"checkpoint.keep_best and checkpoint.keep_last are both 0, so every checkpoint saved would be deleted; keep at least one")
	}
}
