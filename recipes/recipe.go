// Package recipes holds the recipe schema of agentrl-tui: every setting of a training run, its
// documented default, loading from YAML with viper (defaults, AGENTRL_* environment overrides and
// caller overrides such as command-line flags), and validation whose errors name the file, the line,
// the field, the bad value and what would be accepted.
//
// The controller takes a *Recipe returned by Load or Parse (already validated), never raw maps.
// Keys are lower-case snake_case; a dotted key such as "train.lr" names a field, and the matching
// environment variable is AGENTRL_TRAIN_LR.
package recipes

import "time"

// Recipe is the whole configuration of a run. Each section mirrors one top-level YAML mapping.
type Recipe struct {
	// Run names the run and bounds it.
	Run Run `mapstructure:"run" json:"run"`
	// Model chooses the policy model folder and its compute precision.
	Model Model `mapstructure:"model" json:"model"`
	// Backend chooses the GoMLX backend.
	Backend Backend `mapstructure:"backend" json:"backend"`
	// Memory is the device memory budget and how it is shared between rollout and training.
	Memory Memory `mapstructure:"memory" json:"memory"`
	// Rollout controls generation: how many trajectories per step and how they are sampled.
	Rollout Rollout `mapstructure:"rollout" json:"rollout"`
	// Env is the environment (the ReTool code sandbox, or an external agent program) and its
	// task set.
	Env Env `mapstructure:"env" json:"env"`
	// Data reads the tasks from dataset files (JSONL, Parquet, HuggingFace folders) instead of
	// env.tasks; unused while data.train is empty. Left out of the recipe's hash when unused.
	Data Data `mapstructure:"data" json:"data,omitzero"`
	// Reward weighs the parts of a trajectory's reward.
	Reward Reward `mapstructure:"reward" json:"reward"`
	// Algorithm is the policy-gradient algorithm and its loss settings.
	Algorithm Algorithm `mapstructure:"algorithm" json:"algorithm"`
	// Hinter writes hindsight hints ("bridge thoughts") for on-policy distillation.
	Hinter Hinter `mapstructure:"hinter" json:"hinter"`
	// PRM chooses how the process score of a trajectory is computed.
	PRM PRM `mapstructure:"prm" json:"prm"`
	// Train holds the optimizer and batching settings.
	Train Train `mapstructure:"train" json:"train"`
	// Eval controls pass@k evaluation on held-out tasks.
	Eval Eval `mapstructure:"eval" json:"eval"`
	// EarlyStop stops a run whose evaluation metric stopped improving.
	EarlyStop EarlyStop `mapstructure:"early_stop" json:"early_stop"`
	// Checkpoint controls how often weights are saved and which are kept.
	Checkpoint Checkpoint `mapstructure:"checkpoint" json:"checkpoint"`
	// UI chooses how the run is shown.
	UI UI `mapstructure:"ui" json:"ui"`
}

// Run names a run and bounds its length.
type Run struct {
	// Name labels the run in the store and the UI; empty means one derived from the recipe file
	// and the start time. Letters, digits, '.', '_' and '-' only.
	Name string `mapstructure:"name" json:"name"`
	// Seed makes the run reproducible: task order, sampling and initialisation derive from it.
	Seed int64 `mapstructure:"seed" json:"seed"`
	// MaxSteps is the number of training steps (rollout → update → sync) before the run ends.
	MaxSteps int `mapstructure:"max_steps" json:"max_steps"`
	// Store is the path of the bbolt database that keeps runs, metrics, trajectories and checkpoints.
	Store string `mapstructure:"store" json:"store"`
}

// Model chooses the policy model.
type Model struct {
	// Path is a HuggingFace-format folder (config.json, safetensors, tokenizer.json); empty means
	// the built-in small model shipped in testdata/. Relative paths are relative to the current
	// directory.
	Path string `mapstructure:"path" json:"path"`
	// DType is the compute precision: "auto" (bf16 on a GPU, f32 on the CPU), "f32" or "bf16".
	// Master weights and optimizer state are always float32.
	DType string `mapstructure:"dtype" json:"dtype"`
	// Attention is how training, the reference and scoring attend over whole sequences (rollout's
	// KV-cache steps are always dense): "auto" (fused cuDNN flash attention where the backend has
	// it and its program compiles, falling back to chunked with the reason when it does not;
	// else chunked beyond one block of queries, dense below), "fused" (refused where the backend
	// lacks it), "chunked" (blocks of queries, the [B, heads, T, S] scores never whole) or
	// "dense" (every query's scores at once).
	Attention string `mapstructure:"attention" json:"attention"`
}

// Backend chooses the GoMLX backend.
type Backend struct {
	// Kind is "auto" (CUDA when a GPU and the PJRT plugin are found, else Go), "go" (pure-Go CPU)
	// or "cuda" (XLA PJRT CUDA plugin; an error when it cannot be opened).
	Kind string `mapstructure:"kind" json:"kind"`
	// Plugin is the PJRT CUDA plugin: the file (xla_cuda_plugin.so from JAX's wheel,
	// pjrt_c_api_cuda_plugin.so from go-xla's installer) or a folder holding one in either layout
	// (site-packages, ~/.local/lib/go-xla, …); empty means search PJRT_PLUGIN_LIBRARY_PATH, Python
	// site-packages and go-xla's install folders. Only meaningful with kind auto or cuda.
	Plugin string `mapstructure:"plugin" json:"plugin"`
	// CompileCache is the folder where the XLA backend keeps the programs it compiled, so that the
	// next run of the same recipe on the same machine and plugin loads them instead of compiling:
	// empty for the default ($XDG_CACHE_HOME/agentrl-tui/xla, ~/.cache/agentrl-tui/xla), "off" for
	// none. The go (CPU) backend has no cache: it compiles a program in milliseconds.
	CompileCache string `mapstructure:"compile_cache" json:"compile_cache"`
}

// Memory is the device memory budget and how the ledger shares it between phases.
type Memory struct {
	// VRAM is the device memory budget: "auto" (what NVML reports free; no limit on the CPU) or a
	// size such as "24GiB" (GiB = 2^30 bytes) or "24GB" (GB = 10^9 bytes).
	VRAM string `mapstructure:"vram" json:"vram"`
	// KVSlots is the number of KV-cache slots (trajectories decoded at once): "auto" lets the
	// ledger choose the most that fit, up to rollout.tasks_per_step × rollout.group_size; a number
	// fixes it (an error when it does not fit).
	KVSlots AutoInt `mapstructure:"kv_slots" json:"kv_slots"`
	// OptimizerOffload says where AdamW moments live during rollout: "auto" (on the device when
	// the rollout phase still fits with the most slots, else on the host), "device" or "host".
	// During training they are always on the device.
	OptimizerOffload string `mapstructure:"optimizer_offload" json:"optimizer_offload"`
	// MasterOffload says where the float32 master weights live during rollout (and the reference
	// forward): "auto" (on the host only when rollout cannot reach its most KV slots otherwise,
	// decided after the moments), "device" or "host". During the update they are on the device.
	MasterOffload string `mapstructure:"master_offload" json:"master_offload"`
}

