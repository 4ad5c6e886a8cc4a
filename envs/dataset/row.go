package dataset

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"agentrl/envs"
)

// row is one record of a file: a JSON object or a Parquet row, as nested maps and lists.
type row struct {
	file  string
	n     int  // the JSONL line or the Parquet row, from 1
	lines bool // n counts lines (JSONL), not rows
	data  map[string]any
	raw   []byte // a JSONL line as written (nil for a Parquet row)
	// same, when not 0, says the row holds row same's values in every column a task is read
	// from, so it reads to the same task (or is filtered out alike); data is then nil.
	same int
}

// where names the row in messages: "f.jsonl:3" or "f.parquet: row 3".
func (r row) where() string {
	if r.lines {
		return fmt.Sprintf("%s:%d", r.file, r.n)
	}
	return fmt.Sprintf("%s: row %d", r.file, r.n)
}

// errf is an error about the field named (or, when none is, the defaults).
func (r row) errf(named string, defaults []string, format string, args ...any) error {
	field := named
	if field == "" {
		field = strings.Join(defaults, ", ")
	}
	return fmt.Errorf("%s: field %s: %s", r.where(), field, fmt.Sprintf(format, args...))
}

// keys lists the row's top-level names, for "the row has" hints.
func (r row) keys() string {
	ks := make([]string, 0, len(r.data))
	for k := range r.data {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// value is a part found in a row: its text and the path it came from.
type value struct {
	raw  any
	from string
}

// lookup follows a dotted path through maps (names matched exactly, else case-insensitively)
// and lists (an integer index, negative from the end), and returns the path as the row spells
// it. A name with dots in it is tried whole first.
func lookup(v any, path string) (any, string, bool) {
	if m, ok := v.(map[string]any); ok {
		if x, name, ok := field(m, path); ok {
			return x, name, true
		}
	}
	head, rest, more := strings.Cut(path, ".")
	var next any
	switch x := v.(type) {
	case map[string]any:
		f, name, ok := field(x, head)
		if !ok {
			return nil, "", false
		}
		next, head = f, name
	case []any:
		i, err := strconv.Atoi(head)
		if err != nil {
			return nil, "", false
		}
		if i < 0 {
			i += len(x)
		}
		if i < 0 || i >= len(x) {
			return nil, "", false
		}
		next = x[i]
	default:
		return nil, "", false
	}
	if !more {
		return next, head, true
	}
	v, tail, ok := lookup(next, rest)
	return v, head + "." + tail, ok
}

// field is m[name], or the one entry whose name matches name but for case, with its name.
func field(m map[string]any, name string) (any, string, bool) {
	if v, ok := m[name]; ok {
		return v, name, true
	}
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v, k, true
		}
	}
	return nil, "", false
}

// pick finds a part: the named path, else the first default present. ok is false when none is
// present (a named path that is absent is an error). A present value that is null counts as
// absent for the defaults.
func (r row) pick(named string, defaults []string, part string) (value, bool, error) {
	if named != "" {
		v, _, ok := lookup(r.data, named)
		if !ok {
			return value{}, false, fmt.Errorf("%s: no field %q (data.fields.%s names it; the row has: %s)", r.where(), named, part, r.keys())
		}
		return value{raw: v, from: named}, true, nil
	}
	for _, d := range defaults {
		if v, name, ok := lookup(r.data, d); ok && v != nil {
			return value{raw: v, from: name}, true, nil
		}
	}
	return value{}, false, nil
}

// used says where a task's parts came from, and what its prompt held.
type used struct {
	Fields
	problem string // the problem before the template
	chat    bool   // the prompt was chat messages
	system  bool   // the chat prompt had a system message, left out
}

