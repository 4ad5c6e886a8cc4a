// Package event defines the values the controller emits on its one channel: phase timings,
// finished trajectories, step metrics, evaluations, checkpoints, ledger snapshots, alarms, and
// the run's start and end. The TUI and the headless reporters consume the same stream. Every
// event has a JSON form: one object per line with a "type" field.
package event

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"agentrl/envs"
)

// Event is any value on the stream.
type Event interface{ Type() string }

// RunStart opens a run.
type RunStart struct {
	RunID      string `json:"run_id"`
	Name       string `json:"name"`
	Recipe     string `json:"recipe"`
	TotalSteps int    `json:"total_steps"`
	Backend    string `json:"backend"`
	Model      string `json:"model"`
	MarkedBest int    `json:"marked_best,omitempty"` // a resumed run's checkpoint the user marked best, 0 when none
	// Kernels is the Go backend's matrix kernel set and why it was chosen ("avx512 kernels,
	// measured fastest on this CPU (…)"); empty on a GPU.
	Kernels string `json:"kernels,omitempty"`
	// Attention is the attention path training, the reference and scoring take over whole
	// sequences, and why ("chunked, blocks of 256 queries (…) (auto: the go backend has no fused
	// attention op …)"): the recipe's model.attention resolved on this backend.
	Attention string `json:"attention,omitempty"`
	// Sandbox is the isolation model-written code runs under (the python executor's description,
	// "NONE …" when the recipe turned it off); empty for the Starlark executor.
	Sandbox string `json:"sandbox,omitempty"`
	// Compiles are the programs compiled before the run started (the generator's steps), by kind.
	Compiles map[string]Compiled `json:"compiles,omitempty"`
	// CompileCache says where the XLA backend keeps compiled programs between runs ("compile
	// cache: DIR (N programs stored, …)"), or why there is none (the Go backend's "compile cache:
	// none (…)"); the hits and misses are in Compiles.
	CompileCache string `json:"compile_cache,omitempty"`
	// Evaluates names what an evaluation-only run (agentrl-tui eval) scores: "model DIR" or
	// "checkpoint RUN step N", with its evaluation set; empty for a training run.
	Evaluates string `json:"evaluates,omitempty"`
	// Kind is "sft" for a supervised fine-tuning run (sft --data: its steps' metrics are the
	// loss, which the workbench plots in place of pass@k); empty for an RL or evaluation run.
	Kind string `json:"kind,omitempty"`
	// Reward is the recipe's reward weights, which make a trajectory's total of its parts (nil:
	// not known, e.g. an SFT run).
	Reward *RewardWeights `json:"reward_weights,omitempty"`
}

// RewardWeights are the reward section's weights: total = outcome·Outcome + process·Process +
// shaping·Shaping − format penalty·FormatPenalty.
type RewardWeights struct {
	Outcome       float64 `json:"outcome"`
	Process       float64 `json:"process"`
	Shaping       float64 `json:"shaping"`
	FormatPenalty float64 `json:"format_penalty"`
}

// Compiled is what one kind of compiled program cost: how many distinct programs (one per input
// shape signature of an executable) and the seconds spent building and compiling them; with the
// XLA backend's compilation cache, how many of those were loaded from it (CacheHits) and how many
// compiled and stored (CacheMisses).
type Compiled struct {
	Programs    int     `json:"programs"`
	Seconds     float64 `json:"seconds"`
	CacheHits   int     `json:"cache_hits,omitempty"`
	CacheMisses int     `json:"cache_misses,omitempty"`
}

// CompiledTotal sums every kind's Compiled.
func CompiledTotal(kinds map[string]Compiled) Compiled {
	var t Compiled
	for _, k := range kinds {
		t.Programs += k.Programs
		t.Seconds += k.Seconds
		t.CacheHits += k.CacheHits
		t.CacheMisses += k.CacheMisses
	}
	return t
}

// Phase names, in the order a step runs them.
const (
	PhaseRollout   = "rollout"
	PhasePRM       = "prm" // the model PRM (prm.kind model) judging the rollout's trajectories
	PhaseScore     = "score"
	PhaseReference = "reference" // reference / teacher forward
	PhaseAdvantage = "advantage"
	PhaseTrain     = "train"
	PhaseSync      = "sync"
	PhaseEval      = "eval"
	PhaseSave      = "save"
	// PhaseValidate names the progress of an evaluation's validation tasks (part of PhaseEval).
	PhaseValidate = "validate"
)