// Rollout controls generation.
type Rollout struct {
	// TasksPerStep is the number of distinct tasks sampled per training step.
	TasksPerStep int `mapstructure:"tasks_per_step" json:"tasks_per_step"`
	// GroupSize is the number of trajectories sampled per task (the GRPO group, n); at least 2 for
	// grpo and hybrid, whose advantages compare samples of the same task.
	GroupSize int `mapstructure:"group_size" json:"group_size"`
	// MaxTurns is the most assistant turns per trajectory (each may call the tool once).
	MaxTurns int `mapstructure:"max_turns" json:"max_turns"`
	// MaxNewTokens is the most tokens generated in one assistant turn.
	MaxNewTokens int `mapstructure:"max_new_tokens" json:"max_new_tokens"`
	// MaxTotalTokens is the most tokens of a whole trajectory: prompt, every turn and every
	// observation. It is the length of a KV-cache slot and of a training sequence.
	MaxTotalTokens int `mapstructure:"max_total_tokens" json:"max_total_tokens"`
	// MaxResponseTokens bounds the whole response of a trajectory: every token after the prompt,
	// sampled or observed, across its turns and tool calls (in env.format retool, the one
	// assistant turn with its <interpreter> blocks). A trajectory that reaches it ends unanswered,
	// as one that fills max_total_tokens does. 0: no bound but max_total_tokens.
	MaxResponseTokens int `mapstructure:"max_response_tokens" json:"max_response_tokens"`
	// Temperature scales logits before sampling; must be > 0 (RL needs diverse samples).
	Temperature float64 `mapstructure:"temperature" json:"temperature"`
	// TopP is nucleus sampling's probability mass, in (0, 1]; 1 disables it.
	TopP float64 `mapstructure:"top_p" json:"top_p"`
	// TopK keeps the k most likely tokens; 0 disables it.
	TopK int `mapstructure:"top_k" json:"top_k"`
	// Stop lists extra stop strings that end a turn. The end-of-turn token and the tool-call
	// close tag of the chat format always end a turn and need not be listed.
	Stop []string `mapstructure:"stop" json:"stop"`
	// Deterministic runs the generator in lockstep: which trajectories share a decode step, and
	// in which slot, follows from decode-step counts alone, never from wall time. A trajectory
	// whose turn ends on a tool call leaves the batch for tool_return_steps decode steps while the
	// others keep decoding, and its next turn is taken exactly then (the generator waits only if
	// the tool is later than that: tool_stall_share); waiting trajectories take freed slots in a
	// fixed order, a slot counting as freed at the step its trajectory's end is taken at. So the
	// sampled tokens and their log-probs (and so the whole run) depend only on the seed and the
	// weights, not on the tools' or goroutines' timing. Off, a turn is taken as soon as its tool
	// returns (the most throughput) and the sampled tokens depend on the tools' timing.
	Deterministic bool `mapstructure:"deterministic" json:"deterministic"`
	// ToolReturnSteps is, with Deterministic, how many decode steps one tool call is taken to
	// last: a trajectory stays out of the batch after a turn that calls a tool until its call
	// would end, and its next turn is taken then. With the python executor the calls share
	// env.sandbox.workers modelled workers in the order they were made, as they queue for the
	// sandbox, so a call made while others run comes back after them; a Starlark call never
	// waits for another. "auto" picks by env.executor: ToolReturnStarlark (1) for starlark, whose
	// calls take microseconds, well inside one step; ToolReturnPython (8) for python, whose calls
	// start a sandboxed interpreter (60-150 ms on a 2-core CPU, 4-8 decode steps of the built-in
	// model; tool_stall_share measured 1-4 % at 8, see docs/sandbox.md). Longer: fewer stalls, more
	// idle slot-steps; a loaded machine, or a faster decode step (a GPU), wants more.
	ToolReturnSteps AutoInt `mapstructure:"tool_return_steps" json:"tool_return_steps"`
	// Partial ends a step's rollout when its groups are complete instead of when its last
	// trajectory is (see Partial); off by default.
	Partial Partial `mapstructure:"partial" json:"partial"`
	// Engines are inference servers the rollout generates on instead of the local engine, each
	// "KIND URL [KEY_ENV]": KIND sglang, vllm or serve (agentrl-tui serve), URL its base
	// (http://host:port), KEY_ENV the variable holding its API key (else remote.api_key_env).
	// Tools, rewards, the PRM, scoring and training stay here. Empty: the local engine (see
	// docs/engines.md).
	Engines []string `mapstructure:"engines" json:"engines,omitempty"`
	// Remote tunes generation on Engines.
	Remote Remote `mapstructure:"remote" json:"remote,omitzero"`
}

// Partial is the partial rollout: a step's rollout phase ends as soon as tasks_per_step groups
// have all their samples done, with over_sample extra groups started so that the slots stay
// busy while the tail runs. The trajectories still running then are paused: their tokens, the
// log-prob each sampled token had and the policy version that sampled it are kept, their KV
// slot is freed, and they resume in the next step's rollout under the new weights (their kept
// tokens prefilled again). A group is trained once all its samples are done, with the decoupled
// objective (train.Decoupled) on the tokens older weights sampled; a sample whose oldest token
// is more than max_staleness updates old is dropped (stale_dropped) and left out of its group's
// statistics. With rollout.deterministic the pause point follows from decode-step counts, so
// runs stay reproducible. Evaluations always run whole. env.name retool only.
type Partial struct {
	// Enabled turns partial rollouts on (default false).
	Enabled bool `mapstructure:"enabled" json:"enabled"`
	// OverSample is how many groups beyond tasks_per_step are kept in flight, 0 … 64 (default 2).
	OverSample int `mapstructure:"over_sample" json:"over_sample"`
	// MaxStaleness is the most policy updates a trained token may lag the weights being trained,
	// 0 … 16 (default 1; 0 trains only tokens of the current weights).
	MaxStaleness int `mapstructure:"max_staleness" json:"max_staleness"`
}

// The steps rollout.tool_return_steps: auto gives each executor (see Rollout.ToolReturnSteps).
const (
	ToolReturnStarlark = 1
	ToolReturnPython   = 8
)

