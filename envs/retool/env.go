package retool

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"time"

	"agentrl/envs"
	"agentrl/envs/grade"
	"agentrl/envs/mathverify"
	"agentrl/envs/sandbox"
)

// Layout is how a trajectory lies in the model's context (the recipe's env.format).
type Layout string

// Layouts.
const (
	// LayoutChat: every assistant turn is closed with <|im_end|> and its tool output comes back as
	// a new user turn (or tool turn) in the observation format (env.observation.format).
	LayoutChat Layout = "chat"
	// LayoutReTool is ReTool's own layout: the response is one assistant turn; generation stops
	// at </code>, the sandbox runs the block (a ```python fence in it optional) and its output is
	// appended inside the same turn as InTurnObservation renders it, and generation goes on. The
	// response ends with the turn (<|im_end|>), its answer the last \boxed{…}.
	LayoutReTool Layout = "retool"
	// LayoutToolCall is the chat template's own tool calling: the tools in the system turn, the
	// model writes <tool_call>{"name": "python", "arguments": {"code": …}}</tool_call>, generation
	// stops at </tool_call>, the turn is closed with <|im_end|> and the output comes back as a
	// tool message (the template's <tool_response>).
	LayoutToolCall Layout = "tool_call"
)

// Layouts lists the layouts in the order the recipe documents them.
var Layouts = []Layout{LayoutChat, LayoutReTool, LayoutToolCall}

// CheckLayout reports whether s names a layout, with an error that names the choices.
func CheckLayout(s string) error {
	if slices.Contains(Layouts, Layout(s)) {
		return nil
	}
	return fmt.Errorf("format %q is not one of chat, retool or tool_call", s)
}

// Stop is the string that ends generation for a tool call in the layout.
func (l Layout) Stop() string {
	if l == LayoutToolCall {
		return "</tool_call>"
	}
	return "</code>"
}

// InTurnObservation is a tool result as the retool layout appends it inside the assistant's
// turn, after the </code> generation stopped at: "\n<interpreter>\n" + body + "\n</interpreter>\n",
// ReTool-SFT's own spacing ("</code>\n<interpreter>\n…\n</interpreter>\n", the model's text
// going on after it). body is Observe's text without the tag.
func InTurnObservation(body string) string {
	return "\n<interpreter>\n" + body + "\n</interpreter>\n"
}

// PythonTool is the default tool schema (OpenAI's function-schema JSON): one python function
// with a code string parameter, the tool the sandbox runs.
const PythonTool = `{"type": "function", "function": {"name": "python", "description": "Runs Python code and returns what it prints (stdout), or the end of the error's traceback.", "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "The Python code to run; print the values you need."}}, "required": ["code"]}}}`

// SystemForLayout is the default system prompt of a layout (format the chat layout's
// observation format).
func SystemForLayout(l Layout, format string) string {
	switch l {
	case LayoutReTool:
		return DefaultSystem
	case LayoutToolCall:
		return "Solve the problem. You may run Python code by calling the python tool; its output comes back as the tool's response. Give the final answer as \\boxed{answer}."
	}
	return SystemFor(format)
}

// Observation formats: how a tool result is shown to the model.
const (
	// FormatInterpreter wraps results in <interpreter>…</interpreter>, appended as a user turn.
	FormatInterpreter = "interpreter"
	// FormatToolResponse returns the raw result as a tool turn (the chat template wraps it in
	// <tool_response>).
	FormatToolResponse = "tool_response"
	// FormatTagPrefix followed by a tag name ("tag:output") wraps results in that tag instead.
	FormatTagPrefix = "tag:"
)

var tagNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)

// CheckFormat reports whether format is one the environment can render, with an error that
// names the choices.
func CheckFormat(format string) error {
	if format == FormatInterpreter || format == FormatToolResponse {
		return nil
	}
	if name, ok := strings.CutPrefix(format, FormatTagPrefix); ok && tagNameRE.MatchString(name) {
		return nil
	}
	return fmt.Errorf("observation format %q is not one of interpreter, tool_response or tag:NAME (NAME a letter then letters, digits, _ . -)", format)
}