// Phases lists the phase names in the order a step runs them.
func Phases() []string {
	return []string{PhaseRollout, PhasePRM, PhaseScore, PhaseReference, PhaseAdvantage, PhaseTrain, PhaseSync, PhaseEval, PhaseSave}
}

// Phase reports a finished phase of a step and how long it took.
type Phase struct {
	Step    int     `json:"step"`
	Phase   string  `json:"phase"` // rollout | prm | score | reference | advantage | train | sync | eval | save
	Seconds float64 `json:"seconds"`
}

// Turn is one assistant turn of a trajectory as shown to people. An external agent's trajectory
// (env.name external) has one per request the agent made: Assistant is the reply as the model
// wrote it, ToolCalls the OpenAI tool calls it returned, Sent the messages the agent added
// before its next request (tool results, user turns: what the model read next), and Observation
// their text; ToolStatus is read from that text when it is a ReTool interpreter's output. A
// tool call keeps its name and its arguments as the model wrote them (envs.TextArguments), not
// its id; a sent message (and an Agent's Opening one) its role, content, name and tool call id.
type Turn struct {
	Assistant   string  `json:"assistant"`
	Code        string  `json:"code,omitempty"`
	Observation string  `json:"observation,omitempty"`
	ToolStatus  string  `json:"tool_status,omitempty"`
	ToolSeconds float64 `json:"tool_seconds,omitempty"`
	// External agents only.
	ToolCalls []envs.ToolCall `json:"tool_calls,omitempty"`
	Sent      []envs.Message  `json:"sent,omitempty"`
	// NewSegment marks a request that did not extend the previous conversation (the agent
	// rewrote its history): its context was rendered afresh and is trained as a sequence of its
	// own.
	NewSegment bool `json:"new_segment,omitempty"`
	// Finish is the reply's finish_reason (stop, length, tool_calls).
	Finish string `json:"finish,omitempty"`
}

// Agent is what an external agent's run adds to its trajectory.
type Agent struct {
	// Drop is why the trajectory was dropped (crashed, timeout, no_result, bad_result,
	// no_requests, not_started, cancelled) and Dropped says it in a sentence; both "" when it is
	// usable. A dropped trajectory is not trained on and is left out of its group's statistics;
	// in an evaluation it counts as a wrong sample.
	Drop    string `json:"drop,omitempty"`
	Dropped string `json:"dropped,omitempty"`
	// Answer is the agent's {"answer"} (scored by the verifier); Reward its own {"reward"}.
	Answer *string  `json:"answer,omitempty"`
	Reward *float64 `json:"reward,omitempty"`
	// Info is the result's "info" object as the agent wrote it.
	Info json.RawMessage `json:"info,omitempty"`
	// StderrTail is the end of the agent's stderr.
	StderrTail string `json:"stderr_tail,omitempty"`
	// ExitCode is the agent's exit status (-1 when a signal ended it, Signal names it).
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	// Seconds is the agent's run from start to exit; Queued the wait for a worker before it.
	Seconds float64 `json:"seconds"`
	Queued  float64 `json:"queued,omitempty"`
	// Requests counts the requests it made (answered or refused); Segments the training
	// sequences they left (one while every request extends the conversation).
	Requests int `json:"requests"`
	Segments int `json:"segments"`
	// Opening are the messages of its first request (the system prompt and the problem as the
	// agent wrote them).
	Opening []envs.Message `json:"opening,omitempty"`
}

// IsDropped reports whether t is an external agent's trajectory that was dropped.
func (t *Trajectory) IsDropped() bool { return t.Agent != nil && t.Agent.Drop != "" }