// ToolReturn is rollout.tool_return_steps with auto resolved for env.executor.
func (r *Recipe) ToolReturn() int {
	if !r.Rollout.ToolReturnSteps.IsAuto() {
		return int(r.Rollout.ToolReturnSteps)
	}
	if r.Env.Executor == "python" {
		return ToolReturnPython
	}
	return ToolReturnStarlark
}

// Env is the environment and its task set.
type Env struct {
	// Name is the environment: "retool" (math problems solved by writing code, the workbench
	// driving the model turn by turn) or "external" (an agent program per trajectory that calls
	// the model through an OpenAI-compatible endpoint; see env.external). The task set is the same
	// for both.
	Name string `mapstructure:"name" json:"name"`
	// Executor runs the model's code: "starlark" (in-process Starlark, always available) or
	// "python" (a python3 subprocess).
	Executor string `mapstructure:"executor" json:"executor"`
	// Session is "fresh" (every tool call starts from an empty interpreter) or "persistent"
	// (variables survive between the calls of one trajectory).
	Session string `mapstructure:"session" json:"session"`
	// Timeout bounds one tool call, as a Go duration such as "5s"; at most 10m.
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
	// Limits bounds what one tool call may use.
	Limits Limits `mapstructure:"limits" json:"limits"`
	// Sandbox isolates the python executor's code and sizes its worker pool.
	Sandbox Sandbox `mapstructure:"sandbox" json:"sandbox"`
	// Observation shapes the tool output the model reads.
	Observation Observation `mapstructure:"observation" json:"observation"`
	// Format is how a trajectory lies in the model's context (env.name retool): "chat" (every
	// turn closed by <|im_end|>, the tool output back as a user turn in observation.format),
	// "retool" (ReTool's layout: one assistant turn, generation stops at </code>, the output is
	// appended inside the turn as "\n<interpreter>\n…\n</interpreter>\n", kept in the context but
	// not trained on, and generation goes on) or "tool_call" (the chat template's tool calling:
	// the tools in the system turn, <tool_call> JSON, the output back as a tool message).
	Format string `mapstructure:"format" json:"format"`
	// SystemPrompt is the system turn: "" (the format's own, which tells the model how to run
	// code), the text itself, or "@PATH" to read it from a file (a relative PATH is relative to
	// the recipe file's folder).
	SystemPrompt string `mapstructure:"system_prompt" json:"system_prompt"`
	// Tools are the function schemas the chat template lists in the system turn, OpenAI's
	// function-schema JSON: "" (the format's own: the python tool for tool_call, none for chat
	// and retool), "python" (the python tool: one function with a code string parameter), a JSON
	// array written out, or "@PATH" to read the array from a file (relative to the recipe's
	// folder). A tool call may name any of them; its "code" argument runs.
	Tools string `mapstructure:"tools" json:"tools"`
	// MaxToolCalls bounds the code runs of one trajectory: a turn that asks for more ends the
	// trajectory unanswered without running it. 0: no bound but rollout.max_turns.
	MaxToolCalls int `mapstructure:"max_tool_calls" json:"max_tool_calls"`
	// SystemPromptFile and ToolsFile are what "@PATH" of system_prompt and tools read when the
	// recipe was loaded (ResolveFiles), kept with the recipe so a stored run needs no file.
	SystemPromptFile string `mapstructure:"-" json:"system_prompt_file,omitempty"`
	ToolsFile        string `mapstructure:"-" json:"tools_file,omitempty"`
	// Tasks is the task set.
	Tasks Tasks `mapstructure:"tasks" json:"tasks"`
	// LongTail makes trajectory lengths heavy-tailed: a workload on which the rollout's tail can
	// be seen and measured.
	LongTail LongTail `mapstructure:"long_tail" json:"long_tail"`
	// External is the agent program of env.name external.
	External External `mapstructure:"external" json:"external"`
}

// External runs an agent program once per trajectory (env.name external). The workbench serves
// the policy through an OpenAI-compatible endpoint and starts the command with OPENAI_BASE_URL
// (the endpoint), OPENAI_API_KEY (a key valid for this trajectory only) and AGENTRL_TASK (the task
// as JSON: id, prompt and meta, never the reference answer; the same JSON is on stdin). The agent
// calls the model as it would any model and prints, as its last non-empty stdout line, one JSON
// object: {"reward": r} (its own score) or {"answer": "…"} (scored by the ReTool verifier, as
// env.name retool scores a \boxed answer), plus an optional "info" object. An agent that crashes,
// outlives the timeout or prints no usable result is dropped from the step with the reason shown
// and counted; it and everything it started are killed. The ReTool settings of env (executor,
// session, timeout, limits, sandbox, observation) are not used: the agent runs its own tools.
// Such a run cannot be reproduced from its seed: rollout.deterministic must be false.
type External struct {
	// Command is the agent's argv, e.g. [node, agent.mjs]. The program (the first element) is a
	// name on PATH or a path, relative to dir unless absolute; the recipe does not load when it is
	// not found.
	Command []string `mapstructure:"command" json:"command"`
	// Dir is the agent's working folder; relative paths are relative to the current directory,
	// and empty means the current directory.
	Dir string `mapstructure:"dir" json:"dir"`
	// Workers is the most agents running at once: "auto" (one per KV-cache slot: memory.kv_slots,
	// or what the ledger chooses; more would only wait for a slot) or a number, at most 1024.
	Workers AutoInt `mapstructure:"workers" json:"workers"`
	// Timeout bounds one agent from start to exit, as a Go duration such as "5m"; above 0s and at
	// most 24h. An agent past it is stopped (SIGTERM, then SIGKILL, with everything it started)
	// and its trajectory dropped.
	Timeout time.Duration `mapstructure:"timeout" json:"timeout"`
	// Env adds environment variables for the agent, {NAME: value}, to those the workbench runs
	// with. OPENAI_BASE_URL, OPENAI_API_KEY and AGENTRL_TASK are the workbench's and cannot be set
	// here. As an override: AGENTRL_ENV_EXTERNAL_ENV=NAME=value,NAME2=value2.
	Env map[string]string `mapstructure:"env" json:"env"`
}

// Limits bounds one tool call.
type Limits struct {
	// MaxOutputBytes truncates the captured output of one call.
	MaxOutputBytes int `mapstructure:"max_output_bytes" json:"max_output_bytes"`
	// MaxSteps bounds the Starlark interpreter's execution steps per call (starlark executor).
	MaxSteps int `mapstructure:"max_steps" json:"max_steps"`
	// MaxMemoryMB bounds the address space of the python subprocess, in MiB (python executor).
	MaxMemoryMB int `mapstructure:"max_memory_mb" json:"max_memory_mb"`
}

