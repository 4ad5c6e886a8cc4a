package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"agentrl/engine/event"
	"agentrl/engine/record"
	"agentrl/store"
)

// TrajectoriesSchema names the trajectory table's layout in its Parquet file's metadata (key
// SchemaKey): docs/export.md describes it.
const TrajectoriesSchema = "agentrl.trajectories/1"

// TrajectoryRow is one trajectory of a stored run, as the trajectory table has it (the Parquet
// column and the JSON field of each are named by its tags).
type TrajectoryRow struct {
	Run  string `parquet:"run" json:"run"`
	Step int64  `parquet:"step" json:"step"`
	// Eval marks an evaluation's trajectory (Step the step evaluated), else one trained in Step.
	Eval   bool   `parquet:"eval" json:"eval"`
	Task   string `parquet:"task" json:"task"`
	Group  int64  `parquet:"group_index" json:"group_index"` // the task's index among the step's tasks (its GRPO group; "group" is a word SQL reserves)
	Sample int64  `parquet:"sample" json:"sample"`           // the sample's index among the task's samples
	// Reward is the total; its parts as the recipe's reward weights combine them.
	Reward              float64 `parquet:"reward" json:"reward"`
	RewardOutcome       float64 `parquet:"reward_outcome" json:"reward_outcome"`
	RewardProcess       float64 `parquet:"reward_process" json:"reward_process"`
	RewardShaping       float64 `parquet:"reward_shaping" json:"reward_shaping"`
	RewardFormatPenalty float64 `parquet:"reward_format_penalty" json:"reward_format_penalty"`
	Correct             bool    `parquet:"correct" json:"correct"` // the final answer passed the verifier
	Turns               int64   `parquet:"turns" json:"turns"`
	ToolCalls           int64   `parquet:"tool_calls" json:"tool_calls"`
	ToolErrors          int64   `parquet:"tool_errors" json:"tool_errors"`
	// Tokens is the trajectory's length in tokens: prompt, response and tool outputs.
	Tokens int64 `parquet:"tokens" json:"tokens"`
	// PolicyTokens are the tokens the policy wrote and was trained on; null for an evaluation's
	// trajectory, which keeps no tokens.
	PolicyTokens *int64 `parquet:"policy_tokens,optional" json:"policy_tokens"`
	Prompt       string `parquet:"prompt" json:"prompt"`
	Text         string `parquet:"text" json:"text"` // the conversation rendered as text (docs/export.md)
	Hint         string `parquet:"hint" json:"hint"` // the bridge thought the teacher read, "" when none
	Hinted       bool   `parquet:"hinted" json:"hinted"`
	// The model PRM's judgement (prm.kind model): its status ("" without a PRM), a verdict per
	// step (1 correct, 0 wrong, −1 not judged) and whether it asked for a bridge thought.
	PRMStatus   string    `parquet:"prm_status" json:"prm_status"`
	PRMVerdicts []float64 `parquet:"prm_verdicts,list" json:"prm_verdicts"`
	PRMHint     bool      `parquet:"prm_hint" json:"prm_hint"`
	// Dropped is why an external agent's trajectory was dropped ("" when usable); Paused marks one
	// a partial rollout paused unfinished.
	Dropped string `parquet:"dropped" json:"dropped"`
	Paused  bool   `parquet:"paused" json:"paused"`
}

// Selection chooses a run's trajectories: steps From to To (To < 0: to the last), the
// evaluations' (Eval) or the trained ones.
type Selection struct {
	From, To int
	Eval     bool
}

// Row is the table's row for trajectory t of run.
func Row(run string, t event.Trajectory) TrajectoryRow {
	r := TrajectoryRow{Run: run, Step: int64(t.Step), Eval: t.Eval, Task: t.TaskID, Group: int64(t.Group), Sample: int64(t.Sample),
		Reward: t.Reward.Total, RewardOutcome: t.Reward.Outcome, RewardProcess: t.Reward.Process, RewardShaping: t.Reward.Shaping,
		RewardFormatPenalty: t.Reward.FormatPenalty, Correct: t.Correct, Turns: int64(len(t.Turns)), ToolErrors: int64(t.ToolErrors),
		Tokens: int64(t.Tokens), Prompt: t.Prompt, Text: Render(t), Hint: t.Hint, Hinted: t.Hint != "", Paused: t.Paused,
		PRMVerdicts: []float64{}}
	for _, turn := range t.Turns {
		switch {
		case len(turn.ToolCalls) > 0:
			r.ToolCalls += int64(len(turn.ToolCalls))
		case turn.Code != "":
			r.ToolCalls++
		}
	}
	if !t.Eval {
		n := int64(len(t.Pieces))
		r.PolicyTokens = &n
	}
	if p := t.PRM; p != nil {
		r.PRMStatus, r.PRMHint = p.Status, p.Hint
		r.PRMVerdicts = append(r.PRMVerdicts, p.Verdicts...)
	}
	if t.Agent != nil {
		r.Dropped = t.Agent.Drop
	}
	return r
}