// Trajectory is one finished trajectory.
type Trajectory struct {
	Step       int         `json:"step"`
	TaskID     string      `json:"task_id"`
	Prompt     string      `json:"prompt"`
	Group      int         `json:"group"`
	Sample     int         `json:"sample"`
	Turns      []Turn      `json:"turns"`
	Reward     envs.Reward `json:"reward"`
	Correct    bool        `json:"correct"`
	Hint       string      `json:"hint,omitempty"`
	Tokens     int         `json:"tokens"`
	ToolErrors int         `json:"tool_errors"`
	// Pieces and Advantages are the response tokens' text and advantage, for the heat map.
	Pieces     []string  `json:"pieces,omitempty"`
	Advantages []float32 `json:"advantages,omitempty"`
	// Eval marks a held-out evaluation trajectory (Step is the step evaluated); it trains nothing.
	Eval bool `json:"eval,omitempty"`
	// Agent is the external agent's run (env.name external); nil for the ReTool loop's.
	Agent *Agent `json:"agent,omitempty"`
	// PRM is what the model PRM (prm.kind model) said of the trajectory; nil without one.
	PRM *PRM `json:"prm,omitempty"`
	// Partial rollouts (rollout.partial): Paused marks a trajectory the step's rollout paused
	// unfinished (it resumes in a later step and is shown again when it trains); Segments are
	// the stretches of a trajectory sampled in different steps' rollouts, one per phase it ran
	// in, with the policy version of each (nil for one sampled in one phase).
	Paused   bool      `json:"paused,omitempty"`
	Segments []Segment `json:"segments,omitempty"`
}

// PRM statuses (PRM.Status).
const (
	PRMJudged    = "judged"    // at least one well-formed reply
	PRMMalformed = "malformed" // every reply malformed: no verdicts, no hint, the rules' process score
	PRMUnjudged  = "unjudged"  // the PRM could not be asked (its endpoint failed past its retries) or nothing fit its budget
)

// PRM is the model PRM's judgement of one trajectory (prm.kind model).
type PRM struct {
	Status string `json:"status"` // judged | malformed | unjudged
	// Verdicts has one entry per step (the policy's stretches between tool outputs): the mean
	// verdict over the well-formed replies, 1 correct and 0 wrong; −1 for a step without one (left
	// out of the PRM's prompt). Empty unless judged.
	Verdicts []float64 `json:"verdicts,omitempty"`
	// Replies is how many replies were asked for, Malformed how many of them could not be read.
	Replies   int `json:"replies"`
	Malformed int `json:"malformed,omitempty"`
	// Hint: the PRM asked for a bridge thought (the trajectory's Hint holds it, unless it did not
	// fit hinter.max_hint_tokens or the algorithm has no teacher).
	Hint bool `json:"hint,omitempty"`
	// Why says what was malformed or why it is unjudged.
	Why string `json:"why,omitempty"`
}

// Segment is a stretch of a trajectory's response sampled in one rollout phase: from response
// token From (an index into Pieces) on, in step Step's rollout, by the weights of policy version
// Version (the updates applied to them: step − 1 without a resumed run).
type Segment struct {
	From    int `json:"from"`
	Step    int `json:"step"`
	Version int `json:"version"`
}

// StepMetrics are one training step's numbers.
type StepMetrics struct {
	Step    int                `json:"step"`
	Metrics map[Metric]float64 `json:"metrics"`
	// Compiles are the programs compiled so far in the run, by kind (Metrics has the totals:
	// compiles, compiles_new, compile_s, compile_total_s).
	Compiles map[string]Compiled `json:"compiles,omitempty"`
}

// Generation is how one generation phase (a step's rollout, an evaluation or its validation)
// used the generator's KV slots, emitted as the phase ends. The rollout's four numbers are also
// in the step's metrics (rollout_occupancy, rollout_tail_s, tool_stall_share, tool_queue_s).
type Generation struct {
	Step  int    `json:"step"`
	Phase string `json:"phase"` // rollout | eval | validate
	Slots int    `json:"slots"`
	Steps int64  `json:"steps"` // decode and prefill steps run
	// Occupancy is the share of slot-steps that had a request in progress: busy slot-steps ÷
	// (slots × steps). A slot is idle while its trajectory runs a tool or while no trajectory
	// holds it (the queue ran dry: the tail).
	Occupancy float64 `json:"occupancy"`
	// TailSeconds is the time from the moment 90 % of the phase's trajectories had finished to
	// the end of the last.
	TailSeconds float64 `json:"tail_s"`
	// ToolStallShare is the share of the phase's decode time (device steps plus stalls) that the
	// batch stood still, with requests to decode, because the deterministic schedule waited for a
	// trajectory's tool (or its next turn, or its end).
	ToolStallShare float64 `json:"tool_stall_share"`
	// ToolQueueSeconds is the time the phase's trajectories waited for a sandbox worker.
	ToolQueueSeconds float64 `json:"tool_queue_s"`
	// Trace is the occupancy over the phase, each point the mean over TraceEvery steps.
	Trace      []float64 `json:"trace,omitempty"`
	TraceEvery int       `json:"trace_every,omitempty"`
}