// Sandbox isolates model-written code (python executor) and bounds how much runs at once.
type Sandbox struct {
	// Isolation is "strict" (the code reads only the interpreter, its standard library and the
	// allowed modules, writes only its own private folder, has no network and sees no other
	// process, as root or not; the run refuses to start where the kernel cannot give it) or
	// "none" (resource limits only: the code can read every file the user can and reach the
	// network; the Status pane says so in red).
	Isolation string `mapstructure:"isolation" json:"isolation"`
	// Python is the interpreter; empty means the system python3 (/usr/bin/python3).
	Python string `mapstructure:"python" json:"python"`
	// Modules are the third-party modules the code may import besides the standard library;
	// those the interpreter lacks are reported, not an error.
	Modules []string `mapstructure:"modules" json:"modules"`
	// Workers is the number of tool calls that run at once: "auto" (the machine's cores) or a
	// number.
	Workers AutoInt `mapstructure:"workers" json:"workers"`
}

// LongTail makes a share of the trajectories long (env.name retool). A long trajectory is not
// done when the model first gives an answer: until its Turns-th turn, every answer is met with a
// user turn asking to check the result with code once more (retool.Recheck), and the last
// answer given counts. Which trajectories are long follows from the task id and the sample
// alone (retool.LongTrajectory), so every run agrees; with the built-in model a trajectory takes
// about two turns (115 tokens, the median), so Turns 16 makes the long ones about eight times
// that. It changes what the tasks ask, so it is a workload for measuring the rollout phase, off
// by default.
type LongTail struct {
	// Share is the fraction of trajectories that are long, in [0, 1]; 0 turns it off.
	Share float64 `mapstructure:"share" json:"share"`
	// Turns is how many assistant turns a long task takes, 2 … rollout.max_turns.
	Turns int `mapstructure:"turns" json:"turns"`
}

// Observation shapes the tool output fed back to the model.
type Observation struct {
	// Format is, in env.format chat, "interpreter" (output wrapped in <interpreter>…</interpreter>,
	// as a user turn) or "tool_response" (a chat-format tool message). env.format retool always
	// observes in <interpreter> inside the assistant turn, tool_call always as a tool message.
	Format string `mapstructure:"format" json:"format"`
	// MaxChars truncates the observation text the model reads.
	MaxChars int `mapstructure:"max_chars" json:"max_chars"`
}

// Tasks is the task set: synthetic problems or a JSON Lines file.
type Tasks struct {
	// Source is "synthetic" (generated arithmetic word problems) or "jsonl" (the file in jsonl.path).
	Source string `mapstructure:"source" json:"source"`
	// Synthetic configures the generated task set (source synthetic).
	Synthetic Synthetic `mapstructure:"synthetic" json:"synthetic"`
	// JSONL configures a task file (source jsonl).
	JSONL JSONL `mapstructure:"jsonl" json:"jsonl"`
	// TrainSize is the number of training tasks drawn from the source.
	TrainSize int `mapstructure:"train_size" json:"train_size"`
	// HeldoutSize is the number of held-out tasks, disjoint from the training tasks.
	HeldoutSize int `mapstructure:"heldout_size" json:"heldout_size"`
}

// Synthetic configures generated tasks.
type Synthetic struct {
	// Levels lists the difficulty levels to draw from, each 0 (two-digit arithmetic, the built-in
	// model's level) to 5 (multi-step), or 6 (named operations: "the remainder of 47 and 13").
	Levels []int `mapstructure:"levels" json:"levels"`
	// Seed makes the generated task set reproducible, independent of run.seed.
	Seed int64 `mapstructure:"seed" json:"seed"`
}

// JSONL configures a task file with one JSON object per line.
type JSONL struct {
	// Path is the file; relative paths are relative to the current directory.
	Path string `mapstructure:"path" json:"path"`
	// IDField names the task id field; tasks without it are numbered by line.
	IDField string `mapstructure:"id_field" json:"id_field"`
	// PromptField names the problem text field.
	PromptField string `mapstructure:"prompt_field" json:"prompt_field"`
	// AnswerField names the reference answer field.
	AnswerField string `mapstructure:"answer_field" json:"answer_field"`
}

// Data takes a run's tasks from dataset files: the training problems from data.train, the
// held-out evaluation from the named data.eval sets (see package envs/dataset for the layouts
// read and the default field names). While Train is empty the tasks come from env.tasks as before.
type Data struct {
	// Train is the training data: a .jsonl or .parquet file or a folder of them (a HuggingFace
	// dataset folder, data/train-00000-of-00001.parquet), optionally followed by ":SPLIT"
	// (train, test, validation, …) to take one split. Validation tasks (eval.validation_tasks)
	// are taken from it, apart from the tasks trained on; so are env.tasks.heldout_size held-out
	// tasks when there is no data.eval set.
	Train string `mapstructure:"train" json:"train"`
	// Eval are the held-out evaluation sets, in order: each a name, a path as data.train's and a
	// size (its first size tasks; 0 takes all). The evaluation covers them all: pass@k over all
	// of them, and per set when there is more than one.
	Eval []EvalSet `mapstructure:"eval" json:"eval"`
	// Fields name, as dotted paths, the fields a row's parts are read from when the defaults do
	// not find them: {id: …, prompt: …, answer: …, split: …}. Empty uses the defaults.
	Fields map[string]string `mapstructure:"fields" json:"fields"`
	// PromptTemplate turns a dataset's problem into the user turn: each {problem} in it is
	// replaced by the problem text. Empty uses the problem as it is.
	PromptTemplate string `mapstructure:"prompt_template" json:"prompt_template"`
	// Shuffle shuffles the training tasks, seeded by run.seed, before the validation tasks and
	// train_size are taken; off, they are taken in file order.
	Shuffle bool `mapstructure:"shuffle" json:"shuffle"`
	// TrainSize is how many training tasks are kept; 0 keeps all.
	TrainSize int `mapstructure:"train_size" json:"train_size"`
	// AllowOverlap evaluates on problems that are also in the training data; off, such an
	// overlap (compared after white space and LaTeX spacing are normalised) stops the run with
	// the ids of the problems.
	AllowOverlap bool `mapstructure:"allow_overlap" json:"allow_overlap"`
}