// obsTag is the tag that wraps observations in format ("" for tool_response).
func obsTag(format string) string {
	if name, ok := strings.CutPrefix(format, FormatTagPrefix); ok {
		return name
	}
	if format == FormatToolResponse {
		return ""
	}
	return "interpreter"
}

// Observe renders one execution result as the text the model sees: stdout, or the error's last
// traceback lines, or a timeout/limit notice, cut to maxChars, in the format's tag.
func Observe(r sandbox.Result, format string, maxChars int) string {
	body := r.Output
	switch r.Status {
	case sandbox.StatusTimeout:
		body = strings.TrimRight(body, "\n") + "\n[timeout: " + r.Detail + "]"
	case sandbox.StatusKilled:
		body = strings.TrimRight(body, "\n") + "\n[stopped: " + r.Detail + "]"
	case sandbox.StatusOK:
		if strings.TrimSpace(body) == "" {
			body = "[no output: use print() to see values]"
		}
	}
	body = strings.Trim(body, "\n")
	if maxChars > 0 && len(body) > maxChars {
		cut := maxChars
		for cut > 0 && (body[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		body = body[:cut] + "\n[… truncated]"
	}
	tag := obsTag(format)
	if tag == "" {
		return body
	}
	return "<" + tag + ">\n" + body + "\n</" + tag + ">"
}

// SystemFor is the default system prompt for an observation format.
func SystemFor(format string) string {
	tag := obsTag(format)
	if tag == "interpreter" {
		return DefaultSystem
	}
	if tag == "" {
		return "Solve the problem. You may run code by writing it between <code> and </code>; its output comes back as the tool's response. Give the final answer as \\boxed{answer}."
	}
	return "Solve the problem. You may run code by writing it between <code> and </code>; its output comes back in <" + tag + "></" + tag + ">. Give the final answer as \\boxed{answer}."
}

// Recheck is what a long task (Config.MinTurns) answers an early final answer with.
const Recheck = "Check the result once more: compute it again with code, then give the final answer as \\boxed{answer}."

// LongTrajectory says whether sample of the task with this id is one of the long ones of a
// long-tail workload in which share of the trajectories are long: a function of the id and the
// sample alone (their FNV-1a hash), so every run agrees.
func LongTrajectory(id string, sample int, share float64) bool {
	if share <= 0 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s#%d", id, sample)
	return float64(h.Sum64()%10000) < share*10000
}

// Weights combine reward parts into the total.
type Weights struct {
	Outcome, Process, Shaping, FormatPenalty float64
}

// Compose computes the total reward from its parts: outcome·w + process·w + shaping·w −
// formatPenalty·w.
func (w Weights) Compose(r envs.Reward) envs.Reward {
	r.Total = w.Outcome*r.Outcome + w.Process*r.Process + w.Shaping*r.Shaping - w.FormatPenalty*r.FormatPenalty
	return r
}

// ToolShaping is the tool-use shaping term in [0, 1]: 0 without a tool call, 1 when the tool
// was used and every failed call was followed by a successful one, ½ when a failure was left
// unrecovered. It rewards reaching for the tool, which the outcome alone rarely does early in
// training; its recipe weight is meant to be small.
func ToolShaping(s envs.Summary) float64 {
	switch {
	case s.ToolCalls == 0:
		return 0
	case s.ToolErrors+s.Timeouts+s.Killed > 0 && !s.Recovered:
		return 0.5
	}
	return 1
}

// Config sets up the environment.
type Config struct {
	Executor    sandbox.Executor
	Pool        *sandbox.Pool // shared by all trajectories; nil = unbounded
	MaxTurns    int           // assistant turns; the trajectory ends after the last one (default 3)
	Format      string
	MaxObsChars int
	Weights     Weights
	System      string // system prompt; "" uses DefaultSystem
	// MinTurns is the turn before which an answer does not end the trajectory: it is recorded,
	// the environment asks to check it once more (Recheck), and the trajectory goes on; the last
	// answer given counts. 0 or 1: the first answer ends it. The long tasks of a long-tail
	// workload (LongTrajectory) set it. The retool layout, whose answer ends the turn, ignores it.
	MinTurns int
	// Layout is how the trajectory lies in the context ("" is LayoutChat). LayoutReTool reads
	// Step's action as one stretch of the response and observes in the interpreter format;
	// LayoutToolCall runs only tool calls and observes in the tool_response format.
	Layout Layout
	// MaxToolCalls bounds the code runs of a trajectory; a turn asking for more ends it
	// unanswered, its code not run. 0: no bound but MaxTurns.
	MaxToolCalls int
	// ToolNames are the names a tool call may give (nil: python and code_interpreter).
	ToolNames []string
	// Verify is how the final answer is judged (the recipe's reward.last_number_fallback).
	Verify mathverify.Options
	// Grader, when set, judges the trajectory instead of Verify (the recipe's reward.grader): it
	// reads the end of the whole response, observations included, as the reference platforms
	// decode theirs, and the outcome is its score (math_dapo: +1, or -1 … -0.6 with the tool-call
	// shaping), also for a trajectory that ends unanswered.
	Grader grade.Grader
}

// DefaultSystem tells the model the protocol.
const DefaultSystem = "Solve the problem. You may run code by writing it between <code> and </code>; its output comes back in <interpreter></interpreter>. Give the final answer as \\boxed{answer}."

// Env is one ReTool trajectory.
type Env struct {
	cfg     Config
	task    envs.Task
	session sandbox.Session
	sum     envs.Summary
	done    bool
	// tail is the end of the response so far (actions and observations), for cfg.Grader.
	tail string
	// graded is cfg.Grader's verdict once the trajectory has ended.
	graded grade.Verdict
}

// maxTail bounds Env.tail, in bytes: the graders read at most the last 300 characters.
const maxTail = 4096

func (e *Env) appendTail(s string) {
	if e.cfg.Grader == nil { // only a grader reads it
		return
	}
	e.tail += s
	if len(e.tail) > maxTail {
		e.tail = e.tail[len(e.tail)-maxTail:]
	}
}

var _ envs.Env = (*Env)(nil)

// New makes an environment; call Reset before Step.
func New(cfg Config) (*Env, error) {
	if cfg.Executor == nil {
		return nil, errors.New("retool: no executor")
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = 3
	}
	if cfg.Layout == "" {
		cfg.Layout = LayoutChat
	}
	if err := CheckLayout(string(cfg.Layout)); err != nil {
		return nil, fmt.Errorf("retool: %w", err)
	}
	switch {
	case cfg.Layout == LayoutReTool:
		cfg.Format = FormatInterpreter
	case cfg.Layout == LayoutToolCall:
		cfg.Format = FormatToolResponse
	case cfg.Format == "":
		cfg.Format = FormatInterpreter
	}
	if err := CheckFormat(cfg.Format); err != nil {
		return nil, fmt.Errorf("retool: %w", err)
	}
	if cfg.MaxObsChars <= 0 {
		cfg.MaxObsChars = 512
	}
	if cfg.Weights == (Weights{}) {
		cfg.Weights = Weights{Outcome: 1, FormatPenalty: 0.1}
	}
	if cfg.System == "" {
		cfg.System = SystemForLayout(cfg.Layout, cfg.Format)
	}
	return &Env{cfg: cfg}, nil
}

// Reset starts task t and returns the opening messages.
func (e *Env) Reset(_ context.Context, t envs.Task) ([]envs.Message, error) {
	if e.session != nil {
		_ = e.session.Close()
	}
	s, err := e.cfg.Executor.NewSession()
	if err != nil {
		return nil, err
	}
	e.task, e.session, e.sum, e.done, e.tail, e.graded = t, s, envs.Summary{}, false, "", grade.Verdict{}
	return []envs.Message{{Role: "system", Content: e.cfg.System}, {Role: "user", Content: t.Prompt}}, nil
}

// Step takes one assistant turn; in the retool layout, one stretch of the response: up to the
// </code> generation stopped at (its code runs, and the observation is to be appended in the
// same turn), or to the response's end.
func (e *Env) Step(ctx context.Context, action string) (envs.Step, error) {
	if e.session == nil || e.done {
		return envs.Step{}, errors.New("retool: Step before Reset or after the trajectory ended")
	}
	e.sum.Turns++
	e.appendTail(action)
	a := ParseAs(e.cfg.Layout, action, e.cfg.ToolNames)
	var st envs.Step
	if a.FormatError != "" {
		e.sum.FormatErrors++
		st.FormatError = a.FormatError
	}
	retool := e.cfg.Layout == LayoutReTool
	switch {
	case a.HasAnswer:
		e.sum.Answered, e.sum.Answer = true, a.Answer
		e.sum.Correct = Verify(a.Answer, e.task.Answer, e.cfg.Verify)
		if retool || e.sum.Turns >= e.cfg.MinTurns {
			return e.finish(st), nil
		}
		st.Observation = Recheck
	case len(a.Code) > 0 && (!retool || endsInCode(action)):
		if e.cfg.MaxToolCalls > 0 && e.sum.ToolCalls+len(a.Code) > e.cfg.MaxToolCalls {
			return e.finish(st), nil // the tool-call budget is spent: the trajectory ends unanswered
		}
		var obs []string
		for _, code := range a.Code {
			var r sandbox.Result
			if e.cfg.Pool != nil {
				r = e.cfg.Pool.Run(ctx, e.session, code)
			} else {
				r = e.session.Run(ctx, code)
			}
			e.record(r)
			st.ToolCalls = append(st.ToolCalls, envs.Execution{Code: code, Output: r.Output, Status: string(r.Status), DurationSec: r.Duration.Seconds()})
			o := Observe(r, e.cfg.Format, e.cfg.MaxObsChars)
			if retool {
				o = "\n" + o + "\n"
			}
			obs = append(obs, o)
		}
		if st.FormatError != "" { // the blocks that parsed ran; say what did not
			obs = append(obs, "Format error: "+st.FormatError+".")
		}
		sep := "\n"
		if retool {
			sep = ""
		}
		st.Observation = strings.Join(obs, sep)
	case retool: // the response ended without an answer
		if st.FormatError == "" {
			st.FormatError = "the response ended without a final answer"
			e.sum.FormatErrors++
		}
		return e.finish(st), nil
	default:
		if st.FormatError == "" {
			st.FormatError = "no code and no final answer"
			e.sum.FormatErrors++
		}
		how := "Write Python between <code> and </code>"
		if e.cfg.Layout == LayoutToolCall {
			how = "Call the python tool"
		}
		st.Observation = "Format error: " + st.FormatError + ". " + how + ", or give the final answer as \\boxed{answer}."
	}
	if e.sum.Turns >= e.cfg.MaxTurns {
		st.Observation = ""
		return e.finish(st), nil
	}
	e.appendTail(st.Observation)
	return st, ctx.Err()
}

// endsInCode reports whether a stretch of a retool response ends on a closed <code> block
// (nothing but white space after its </code>): generation stopped there for the tool.
func endsInCode(text string) bool {
	return strings.HasSuffix(strings.TrimRight(text, " \t\r\n"), "</code>")
}

func (e *Env) record(r sandbox.Result) {
	e.sum.ToolCalls++
	switch r.Status {
	case sandbox.StatusOK:
		if e.sum.ToolErrors+e.sum.Timeouts+e.sum.Killed > 0 {
			e.sum.Recovered = true
		}
		e.sum.LastOutput = strings.TrimSpace(r.Output)
	case sandbox.StatusError:
		e.sum.ToolErrors++
		e.sum.LastError = lastLines(r.Output, 2)
		e.sum.Recovered = false
	case sandbox.StatusTimeout:
		e.sum.Timeouts++
		e.sum.LastError = "timeout: " + r.Detail
		e.sum.Recovered = false
	case sandbox.StatusKilled:
		e.sum.Killed++
		e.sum.LastError = r.Detail
		e.sum.Recovered = false
	}
}

// lastLines keeps the last n lines of s (the useful end of a traceback).
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// finish ends the trajectory and fills the reward.
func (e *Env) finish(st envs.Step) envs.Step {
	e.done = true
	st.Done = true
	r := envs.Reward{}
	if e.sum.Correct {
		r.Outcome = 1
	}
	if e.cfg.Grader != nil {
		e.graded = e.cfg.Grader.Grade(e.tail, e.task.Answer, e.sum.ToolCalls)
		e.sum.Correct, r.Outcome = e.graded.Correct, e.graded.Score
	}
	if !e.sum.Answered || e.sum.FormatErrors > 0 {
		r.FormatPenalty = 1
	}
	r.Shaping = ToolShaping(e.sum)
	st.Reward = e.cfg.Weights.Compose(r)
	return st
}

// Graded is the grader's verdict on the ended trajectory (zero without a Grader).
func (e *Env) Graded() grade.Verdict { return e.graded }

// Summary returns the trajectory's facts so far.
func (e *Env) Summary() envs.Summary { return e.sum }

// Close releases the session (a persistent interpreter).
func (e *Env) Close() error {
	if e.session == nil {
		return nil
	}
	err := e.session.Close()
	e.session = nil
	return err
}

// ToolRun is the JSON form of one execution, for `agentrl-tui tool run`.
type ToolRun struct {
	Observation string  `json:"observation"`
	Status      string  `json:"status"`
	Output      string  `json:"output"`
	DurationSec float64 `json:"duration_s"`
	Detail      string  `json:"detail,omitempty"`
	Isolation   string  `json:"isolation,omitempty"`
}

// RunTool runs code once with the named executor and returns what the model would see.
func RunTool(ctx context.Context, executor string, timeout time.Duration, code string) (ToolRun, error) {
	ex, err := sandbox.NewExecutor(executor, sandbox.Limits{Timeout: timeout}, "fresh")
	if err != nil {
		return ToolRun{}, err
	}
	s, err := ex.NewSession()
	if err != nil {
		return ToolRun{}, err
	}
	defer s.Close()
	r := s.Run(ctx, code)
	out := ToolRun{Observation: Observe(r, FormatInterpreter, 0), Status: string(r.Status), Output: r.Output, DurationSec: r.Duration.Seconds(), Detail: r.Detail}
	if p, ok := ex.(*sandbox.Python); ok {
		out.Isolation = p.Isolation()
	}
	return out, nil
}

// TurnRun is the JSON form of `agentrl-tui tool run --format F`: what the environment read in
// one assistant turn (a whole ReTool response, with or without its <interpreter> blocks) and
// what it observes of each code block.
type TurnRun struct {
	Format      Layout          `json:"format"`
	Code        []string        `json:"code"`
	Calls       []envs.ToolCall `json:"tool_calls,omitempty"`
	Content     string          `json:"content,omitempty"` // tool_call: the message content before the calls
	Answer      string          `json:"answer"`
	HasAnswer   bool            `json:"has_answer"`
	FormatError string          `json:"format_error,omitempty"`
	// Runs are the code blocks' executions in order, in one session; each Observation is the
	// environment's observation text (in the retool layout exactly the text appended to the turn).
	Runs []ToolRun `json:"runs"`
}

// RunTurn parses text as an assistant turn of layout and runs its code blocks in order, in one
// persistent session of the named executor.
func RunTurn(ctx context.Context, executor string, timeout time.Duration, layout Layout, text string) (TurnRun, error) {
	if err := CheckLayout(string(layout)); err != nil {
		return TurnRun{}, err
	}
	a := ParseAs(layout, text, nil)
	out := TurnRun{Format: layout, Code: a.Code, Calls: a.Calls, Answer: a.Answer, HasAnswer: a.HasAnswer, FormatError: a.FormatError, Runs: []ToolRun{}}
	if out.Code == nil {
		out.Code = []string{}
	}
	if layout == LayoutToolCall {
		out.Content = a.Content
	}
	format := FormatInterpreter
	if layout == LayoutToolCall {
		format = FormatToolResponse
	}
	ex, err := sandbox.NewExecutor(executor, sandbox.Limits{Timeout: timeout}, "persistent")
	if err != nil {
		return TurnRun{}, err
	}
	s, err := ex.NewSession()
	if err != nil {
		return TurnRun{}, err
	}
	defer s.Close()
	for _, code := range a.Code {
		r := s.Run(ctx, code)
		obs := Observe(r, format, 512)
		if layout == LayoutReTool {
			obs = "\n" + obs + "\n"
		}
		run := ToolRun{Observation: obs, Status: string(r.Status), Output: r.Output, DurationSec: r.Duration.Seconds(), Detail: r.Detail}
		if p, ok := ex.(*sandbox.Python); ok {
			run.Isolation = p.Isolation()
		}
		out.Runs = append(out.Runs, run)
	}
	return out, nil
}