// Render is a trajectory's conversation as text: blocks of "ROLE:" on a line and the message
// below it, separated by a blank line, in the order the model read and wrote them. The prompt
// is the user's (an external agent's opening messages take its place); each turn is the
// assistant's text (with a line "tool call NAME ARGUMENTS" per call an external agent's reply
// made), followed by the tool's output as "tool (STATUS):" when a tool ran, or the messages an
// agent sent next under their own roles.
func Render(t event.Trajectory) string {
	var b strings.Builder
	block := func(role, text string) {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(role + ":\n" + strings.TrimRight(text, "\n"))
	}
	if t.Agent != nil && len(t.Agent.Opening) > 0 {
		for _, m := range t.Agent.Opening {
			block(m.Role, m.Content)
		}
	} else if t.Prompt != "" {
		block("user", t.Prompt)
	}
	for _, turn := range t.Turns {
		text := turn.Assistant
		for _, c := range turn.ToolCalls {
			text = strings.TrimRight(text, "\n") + "\ntool call " + c.Name + " " + c.Text()
		}
		block("assistant", strings.TrimLeft(text, "\n"))
		switch {
		case len(turn.Sent) > 0:
			for _, m := range turn.Sent {
				block(m.Role, m.Content)
			}
		case turn.Observation != "" || turn.Code != "":
			role := "tool"
			if turn.ToolStatus != "" {
				role += " (" + turn.ToolStatus + ")"
			}
			block(role, turn.Observation)
		}
	}
	return b.String()
}

// Trajectories calls fn with the row of each stored trajectory of run that sel chooses, in the
// store's order (step, task, sample), one at a time.
func Trajectories(st *store.Store, runID string, sel Selection, fn func(TrajectoryRow) error) error {
	if _, err := st.GetRun(runID); err != nil {
		return err
	}
	return st.ForEachTrajectory(runID, sel.Eval, sel.From, sel.To, func(r store.TrajectoryRecord) error {
		return fn(Row(runID, record.Trajectory(r)))
	})
}

// TrajectoryWriter writes trajectory rows to a table file.
type TrajectoryWriter interface {
	Write(TrajectoryRow) error
	Close() error // finishes the table (it does not close the underlying writer)
}

// NewParquetTrajectories writes rows as Parquet, zstd-compressed, with the schema named in its
// metadata.
func NewParquetTrajectories(w io.Writer) TrajectoryWriter {
	return &parquetRows{w: parquet.NewGenericWriter[TrajectoryRow](w, parquet.Compression(&parquet.Zstd),
		parquet.KeyValueMetadata(SchemaKey, TrajectoriesSchema))}
}

type parquetRows struct {
	w *parquet.GenericWriter[TrajectoryRow]
}

func (p *parquetRows) Write(r TrajectoryRow) error {
	_, err := p.w.Write([]TrajectoryRow{r})
	return err
}

func (p *parquetRows) Close() error { return p.w.Close() }

// NewJSONLTrajectories writes rows as JSON Lines, one object per trajectory with the Parquet
// file's column names as keys.
func NewJSONLTrajectories(w io.Writer) TrajectoryWriter {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // tokens and code hold <, > and &
	return &jsonlRows{bw: bw, enc: enc}
}

type jsonlRows struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

func (j *jsonlRows) Write(r TrajectoryRow) error { return j.enc.Encode(r) }

func (j *jsonlRows) Close() error { return j.bw.Flush() }

// ParseSteps reads a --steps value: "A-B" (A to B), "A" (that step), "A-" (from A on) or "-B"
// (up to B), steps whole numbers ≥ 0.
func ParseSteps(s string) (from, to int, err error) {
	bad := func() (int, int, error) {
		return 0, 0, fmt.Errorf(`--steps %q: want A-B (steps A to B), A, A- or -B, e.g. --steps 10-20`, s)
	}
	num := func(v string) (int, bool) {
		if v == "" || strings.TrimLeft(v, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	a, b, ranged := strings.Cut(strings.TrimSpace(s), "-")
	if !ranged {
		n, ok := num(a)
		if !ok {
			return bad()
		}
		return n, n, nil
	}
	from, to = 0, -1
	if a != "" {
		n, ok := num(a)
		if !ok {
			return bad()
		}
		from = n
	}
	if b != "" {
		n, ok := num(b)
		if !ok {
			return bad()
		}
		to = n
	}
	if a == "" && b == "" || to >= 0 && to < from {
		return bad()
	}
	return from, to, nil
}