// EvalSet is one named evaluation set of data.eval.
type EvalSet struct {
	// Name labels the set in the per-set pass@k: letters, digits, '.', '_' and '-'.
	Name string `mapstructure:"name" json:"name"`
	// Path is a file or folder, ":SPLIT" allowed, as data.train's.
	Path string `mapstructure:"path" json:"path"`
	// Size keeps the set's first size tasks; 0 keeps all.
	Size int `mapstructure:"size" json:"size"`
}

// Reward weighs the parts of a trajectory's total reward.
type Reward struct {
	// Outcome weighs the verifier's score of the final answer (1 correct, 0 wrong).
	Outcome float64 `mapstructure:"outcome" json:"outcome"`
	// Process weighs the PRM's process score (see prm.kind); must be 0 when prm.kind is none.
	Process float64 `mapstructure:"process" json:"process"`
	// Shaping weighs small shaping terms from the environment (e.g. a tool call that ran).
	Shaping float64 `mapstructure:"shaping" json:"shaping"`
	// FormatPenalty is subtracted when the final answer is missing or malformed.
	FormatPenalty float64 `mapstructure:"format_penalty" json:"format_penalty"`
	// LastNumberFallback lets a final answer that is not equal to a numeric reference count when
	// its last number is ("x = 3, so 42" for 42; envs/mathverify.Options). Off by default: it
	// rewards answers that merely end in the right number.
	LastNumberFallback bool `mapstructure:"last_number_fallback" json:"last_number_fallback"`
	// Grader judges the final answer (envs/grade): "verifier" (agentrl's mathematical verifier,
	// outcome 1 or 0), or a reference experiment's own function by name so that its numbers are
	// comparable: "math_dapo" (verl's math_dapo.compute_score with strict_box_verify, as verl's
	// ReTool recipe calls it, and that recipe's tool-call shaping of a wrong answer: +1 right,
	// -1 … -0.6 wrong), "math_dapo_slime" (the same as slime's ReTool example counts tool calls).
	// reward.outcome weighs the grader's score.
	Grader string `mapstructure:"grader" json:"grader,omitempty"`
}

// Graders are the names reward.grader takes (envs/grade.Names; a test holds them equal).
var Graders = []string{"math_dapo", "math_dapo_slime", "verifier"}

// Algorithm is the policy-gradient algorithm and its loss.
type Algorithm struct {
	// Name is "grpo" (group-normalised outcome advantages), "ppo" (GAE with a value head),
	// "hybrid" (GRPO + opd_lambda × OPD on hinted trajectories, the ReTool-RL recipe) or "opd"
	// (on-policy distillation only).
	Name string `mapstructure:"name" json:"name"`
	// Baseline is the group baseline for grpo and hybrid: "mean" (group mean) or "rloo"
	// (leave-one-out mean).
	Baseline string `mapstructure:"baseline" json:"baseline"`
	// PassK, when ≥ 1, scores each k-subset of a group by its best reward and gives every sample
	// the mean advantage of the subsets that hold it (pass@k training); 1 is plain GRPO, 0 off.
	// It puts the updates on tasks the policy rarely solves rather than on sharpening the ones it
	// often does, to keep pass@k at large k from being traded for pass@1 (on the built-in model it
	// learned slower than GRPO; see docs/experiments.md). At most rollout.group_size.
	PassK int `mapstructure:"pass_k" json:"pass_k"`
	// Estimator is how rewards become per-token advantages for grpo and hybrid: "group" (one
	// advantage per trajectory, by baseline and pass_k) or "step_wise" (the group advantage plus,
	// on each step's tokens, reward.process × the sum of the group-normalised verdicts of that
	// step and the ones after it, from prm.kind model; see train.StepWise).
	Estimator string `mapstructure:"estimator" json:"estimator,omitzero"`
	// StdNormalize divides group advantages by the group's standard deviation.
	StdNormalize bool `mapstructure:"std_normalize" json:"std_normalize"`
	// ClipLow is the lower PPO clip bound ε_low: the ratio is clipped below at 1 − ε_low; in (0, 1).
	ClipLow float64 `mapstructure:"clip_low" json:"clip_low"`
	// ClipHigh is the upper PPO clip bound ε_high: the ratio is clipped above at 1 + ε_high; in (0, 10].
	ClipHigh float64 `mapstructure:"clip_high" json:"clip_high"`
	// KLCoef weighs the KL divergence to the reference model; 0 disables it.
	KLCoef float64 `mapstructure:"kl_coef" json:"kl_coef"`
	// KLEstimator is "k1" (log-ratio) or "k3" (ratio − 1 − log-ratio, unbiased and non-negative).
	KLEstimator string `mapstructure:"kl_estimator" json:"kl_estimator"`
	// KLMode applies the KL as a "loss" term or as a per-token "reward" penalty.
	KLMode string `mapstructure:"kl_mode" json:"kl_mode"`
	// EntropyCoef weighs an entropy bonus; 0 disables it.
	EntropyCoef float64 `mapstructure:"entropy_coef" json:"entropy_coef"`
	// Aggregation reduces per-token losses: "token-mean" (over all policy tokens of the batch) or
	// "seq-mean" (per sequence, then over sequences).
	Aggregation string `mapstructure:"aggregation" json:"aggregation"`
	// OPDLambda weighs the OPD advantage (teacher − student log-prob) added to the GRPO advantage
	// on hinted trajectories; must be > 0 for hybrid and opd.
	OPDLambda float64 `mapstructure:"opd_lambda" json:"opd_lambda"`
	// GAEGamma is the discount γ of GAE (ppo), in [0, 1].
	GAEGamma float64 `mapstructure:"gae_gamma" json:"gae_gamma"`
	// GAELambda is the λ of GAE (ppo), in [0, 1].
	GAELambda float64 `mapstructure:"gae_lambda" json:"gae_lambda"`
	// ValueCoef weighs the value-head loss (ppo).
	ValueCoef float64 `mapstructure:"value_coef" json:"value_coef"`
}

// Hinter writes hindsight hints ("bridge thoughts") for failed or flawed trajectories.
type Hinter struct {
	// Kind is "none", "rules" (from tool errors, timeouts, wrong or missing answers; always
	// available), "self" (the policy prompted as a judge) or "openai" (an OpenAI-compatible chat
	// endpoint).
	Kind string `mapstructure:"kind" json:"kind"`
	// Endpoint is the base URL of the chat endpoint, e.g. "http://localhost:8000/v1" (openai only).
	Endpoint string `mapstructure:"endpoint" json:"endpoint"`
	// Model is the model name sent to the endpoint (openai only).
	Model string `mapstructure:"model" json:"model"`
	// APIKeyEnv is the name of the environment variable holding the API key (never the key
	// itself); empty sends no key (openai only).
	APIKeyEnv string `mapstructure:"api_key_env" json:"api_key_env"`
	// MaxHintTokens bounds the length of one hint, in tokens of the policy's tokenizer; 1 to 256.
	MaxHintTokens int `mapstructure:"max_hint_tokens" json:"max_hint_tokens"`
	// Gate is "none" (every hint reaches the teacher) or "lift": a hint reaches the teacher only
	// where it raises the reference model's log-prob of a known-correct solution of the task (its
	// reference demonstration when the task has one, else a correct trajectory of the same group)
	// above the same solution's without it; a hint that lowers it, one the teacher cannot read, is
	// dropped (hints_gated), and one with nothing to measure against is kept. It applies to every
	// hinter's hints and to the model PRM's. Each gated hint costs the reference one forward.
	Gate string `mapstructure:"gate" json:"gate,omitzero"`
}