// Eval is pass@k on the held-out tasks.
type Eval struct {
	Step    int
	PassAtK map[int]float64
	Best    bool // the best so far by the early-stopping metric
	// ByLevel is pass@k over the tasks of each difficulty level (the task's "level", when its
	// source gives one), so a user sees where a change in PassAtK comes from. Nil when no task has
	// a level.
	ByLevel map[string]map[int]float64
	// BySet is pass@k over each evaluation set (data.eval, by name) when there is more than
	// one; PassAtK is over them all. Nil otherwise.
	BySet map[string]map[int]float64 `json:",omitempty"`
	// Change is pass@k's change since the run's first evaluation (step Since) on the same tasks,
	// with its paired standard error, so a user can tell a gain from the noise of one evaluation.
	// Nil on the first evaluation.
	Change map[int]Delta
	Since  int
	// Validation is pass@k on the validation tasks (eval.validation_tasks), on which the best
	// checkpoint and early stopping are chosen; nil without them (then they are chosen on PassAtK).
	Validation map[int]float64 `json:",omitempty"`
	// Counts are each held-out task's (samples, correct) and Tasks their fingerprint
	// (envs.Fingerprint), which the store keeps so a later evaluation of the same tasks can be
	// compared task by task; not part of the event stream's JSON.
	Counts [][2]int `json:"-"`
	Tasks  string   `json:"-"`
}

// Delta is a change and its standard error.
type Delta struct {
	Mean float64 `json:"mean"`
	SE   float64 `json:"se"`
}

// ChangeSince is pass@k's change, for each k, from a first evaluation's per-task (samples,
// correct) counts to these, with its paired standard error (envs.PassAtKChange); nil when the two
// cannot be compared task by task (other tasks, too few of them, or a k the first evaluation's
// samples cannot estimate, after a resume with another recipe).
func ChangeSince(first, counts [][2]int, ks []int) map[int]Delta {
	if len(first) != len(counts) || len(counts) < 2 {
		return nil
	}
	ch := make(map[int]Delta, len(ks))
	for _, k := range ks {
		d, se, err := envs.PassAtKChange(first, counts, k)
		if err != nil {
			return nil
		}
		ch[k] = Delta{Mean: d, SE: se}
	}
	return ch
}

func byK(p map[int]float64) map[string]float64 {
	m := make(map[string]float64, len(p))
	for k, v := range p {
		m[strconv.Itoa(k)] = v
	}
	return m
}

func fromByK(p map[string]float64) (map[int]float64, error) {
	m := make(map[int]float64, len(p))
	for k, v := range p {
		n, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("pass_at_k key %q is not an integer", k)
		}
		m[n] = v
	}
	return m, nil
}