// task turns the row into a task. multi adds the file's name to ids numbered by row, so that
// the rows of several files keep apart.
func (r row) task(o Options, multi bool) (envs.Task, used, error) {
	var u used
	p, ok, err := r.pick(o.Fields.Prompt, defaultPrompt, "prompt")
	if err != nil {
		return envs.Task{}, u, err
	}
	if !ok {
		if _, conv := r.data["messages"].([]any); conv {
			return envs.Task{}, u, fmt.Errorf("%s: a conversation (a messages list), not a task: this is supervised fine-tuning data; train on it with agentrl-tui sft --data %s (data.train and data.eval take tasks: a problem and its answer)",
				r.where(), r.file)
		}
		return envs.Task{}, u, fmt.Errorf("%s: no problem: none of the fields %s is present (the row has: %s); name the problem's field in data.fields.prompt",
			r.where(), strings.Join(defaultPrompt, ", "), r.keys())
	}
	u.Prompt = p.from
	_, u.chat = p.raw.(string)
	u.chat = !u.chat
	if u.problem, u.system, err = promptText(p.raw); err != nil {
		return envs.Task{}, u, fmt.Errorf("%s: field %s: %v; name the problem's text field in data.fields.prompt", r.where(), p.from, err)
	}
	if strings.TrimSpace(u.problem) == "" {
		return envs.Task{}, u, fmt.Errorf("%s: field %s: the problem is empty", r.where(), p.from)
	}
	a, ok, err := r.pick(o.Fields.Answer, defaultAnswer, "answer")
	if err != nil {
		return envs.Task{}, u, err
	}
	if !ok {
		return envs.Task{}, u, fmt.Errorf("%s: no answer: none of the fields %s is present (the row has: %s); name the answer's field in data.fields.answer",
			r.where(), strings.Join(defaultAnswer, ", "), r.keys())
	}
	u.Answer = a.from
	answer, err := scalarText(a.raw, true)
	if err != nil {
		return envs.Task{}, u, fmt.Errorf("%s: field %s: %v; name the reference answer's field in data.fields.answer", r.where(), a.from, err)
	}
	if answer = strings.TrimSpace(answer); answer == "" {
		return envs.Task{}, u, fmt.Errorf("%s: field %s: the answer is empty", r.where(), a.from)
	}
	id := ""
	if v, ok, err := r.pick(o.Fields.ID, defaultID, "id"); err != nil {
		return envs.Task{}, u, err
	} else if ok {
		u.ID = v.from
		if id, err = scalarText(v.raw, false); err != nil {
			return envs.Task{}, u, fmt.Errorf("%s: field %s: %v; name the task id's field in data.fields.id", r.where(), v.from, err)
		}
	}
	if id == "" {
		id = fmt.Sprintf("row-%d", r.n)
		if r.lines {
			id = fmt.Sprintf("line-%d", r.n)
		}
		if multi {
			id = strings.TrimSuffix(filepath.Base(r.file), filepath.Ext(r.file)) + ":" + id
		}
	}
	prompt := u.problem
	if o.Template != "" {
		prompt = strings.ReplaceAll(o.Template, Placeholder, u.problem)
	}
	return envs.Task{ID: id, Prompt: prompt, Answer: answer}, u, nil
}

// promptText is a prompt field's problem: text as it is, or chat messages' last user content
// (system reports a system message left out).
func promptText(v any) (text string, system bool, err error) {
	switch x := v.(type) {
	case string:
		return x, false, nil
	case map[string]any: // one message
		v = []any{x}
	case []any:
	default:
		return "", false, fmt.Errorf("%s; want text or a list of chat messages ({role, content})", describe(v))
	}
	msgs := v.([]any)
	found := false
	for i, m := range msgs {
		mm, ok := m.(map[string]any)
		if !ok {
			return "", false, fmt.Errorf("message %d %s; want chat messages ({role, content})", i, describe(m))
		}
		role, _, _ := field(mm, "role")
		content, _, _ := field(mm, "content")
		r, _ := role.(string)
		c, ok := content.(string)
		if r == "" || !ok {
			return "", false, fmt.Errorf("message %d has no role or no text content; want chat messages ({role, content})", i)
		}
		switch r {
		case "user":
			text, found = c, true
		case "system":
			system = true
		}
	}
	if !found {
		return "", false, fmt.Errorf("the %d chat messages have no user message", len(msgs))
	}
	return text, system, nil
}

// scalarText writes a string or number exactly as stored: integers in decimal, other numbers in
// the shortest form that reads back the same, a JSON number as written. A one-element list
// (verl's ground_truth ["72"]) is its element when list is true.
func scalarText(v any, list bool) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int:
		return strconv.Itoa(x), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("is %v; want a finite number or text", x)
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	case []any:
		if list && len(x) == 1 {
			return scalarText(x[0], false)
		}
	}
	return "", fmt.Errorf("%s; want text or a number", describe(v))
}

// describe says what a value is, for "X; want Y" messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "is null"
	case bool:
		return fmt.Sprintf("is a boolean (%v)", x)
	case string:
		return "is text"
	case []any:
		return fmt.Sprintf("is a list of %d", len(x))
	case map[string]any:
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return "is an object {" + strings.Join(ks, ", ") + "}"
	case []byte:
		return "is binary data"
	}
	return fmt.Sprintf("is a %T", v)
}