// PRM chooses the process reward model.
type PRM struct {
	// Kind is "none", "rules" (recovered errors, tool use, format), "judge" (the policy prompted
	// as a judge, 0–10 from the last characters of the attempt) or "model" (a language model
	// that reads the whole trajectory with its tool outputs, gives each step a verdict and writes
	// one bridge thought or \boxed{-1}, in its own time-shared phase; the seed's PRM). Its score
	// enters the reward with weight reward.process (or per step, with algorithm.estimator
	// step_wise). The fields below are prm.kind model's, left out of the recipe's hash otherwise.
	Kind string `mapstructure:"kind" json:"kind"`
	// Model is the PRM's weights: "reference" (the run's reference model, its weights shared,
	// no second copy), "policy" (the policy being trained, on its rollout engine) or a
	// HuggingFace folder (Qwen3/Qwen2 with tokenizer.json, relative to the current directory),
	// loaded once and moved onto the device only for the PRM phase. With prm.endpoint it is the
	// model name the endpoint serves.
	Model string `mapstructure:"model" json:"model,omitzero"`
	// Prompt is the PRM's user turn: "@PATH" (a file, relative to the recipe file's folder) or ""
	// (the default, recipes/prm-retool.txt). {problem}, {answer}, {outcome}, {steps} and
	// {trajectory} are replaced (see docs in that file).
	Prompt string `mapstructure:"prompt" json:"prompt,omitzero"`
	// PromptFile is what "@PATH" of prompt read, kept with the recipe.
	PromptFile string `mapstructure:"-" json:"prompt_file,omitzero"`
	// Samples is how many replies the PRM writes per trajectory, 1 … 16: each step's reward is
	// the mean verdict over the well-formed replies, and the trajectory gets a hint when at least
	// half of them ask for one (default 1).
	Samples int `mapstructure:"samples" json:"samples,omitzero"`
	// Temperature samples the PRM's replies, in [0, 2]; 0 decodes greedily (default 0.6, the
	// seed's).
	Temperature float64 `mapstructure:"temperature" json:"temperature,omitzero"`
	// MaxNewTokens bounds one reply, 16 … 32768 (default 4096, the seed's).
	MaxNewTokens int `mapstructure:"max_new_tokens" json:"max_new_tokens,omitzero"`
	// MaxInputTokens is the most tokens of the prompt the PRM reads (template, problem and
	// trajectory, in the PRM's tokenizer): "auto" is rollout.max_total_tokens + 1024, the whole
	// trajectory with room for the template. A longer trajectory loses whole steps from its
	// middle (never a cut inside one), and the prompt says which.
	MaxInputTokens AutoInt `mapstructure:"max_input_tokens" json:"max_input_tokens,omitzero"`
	// KVSlots is the PRM's KV-cache slots (replies written at once): "auto" lets the ledger
	// choose (on the CPU backend, 16 or the step's trajectories if fewer); prm.model policy
	// writes on the rollout engine's slots.
	KVSlots AutoInt `mapstructure:"kv_slots" json:"kv_slots,omitzero"`
	// Endpoint is the base URL of an OpenAI-compatible server that runs the PRM elsewhere, e.g.
	// "http://judge:8000/v1"; "" runs it here. Then no PRM phase runs on this device.
	Endpoint string `mapstructure:"endpoint" json:"endpoint,omitzero"`
	// APIKeyEnv names the environment variable holding the endpoint's key (never the key); ""
	// sends none.
	APIKeyEnv string `mapstructure:"api_key_env" json:"api_key_env,omitzero"`
	// Timeout bounds one request to the endpoint, a Go duration, 1s … 1h (default 10m).
	Timeout time.Duration `mapstructure:"timeout" json:"timeout,omitzero"`
	// Retries is how many times a failed request is tried again, 0 … 10 (default 2); a
	// trajectory whose requests all fail is left unjudged (counted in prm_unjudged), and the step
	// goes on.
	Retries int `mapstructure:"retries" json:"retries,omitzero"`
}

// PRMModel is prm.kind model.
func (r *Recipe) PRMModel() bool { return r.PRM.Kind == "model" }

// PRMInputTokens is prm.max_input_tokens with auto resolved: rollout.max_total_tokens + 1024.
func (r *Recipe) PRMInputTokens() int {
	if r.PRM.MaxInputTokens.IsAuto() {
		return r.Rollout.MaxTotalTokens + 1024
	}
	return int(r.PRM.MaxInputTokens)
}

// PRMPhase reports whether the PRM runs as its own phase on this device: prm.kind model on
// the reference or a folder, not through an endpoint and not on the policy's rollout engine.
func (r *Recipe) PRMPhase() bool {
	return r.PRMModel() && r.PRM.Endpoint == "" && r.PRM.Model != "policy"
}