// MarshalJSON writes pass_at_k keyed by k as strings: {"1": 0.41, "8": 0.77}, by_level, when
// there is one, as {"0": {"1": 0.9, "8": 1}, "1": {…}}, by_set likewise by set name, and change, when there is one, as
// {"8": {"mean": 0.05, "se": 0.02}} with since, the step it is measured from.
func (e Eval) MarshalJSON() ([]byte, error) {
	var levels map[string]map[string]float64
	if len(e.ByLevel) > 0 {
		levels = make(map[string]map[string]float64, len(e.ByLevel))
		for l, p := range e.ByLevel {
			levels[l] = byK(p)
		}
	}
	var sets map[string]map[string]float64
	if len(e.BySet) > 0 {
		sets = make(map[string]map[string]float64, len(e.BySet))
		for name, p := range e.BySet {
			sets[name] = byK(p)
		}
	}
	var change map[string]Delta
	var since *int
	if len(e.Change) > 0 {
		change, since = make(map[string]Delta, len(e.Change)), &e.Since
		for k, d := range e.Change {
			change[strconv.Itoa(k)] = d
		}
	}
	return json.Marshal(struct {
		Step    int                           `json:"step"`
		PassAtK map[string]float64            `json:"pass_at_k"`
		Best    bool                          `json:"best"`
		ByLevel map[string]map[string]float64 `json:"by_level,omitempty"`
		BySet   map[string]map[string]float64 `json:"by_set,omitempty"`
		Change  map[string]Delta              `json:"change,omitempty"`
		Since   *int                          `json:"since,omitempty"`
	}{e.Step, byK(e.PassAtK), e.Best, levels, sets, change, since})
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (e *Eval) UnmarshalJSON(data []byte) error {
	var v struct {
		Step    int                           `json:"step"`
		PassAtK map[string]float64            `json:"pass_at_k"`
		Best    bool                          `json:"best"`
		ByLevel map[string]map[string]float64 `json:"by_level"`
		BySet   map[string]map[string]float64 `json:"by_set"`
		Change  map[string]Delta              `json:"change"`
		Since   int                           `json:"since"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	p, err := fromByK(v.PassAtK)
	if err != nil {
		return err
	}
	*e = Eval{Step: v.Step, Best: v.Best, PassAtK: p}
	for l, lp := range v.ByLevel {
		p, err := fromByK(lp)
		if err != nil {
			return fmt.Errorf("by_level %q: %w", l, err)
		}
		if e.ByLevel == nil {
			e.ByLevel = map[string]map[int]float64{}
		}
		e.ByLevel[l] = p
	}
	for name, sp := range v.BySet {
		p, err := fromByK(sp)
		if err != nil {
			return fmt.Errorf("by_set %q: %w", name, err)
		}
		if e.BySet == nil {
			e.BySet = map[string]map[int]float64{}
		}
		e.BySet[name] = p
	}
	for ks, d := range v.Change {
		k, err := strconv.Atoi(ks)
		if err != nil {
			return fmt.Errorf("change key %q is not an integer", ks)
		}
		if e.Change == nil {
			e.Change, e.Since = map[int]Delta{}, v.Since
		}
		e.Change[k] = d
	}
	return nil
}

// Levels returns the levels of ByLevel in order (numerically when they are numbers).
// Sets is the names of BySet's evaluation sets, sorted.
func (e Eval) Sets() []string {
	names := make([]string, 0, len(e.BySet))
	for name := range e.BySet {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (e Eval) Levels() []string {
	ls := make([]string, 0, len(e.ByLevel))
	for l := range e.ByLevel {
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool {
		a, ea := strconv.Atoi(ls[i])
		b, eb := strconv.Atoi(ls[j])
		if ea == nil && eb == nil {
			return a < b
		}
		return ls[i] < ls[j]
	})
	return ls
}

// Ks returns the evaluated k in increasing order.
func (e Eval) Ks() []int {
	ks := make([]int, 0, len(e.PassAtK))
	for k := range e.PassAtK {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// Checkpoint reports a saved checkpoint.
type Checkpoint struct {
	Step  int    `json:"step"`
	ID    string `json:"id,omitempty"` // where it is kept (store run/step or a folder), "" when unnamed
	Bytes int64  `json:"bytes"`        // weights and what else it keeps (AdamW moments, a value head)
	// WeightBytes is the policy's weights alone (what an export writes), 0 when not known.
	WeightBytes int64              `json:"weight_bytes,omitempty"`
	Metrics     map[string]float64 `json:"metrics,omitempty"`
	Best        bool               `json:"best"`
}

// Ledger is a snapshot of device memory: the engine's own accounting and, on a GPU, NVML.
type Ledger struct {
	Backend     string           `json:"backend"`
	Components  map[string]int64 `json:"components"`
	Budget      int64            `json:"budget"`
	DeviceUsed  uint64           `json:"device_used,omitempty"`
	DeviceTotal uint64           `json:"device_total,omitempty"`
	UtilPct     uint32           `json:"util_pct,omitempty"`
}

// Engines is the state of the inference servers of rollout.engines (engine/remote), one entry
// each in the recipe's order: emitted every few seconds while trajectories generate on them,
// and after each step's weight push.
type Engines struct {
	// Weights is the step whose update the engines were last given (the start's: the step
	// before the run's first).
	Weights int           `json:"weights"`
	Phase   string        `json:"phase"` // EnginesGenerate or EnginesSync
	Engines []EngineState `json:"engines"`
}

// Engines phases: when the state was taken.
const (
	EnginesGenerate = "generate" // while trajectories generate (rollout, evaluation)
	EnginesSync     = "sync"     // after a step's weight push and probe
)

// EngineState is one engine: whether it is in the rotation, and its counters since the run
// started.
type EngineState struct {
	URL  string `json:"url"`
	Kind string `json:"kind"` // sglang | vllm | serve
	Up   bool   `json:"up"`
	// Down is why it left the rotation ("" while up).
	Down     string `json:"down,omitempty"`
	InFlight int    `json:"in_flight"` // generation requests in flight
	Done     int64  `json:"done"`      // generation requests answered
	Tokens   int64  `json:"tokens"`    // tokens generated
	// TokensPerSec is its rate while it had requests in flight, over the time since the
	// previous Engines event (over the run when that time is too short to measure).
	TokensPerSec float64 `json:"tokens_per_s"`
	// Failovers are requests that failed here and went to another engine; Errors, requests it
	// refused and weight pushes or probes that failed on it.
	Failovers int64 `json:"failovers"`
	Errors    int64 `json:"errors"`
}

// Alarm kinds raised by the correctness probes.
const (
	AlarmLogProbMismatch = "logprob_mismatch"
	AlarmTokenDrift      = "token_drift"
	AlarmStaleWeights    = "stale_weights"
	AlarmHintUseless     = "hint_useless"
)

// Alarm is a correctness probe past its threshold.
type Alarm struct {
	Step      int     `json:"step"`
	Kind      string  `json:"kind"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Message   string  `json:"message"`
	// Below marks a probe that alarms at or below its threshold (hint_useless) rather than above.
	Below bool `json:"below,omitempty"`
}

// Compare is the value against the threshold as the alarm reads: "1.2 > 0" or "-0.4 ≤ 0".
func (a Alarm) Compare() string {
	if a.Below {
		return fmt.Sprintf("%.3g ≤ %.3g", a.Value, a.Threshold)
	}
	return fmt.Sprintf("%.3g > %.3g", a.Value, a.Threshold)
}

// Progress reports progress within a long phase (rollout, eval): one event per finished
// trajectory, with the time left in the phase and in the run.
type Progress struct {
	Step  int    `json:"step"`
	Phase string `json:"phase"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
	// ETA is the estimated seconds left in this phase, from its own pace; 0 when unknown.
	ETA float64 `json:"eta_s,omitempty"`
	// RunETA is the estimated seconds left in the run: this phase, the steps and evaluations
	// still to come at the durations measured so far. RunETAAtLeast says it is a lower bound:
	// no training step has been timed yet, so only generation is counted for the steps ahead.
	RunETA        float64 `json:"run_eta_s,omitempty"`
	RunETAAtLeast bool    `json:"run_eta_at_least,omitempty"`
	// An evaluation fills pass@k in as its tasks complete: Tasks held-out tasks, TasksDone of
	// them with every sample finished, PassAtK the unbiased estimate over those (nil until one is).
	Tasks     int             `json:"tasks,omitempty"`
	TasksDone int             `json:"tasks_done,omitempty"`
	PassAtK   map[int]float64 `json:"pass_at_k,omitempty"`
}

// Stopping says, as soon as a stop is asked for or decided, what the run does before it ends:
// what it drops (generation and evaluation are abandoned; an update is finished or discarded)
// and which step's checkpoint it ends with.
type Stopping struct {
	Step   int    `json:"step"`            // the step in progress (0: the start evaluation)
	Phase  string `json:"phase,omitempty"` // the phase in progress, "" between steps or while paused
	Reason string `json:"reason"`          // why: "stopped by the user", "terminated (SIGTERM)", …
	// Message is what happens, for people: "stopping now: the evaluation of step 0 is dropped; …".
	Message string `json:"message"`
	// Save is the step the run ends with a checkpoint of (0: no step was trained, none is saved).
	Save int `json:"save"`
}

// RunEnd closes a run.
type RunEnd struct {
	Status   string `json:"status"` // finished | stopped | failed
	Reason   string `json:"reason,omitempty"`
	BestStep int    `json:"best_step"`
	Marked   bool   `json:"marked,omitempty"` // BestStep is the user's mark, not the automatic choice
	// Detail says what a stop dropped ("the evaluation of step 15 was dropped (40 of 128 tasks
	// done)"); "" when nothing was.
	Detail string `json:"detail,omitempty"`
	// Step is the last step trained; Checkpoint the step of the run's latest checkpoint (0: none).
	Step       int `json:"step"`
	Checkpoint int `json:"checkpoint"`
	// Evaluations counts the evaluations the run finished (a resumed run's earlier ones too). With
	// none, BestStep names no step: no evaluation chose one.
	Evaluations int `json:"evaluations"`
	// EvalOnly marks the end of an evaluation-only run (agentrl-tui eval): it trains, saves and
	// chooses nothing, so BestStep, Step and Checkpoint say nothing.
	EvalOnly bool `json:"eval_only,omitempty"`
	// SFT marks the end of a supervised fine-tuning run (sft --data): it evaluates and chooses
	// no best step; Step and Checkpoint say where it stands.
	SFT bool `json:"sft,omitempty"`
}

// Error is a non-fatal problem worth showing.
type Error struct {
	Message string `json:"message"`
}

// Type names.
func (RunStart) Type() string    { return "run_start" }
func (Phase) Type() string       { return "phase" }
func (Trajectory) Type() string  { return "trajectory" }
func (StepMetrics) Type() string { return "metrics" }
func (Generation) Type() string  { return "generation" }
func (Eval) Type() string        { return "eval" }
func (Checkpoint) Type() string  { return "checkpoint" }
func (Ledger) Type() string      { return "ledger" }
func (Engines) Type() string     { return "engines" }
func (Alarm) Type() string       { return "alarm" }
func (Progress) Type() string    { return "progress" }
func (Stopping) Type() string    { return "stopping" }
func (RunEnd) Type() string      { return "run_end" }
func (Error) Type() string       { return "error" }

// Marshal writes one event as a JSON object with its "type" first.
func Marshal(e Event) ([]byte, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("event %s did not marshal to an object", e.Type())
	}
	out := []byte(`{"type":` + strconv.Quote(e.Type()))
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}

// Unmarshal reads one JSON line back into its typed event.
func Unmarshal(line []byte) (Event, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("event line is not a JSON object: %w", err)
	}
	var e Event
	switch head.Type {
	case "run_start":
		e = &RunStart{}
	case "phase":
		e = &Phase{}
	case "trajectory":
		e = &Trajectory{}
	case "metrics":
		e = &StepMetrics{}
	case "generation":
		e = &Generation{}
	case "eval":
		e = &Eval{}
	case "checkpoint":
		e = &Checkpoint{}
	case "ledger":
		e = &Ledger{}
	case "engines":
		e = &Engines{}
	case "alarm":
		e = &Alarm{}
	case "progress":
		e = &Progress{}
	case "stopping":
		e = &Stopping{}
	case "run_end":
		e = &RunEnd{}
	case "error":
		e = &Error{}
	case "":
		return nil, fmt.Errorf(`event line has no "type" field (want one of %s)`, typeList)
	default:
		return nil, fmt.Errorf("event: unknown type %q (want one of %s)", head.Type, typeList)
	}
	if err := json.Unmarshal(line, e); err != nil {
		return nil, fmt.Errorf("event %s: %w", head.Type, err)
	}
	return deref(e), nil
}

const typeList = "run_start, phase, trajectory, metrics, generation, eval, checkpoint, ledger, engines, alarm, progress, stopping, run_end, error"

func deref(e Event) Event {
	switch v := e.(type) {
	case *RunStart:
		return *v
	case *Phase:
		return *v
	case *Trajectory:
		return *v
	case *StepMetrics:
		return *v
	case *Generation:
		return *v
	case *Eval:
		return *v
	case *Checkpoint:
		return *v
	case *Ledger:
		return *v
	case *Engines:
		return *v
	case *Alarm:
		return *v
	case *Progress:
		return *v
	case *Stopping:
		return *v
	case *RunEnd:
		return *v
	case *Error:
		return *v
	}
	return e
}
