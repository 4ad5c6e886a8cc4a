// Package envs defines what an RL environment is to the engine: tasks, the Env interface (opening
// messages, then one assistant turn in and an observation out), reward parts, the summary of a
// trajectory every player reports, task sets, and the unbiased pass@k estimator.
package envs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"strconv"
)

// Task is one problem with its reference answer.
type Task struct {
	ID     string            `json:"id"`
	Prompt string            `json:"prompt"`
	Answer string            `json:"answer"`
	Meta   map[string]string `json:"meta,omitempty"`
}

// Message is one chat turn, the one form every part of the engine keeps: what an environment
// opens with, what the chat template renders, what an external agent sent (in events and the
// store) and what the OpenAI-compatible server keeps of a request. Roles are system, user,
// assistant and tool. The optional fields are left out of the JSON when empty, so a message
// with only a role and content encodes as {"role", "content"}.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// Name is a participant's (or a tool's) name; ToolCallID the call a tool message answers.
	Name       string `json:"name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolCalls are an assistant message's function calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ReasoningContent is an assistant message's thinking given apart from its content (nil when
	// none was; the template then reads a <think> block of the content).
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// ToolCall is one function call of an assistant message. Arguments are JSON: either a JSON
// string whose text is the arguments as written (what the model wrote, what an OpenAI client
// sends; the chat template renders it verbatim, see TextArguments) or a JSON value (an object
// as a chat file gives it; the template re-serialises it, keys in their given order). ID is the
// call's id ("" when none was given).
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// TextArguments are arguments given as text (JSON as the model wrote it, or not JSON at all):
// a JSON string holding it.
func TextArguments(text string) json.RawMessage {
	b, _ := json.Marshal(text) // a string always marshals
	return b
}

// Text is the call's arguments as text: a JSON string's content, other JSON as it is ("" when
// there are none).
func (c ToolCall) Text() string {
	var s string
	if json.Unmarshal(c.Arguments, &s) == nil {
		return s
	}
	return string(c.Arguments)
}

// UnmarshalJSON reads both {"id", "name", "arguments"} (the form ToolCall marshals to) and
// OpenAI's {"id", "type": "function", "function": {"name", "arguments"}}, as chat templates
// accept them.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var v struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Function  *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	c.ID, c.Name, c.Arguments = v.ID, v.Name, v.Arguments
	if v.Function != nil {
		c.Name, c.Arguments = v.Function.Name, v.Function.Arguments
	}
	return nil
}

// Reward keeps each part so that the UI can show the breakdown. Total is the weighted sum the
// trainer uses.
type Reward struct {
	Outcome       float64 `json:"outcome"`        // 1 when the final answer verifies, else 0
	Process       float64 `json:"process"`        // process score in [0, 1] (PRM), 0 when none
	Shaping       float64 `json:"shaping"`        // small environment shaping terms
	FormatPenalty float64 `json:"format_penalty"` // ≥ 0, subtracted
	Total         float64 `json:"total"`
}

// Execution is one code execution in a turn.
type Execution struct {
	Code        string  `json:"code"`
	Output      string  `json:"output"`
	Status      string  `json:"status"` // ok | error | timeout | killed
	DurationSec float64 `json:"duration_s"`
}

// Step is the outcome of one assistant turn.
type Step struct {
	Observation string      `json:"observation"` // text to append as the tool/user turn; "" when done
	Done        bool        `json:"done"`
	Reward      Reward      `json:"reward"` // final reward when Done, zero before
	ToolCalls   []Execution `json:"tool_calls,omitempty"`
	// FormatError says why the turn could not be parsed ("" when it could).
	FormatError string `json:"format_error,omitempty"`
}

// Summary collects the facts of one trajectory that every player reports (the ReTool loop from
// its turns, an external agent's player from its requests and result) and that hinters, process
// scorers and the step's metrics read: its turns, its tool calls and how they failed, its format
// errors and its final answer.
type Summary struct {
	Turns        int
	ToolCalls    int
	ToolErrors   int    // calls that raised
	Timeouts     int    // calls stopped by the time limit
	Killed       int    // calls stopped by another limit
	Recovered    bool   // the last failing call was followed by a successful one
	LastError    string // last lines of the last failing call's output
	LastOutput   string // the last successful call's output, trimmed
	FormatErrors int
	Answered     bool
	Answer       string
	Correct      bool
}

// Env is one trajectory's environment. Reset starts a task; Step takes each assistant turn.
type Env interface {
	Reset(ctx context.Context, t Task) ([]Message, error)
	Step(ctx context.Context, action string) (Step, error)
	Close() error
}

// PassAtK is the unbiased estimator 1 − C(n−c, k)/C(n, k) of the chance that at least one of k
// samples is correct, given c correct among n. It needs k ≤ n.
func PassAtK(n, c, k int) (float64, error) {
	if n <= 0 || k <= 0 || k > n || c < 0 || c > n {
		return 0, fmt.Errorf("pass@k needs 0 < k ≤ n and 0 ≤ c ≤ n; got n=%d c=%d k=%d", n, c, k)
	}
	if n-c < k {
		return 1, nil
	}
	// C(n−c, k)/C(n, k) = Π_{i=n−c+1}^{n} (1 − k/i), stable for large n.
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p, nil
}

// MeanPassAtK averages PassAtK over tasks, given each task's (n, correct) counts.
func MeanPassAtK(counts [][2]int, k int) (float64, error) {
	if len(counts) == 0 {
		return math.NaN(), errors.New("pass@k over no tasks")
	}
	var sum float64
	for _, nc := range counts {
		p, err := PassAtK(nc[0], nc[1], k)
		if err != nil {
			return 0, err
		}
		sum += p
	}
	return sum / float64(len(counts)), nil
}

// PassAtKChange compares two evaluations of the same tasks, given each task's (n, correct) counts
// in the same order: the mean change of pass@k and its paired standard error, the standard
// deviation of the per-task changes over √tasks. The pairing takes out how hard each task is, so
// the error is that of the change itself: sampling noise on both sides and how unevenly the change
// falls across tasks. With one task the error is NaN.
func PassAtKChange(before, after [][2]int, k int) (delta, se float64, err error) {
	if len(before) != len(after) || len(before) == 0 {
		return math.NaN(), math.NaN(), fmt.Errorf("pass@k change needs the same tasks on both sides; got %d and %d", len(before), len(after))
	}
	d := make([]float64, len(before))
	for i := range before {
		a, err := PassAtK(before[i][0], before[i][1], k)
		if err != nil {
			return math.NaN(), math.NaN(), err
		}
		b, err := PassAtK(after[i][0], after[i][1], k)
		if err != nil {
			return math.NaN(), math.NaN(), err
		}
		d[i] = b - a
		delta += d[i]
	}
	n := float64(len(d))
	delta /= n
	if len(d) < 2 {
		return delta, math.NaN(), nil
	}
	var ss float64
	for _, x := range d {
		ss += (x - delta) * (x - delta)
	}
	return delta, math.Sqrt(ss/(n-1)) / math.Sqrt(n), nil
}

// Fingerprint identifies a list of tasks by their prompts and answers, in order (FNV-64a, hex):
// two evaluations are compared task by task only when their fingerprints agree.
func Fingerprint(tasks []Task) string {
	h := fnv.New64a()
	for _, t := range tasks {
		fmt.Fprintf(h, "%d:%s%d:%s", len(t.Prompt), t.Prompt, len(t.Answer), t.Answer)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// Fields names the JSON fields of a JSONL task file. Empty names take the first present of the
// defaults: id; problem, prompt, question; answer, solution.
type Fields struct {
	ID, Prompt, Answer string
}

// LoadJSONL reads tasks, one JSON object per line. Errors name the file, the line and the field.
func LoadJSONL(path string, f Fields) ([]Task, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("task file: %w", err)
	}
	defer file.Close()
	pick := func(obj map[string]any, named string, defaults ...string) (string, string, bool) {
		names := defaults
		if named != "" {
			names = []string{named}
		}
		for _, n := range names {
			if v, ok := obj[n]; ok {
				switch x := v.(type) {
				case string:
					return n, x, true
				case float64:
					return n, strconv.FormatFloat(x, 'f', -1, 64), true
				}
				return n, "", false
			}
		}
		return names[0], "", false
	}
	var tasks []Task
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	seen := map[string]int{}
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			return nil, fmt.Errorf("%s:%d: not a JSON object: %w", path, line, err)
		}
		pn, prompt, ok := pick(obj, f.Prompt, "problem", "prompt", "question")
		if !ok || prompt == "" {
			return nil, fmt.Errorf("%s:%d: no text in field %q (set the prompt field name, e.g. problem, prompt or question)", path, line, pn)
		}
		an, answer, ok := pick(obj, f.Answer, "answer", "solution")
		if !ok || answer == "" {
			return nil, fmt.Errorf("%s:%d: no answer in field %q (set the answer field name, e.g. answer or solution)", path, line, an)
		}
		_, id, _ := pick(obj, f.ID, "id")
		if id == "" {
			id = fmt.Sprintf("line-%d", line)
		}
		if prev, dup := seen[id]; dup {
			return nil, fmt.Errorf("%s:%d: task id %q repeats line %d", path, line, id, prev)
		}
		seen[id] = line
		tasks = append(tasks, Task{ID: id, Prompt: prompt, Answer: answer})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", path)
	}
	return tasks, nil
}