// Train holds the optimizer and batching settings.
type Train struct {
	// LR is the peak AdamW learning rate, in (0, 1).
	LR float64 `mapstructure:"lr" json:"lr"`
	// WarmupSteps ramps the learning rate linearly from 0 over this many steps.
	WarmupSteps int `mapstructure:"warmup_steps" json:"warmup_steps"`
	// Schedule after warm-up: "constant" or "cosine" (decays to min_lr_ratio × lr at run.max_steps).
	Schedule string `mapstructure:"schedule" json:"schedule"`
	// MinLRRatio is the final fraction of lr for the cosine schedule, in [0, 1].
	MinLRRatio float64 `mapstructure:"min_lr_ratio" json:"min_lr_ratio"`
	// WeightDecay is AdamW's decoupled weight decay, in [0, 1).
	WeightDecay float64 `mapstructure:"weight_decay" json:"weight_decay"`
	// Beta1 is AdamW's first-moment decay, in [0, 1).
	Beta1 float64 `mapstructure:"beta1" json:"beta1"`
	// Beta2 is AdamW's second-moment decay, in [0, 1).
	Beta2 float64 `mapstructure:"beta2" json:"beta2"`
	// Eps is AdamW's denominator epsilon, > 0.
	Eps float64 `mapstructure:"eps" json:"eps"`
	// GradClip is the global gradient-norm clip; 0 disables it.
	GradClip float64 `mapstructure:"grad_clip" json:"grad_clip"`
	// MicroBatch is the number of sequences per forward/backward pass: "auto" lets the memory
	// ledger choose the most that fit the GPU (up to the step's batch; on the CPU backend, which
	// has no budget to size against, 8 or the step's batch if smaller); a number fixes it.
	MicroBatch AutoInt `mapstructure:"micro_batch" json:"micro_batch"`
	// GradAccumulation is the number of micro-batches whose gradients are summed per optimizer
	// update: "auto" makes one update per pass over the step's batch; a number fixes it.
	GradAccumulation AutoInt `mapstructure:"grad_accumulation" json:"grad_accumulation"`
	// UpdatesPerStep splits a step's batch into this many optimizer updates, each over an equal
	// share of the micro-batches (slime's --num-steps-per-rollout), whatever micro-batch the ledger
	// picks; 0 leaves it to grad_accumulation. It cannot be set with grad_accumulation.
	UpdatesPerStep int `mapstructure:"updates_per_step" json:"updates_per_step,omitzero"`
	// GradientCheckpointing recomputes each layer's activations in the backward pass instead of
	// keeping them: less memory, about a third more compute.
	GradientCheckpointing bool `mapstructure:"gradient_checkpointing" json:"gradient_checkpointing"`
	// EpochsPerStep is the number of passes over a step's trajectories (1 = strictly on-policy).
	EpochsPerStep int `mapstructure:"epochs_per_step" json:"epochs_per_step"`
	// OptimizerBits is the precision of the AdamW moments: 32 (float32) or 8 (block-wise 8-bit:
	// m linear in int8, v logarithmic in √v, one float32 scale per 256 values; a quarter of the
	// memory, updates within a few percent of float32's).
	OptimizerBits int `mapstructure:"optimizer_bits" json:"optimizer_bits"`
	// LoRA trains low-rank adapters on a frozen base instead of every weight; rank 0 is off.
	LoRA LoRA `mapstructure:"lora" json:"lora"`
}

// LoRA configures low-rank adapters: W x + (alpha ÷ rank)·B A x on each targeted projection,
// A [rank, in] and B [out, rank]. The base stays frozen in the compute dtype, shared by rollout,
// training and the reference (the base with the adapters off).
type LoRA struct {
	// Rank is the adapters' rank; 0 trains every weight (no adapters).
	Rank int `mapstructure:"rank" json:"rank"`
	// Alpha scales the adapters' output by alpha ÷ rank, > 0.
	Alpha float64 `mapstructure:"alpha" json:"alpha"`
	// Targets are the projections that get adapters, from q_proj, k_proj, v_proj, o_proj,
	// gate_proj, up_proj and down_proj.
	Targets []string `mapstructure:"targets" json:"targets"`
}

// Eval controls pass@k evaluation on held-out tasks.
type Eval struct {
	// Every evaluates after every N training steps; 0 disables evaluation (and early stopping).
	Every int `mapstructure:"every" json:"every"`
	// Ks lists the k of pass@k, increasing, each at least 1 and at most n_samples.
	Ks []int `mapstructure:"ks" json:"ks"`
	// NSamples is the number of samples per held-out task (n of the unbiased pass@k estimator).
	NSamples int `mapstructure:"n_samples" json:"n_samples"`
	// HeldoutTasks is the number of held-out tasks evaluated, at most env.tasks.heldout_size.
	HeldoutTasks int `mapstructure:"heldout_tasks" json:"heldout_tasks"`
	// Temperature is the sampling temperature during evaluation, > 0.
	Temperature float64 `mapstructure:"temperature" json:"temperature"`
	// AtStart also evaluates before the first step (the starting point the run is compared to).
	AtStart bool `mapstructure:"at_start" json:"at_start"`
	// ValidationTasks is the number of validation tasks, disjoint from the training and held-out
	// tasks, evaluated with each evaluation: early stopping and the best checkpoint are chosen on
	// them, so the held-out pass@k stays a report. 0 chooses on the held-out tasks.
	ValidationTasks int `mapstructure:"validation_tasks" json:"validation_tasks"`
	// ValidationSamples is the number of samples per validation task.
	ValidationSamples int `mapstructure:"validation_samples" json:"validation_samples"`
	// StoreTrajectories keeps each evaluation's trajectories in the store (gzip-compressed, as a
	// step's are), so that view walks them; the validation tasks' are never kept.
	StoreTrajectories bool `mapstructure:"store_trajectories" json:"store_trajectories"`
	// MaxNewTokens is the evaluation's tokens per generation call (a longer budget than training's,
	// as the reference ReTool configuration evaluates); 0 is rollout.max_new_tokens. The
	// evaluation's context (MaxTotalTokens) bounds both.
	MaxNewTokens int `mapstructure:"max_new_tokens" json:"max_new_tokens,omitzero"`
	// MaxTotalTokens is the evaluation's context: the most tokens of one evaluation (or
	// validation) trajectory, prompt, turns and tool outputs; 0 is rollout.max_total_tokens.
	// Longer than rollout's, evaluation has KV slots of its own length in a phase of its own (the
	// reference ReTool configuration evaluates AIME at 32,768 tokens and rolls out at 16,384).
	MaxTotalTokens int `mapstructure:"max_total_tokens" json:"max_total_tokens,omitzero"`
}

// EvalTotalTokens is the evaluation's context: eval.max_total_tokens, or rollout.max_total_tokens
// when it is 0.
func (r *Recipe) EvalTotalTokens() int {
	if r.Eval.MaxTotalTokens > 0 {
		return r.Eval.MaxTotalTokens
	}
	return r.Rollout.MaxTotalTokens
}

// EvalSlotsOwn says whether evaluation has KV slots of its own: its context is longer than
// rollout's (an evaluation-only run sizes its one generator for the evaluation instead).
func (r *Recipe) EvalSlotsOwn() bool { return r.EvalTotalTokens() > r.Rollout.MaxTotalTokens }

// EarlyStop stops a run whose evaluation metric stopped improving. It needs eval.every > 0.
type EarlyStop struct {
	// Metric is "pass@K" with K one of eval.ks, or "reward" (mean held-out reward).
	Metric string `mapstructure:"metric" json:"metric"`
	// Patience stops after this many evaluations without a new best; 0 disables the rule.
	Patience int `mapstructure:"patience" json:"patience"`
	// MaxDrop stops when the metric falls more than this below the best seen, in [0, 1];
	// 0 disables the rule.
	MaxDrop float64 `mapstructure:"max_drop" json:"max_drop"`
}

// Checkpoint controls saving.
type Checkpoint struct {
	// Every saves after every N steps; 0 saves only at the end (and on Ctrl-C).
	Every int `mapstructure:"every" json:"every"`
	// KeepBest keeps the N checkpoints with the best early_stop.metric; needs eval.every > 0 when > 0.
	KeepBest int `mapstructure:"keep_best" json:"keep_best"`
	// KeepLast keeps the N most recent checkpoints; the best ones are kept in addition.
	KeepLast int `mapstructure:"keep_last" json:"keep_last"`
	// SaveOptimizer also saves AdamW moments, so a resumed run continues exactly.
	SaveOptimizer bool `mapstructure:"save_optimizer" json:"save_optimizer"`
}

// UI chooses the presentation.
type UI struct {
	// Mode is "auto" (the TUI when stdin and stdout are terminals, else plain), "tui", "plain"
	// (one line per event) or "json" (one JSON object per event).
	Mode string `mapstructure:"mode" json:"mode"`
}

// AutoInt is a count that may be "auto" in YAML; the value 0 means auto.
type AutoInt int

// IsAuto reports whether the count is left to the program.
func (a AutoInt) IsAuto() bool { return a == 0 }

// String returns "auto" or the number.
func (a AutoInt) String() string {
	if a == 0 {
		return "auto"
	}
	return itoa(int(a))
}

// Default returns a recipe with every field at its documented default: outcome-only GRPO on the
// synthetic ReTool tasks, sized for the built-in model on a CPU.
func Default() *Recipe {
	return &Recipe{
		Run:     Run{Name: "", Seed: 1, MaxSteps: 40, Store: "runs/agentrl.db"},
		Model:   Model{Path: "", DType: "auto", Attention: "auto"},
		Backend: Backend{Kind: "auto", Plugin: ""},
		Memory:  Memory{VRAM: "auto", KVSlots: 0, OptimizerOffload: "auto", MasterOffload: "auto"},
		Rollout: Rollout{
			TasksPerStep: 8, GroupSize: 8, MaxTurns: 3, MaxNewTokens: 96, MaxTotalTokens: 512,
			Temperature: 1.0, TopP: 1.0, TopK: 0, Stop: []string{}, Deterministic: true,
			Partial: Partial{Enabled: false, OverSample: 2, MaxStaleness: 1},
			Engines: []string{},
			Remote:  Remote{APIKeyEnv: "AGENTRL_ENGINE_API_KEY", WeightsDir: "", WeightsDType: "bf16", Push: "disk", Timeout: 5 * time.Minute, ProbeTolerance: 0},
		},
		Env: Env{
			Name: "retool", Executor: "starlark", Session: "fresh", Timeout: 5 * time.Second,
			Limits:      Limits{MaxOutputBytes: 1024, MaxSteps: 100000, MaxMemoryMB: 256},
			Sandbox:     Sandbox{Isolation: "strict", Python: "", Modules: []string{"numpy", "sympy"}, Workers: 0},
			Observation: Observation{Format: "interpreter", MaxChars: 512},
			Format:      "chat", SystemPrompt: "", Tools: "", MaxToolCalls: 0,
			LongTail: LongTail{Share: 0, Turns: 16},
			Tasks: Tasks{
				Source:    "synthetic",
				Synthetic: Synthetic{Levels: []int{1, 2, 3}, Seed: 7},
				JSONL:     JSONL{Path: "", IDField: "id", PromptField: "prompt", AnswerField: "answer"},
				TrainSize: 512, HeldoutSize: 64,
			},
			External: External{Command: []string{}, Dir: "", Workers: 0, Timeout: 5 * time.Minute, Env: map[string]string{}},
		},
		Data:   Data{Train: "", Eval: []EvalSet{}, Fields: map[string]string{}, PromptTemplate: "", Shuffle: true, TrainSize: 0, AllowOverlap: false},
		Reward: Reward{Outcome: 1.0, Process: 0, Shaping: 0, FormatPenalty: 0.1, Grader: "verifier"},
		Algorithm: Algorithm{
			Name: "grpo", Baseline: "mean", Estimator: "group", StdNormalize: true, ClipLow: 0.2, ClipHigh: 0.28,
			KLCoef: 0, KLEstimator: "k3", KLMode: "loss", EntropyCoef: 0, Aggregation: "token-mean",
			OPDLambda: 0.5, GAEGamma: 1.0, GAELambda: 0.95, ValueCoef: 0.5,
		},
		Hinter: Hinter{Kind: "none", Endpoint: "", Model: "", APIKeyEnv: "OPENAI_API_KEY", MaxHintTokens: 128, Gate: "none"},
		PRM: PRM{Kind: "none", Model: "reference", Samples: 1, Temperature: 0.6, MaxNewTokens: 4096,
			APIKeyEnv: "OPENAI_API_KEY", Timeout: 10 * time.Minute, Retries: 2},
		Train: Train{
			LR: 1e-5, WarmupSteps: 2, Schedule: "constant", MinLRRatio: 0.1, WeightDecay: 0.01,
			Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, GradClip: 1.0, MicroBatch: 0, GradAccumulation: 0,
			GradientCheckpointing: false, EpochsPerStep: 1, OptimizerBits: 32,
			LoRA: LoRA{Rank: 0, Alpha: 16, Targets: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}},
		},
		Eval:       Eval{Every: 5, Ks: []int{1, 2, 4, 8}, NSamples: 8, HeldoutTasks: 64, Temperature: 1.0, AtStart: true, ValidationSamples: 8, StoreTrajectories: true},
		EarlyStop:  EarlyStop{Metric: "pass@1", Patience: 0, MaxDrop: 0},
		Checkpoint: Checkpoint{Every: 10, KeepBest: 1, KeepLast: 2, SaveOptimizer: true},
		UI:         UI{Mode: "auto"},
	}
}

// BatchSize is the number of trajectories one training step produces and trains on.
func (r *Recipe) BatchSize() int { return r.Rollout.TasksPerStep * r.Rollout.GroupSize }

// UsesReference reports whether the frozen reference model is needed: for a KL term or as the
// OPD teacher (hybrid and opd).
func (r *Recipe) UsesReference() bool {
	return r.Algorithm.KLCoef > 0 || r.Algorithm.Name == "hybrid" || r.Algorithm.Name == "opd"
}
