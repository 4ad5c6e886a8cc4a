package sft

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"

	"agentrl/engine/batch"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/recipes"
)

// ReadConversations reads conversations with a "messages" list (JoeYing/ReTool-SFT's and verl's
// converted files) from a JSON Lines file (one object a line), a Parquet file (one row each), or
// a folder of them (a downloaded dataset: its .jsonl and .parquet files, by name, hidden folders
// skipped), and checks each against the layout: retool keeps the code inline (<code>…</code>,
// its output in <interpreter>) in the assistant's content, tool_call has OpenAI tool_calls
// answered by tool messages, chat is plain turns. A conversation without a system message gets
// the layout's system prompt. An error names the file, the line (or row) and the field.
func ReadConversations(path string, layout retool.Layout) ([][]envs.Message, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return readFile(path, layout)
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != path && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if ext := strings.ToLower(filepath.Ext(p)); !d.IsDir() && (ext == ".jsonl" || ext == ".parquet") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .jsonl or .parquet file in the folder", path)
	}
	sort.Strings(files)
	var convs [][]envs.Message
	for _, f := range files {
		c, err := readFile(f, layout)
		if err != nil {
			return nil, err
		}
		convs = append(convs, c...)
	}
	return convs, nil
}

// readFile reads one file of conversations, by its extension: .parquet, else JSON Lines.
func readFile(path string, layout retool.Layout) ([][]envs.Message, error) {
	if strings.HasSuffix(strings.ToLower(path), ".parquet") {
		return readParquet(path, layout)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	var convs [][]envs.Message
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		conv, err := parseConversation(b, layout)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		convs = append(convs, conv)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("%s: no conversation in it (one JSON object a line, with a messages list)", path)
	}
	return convs, nil
}

// readParquet reads a Parquet file's rows as conversations: each row's messages column, as JSON.
func readParquet(path string, layout retool.Layout) (convs [][]envs.Message, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Parquet file: %v (is it whole? a file fetched with git-lfs or a partial download is not)", path, err)
	}
	defer func() { // a malformed file can make the reader panic: report it as unreadable
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: not a readable Parquet file: %v", path, p)
		}
	}()
	r := parquet.NewReader(pf)
	defer r.Close()
	for n := int64(1); n <= pf.NumRows(); n++ {
		row := map[string]any{}
		if err := r.Read(&row); err != nil {
			return nil, fmt.Errorf("%s: row %d: not readable: %v", path, n, err)
		}
		b, err := json.Marshal(textual(row))
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %v", path, n, err)
		}
		conv, err := parseConversation(b, layout)
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", path, n, err)
		}
		convs = append(convs, conv)
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("%s: no conversation in it (the Parquet file has no rows)", path)
	}
	return convs, nil
}

// textual turns the Parquet reader's binary values into text, for JSON.
func textual(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case map[string]any:
		for k, e := range x {
			x[k] = textual(e)
		}
	case []any:
		for i, e := range x {
			x[i] = textual(e)
		}
	}
	return v
}

// wireMessage is a message as a chat file gives it; content may be null (an assistant turn
// with only tool calls).
type wireMessage struct {
	Role             *string         `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
	ReasoningContent *string         `json:"reasoning_content"`
}

// wireToolCall is OpenAI's {"id", "type": "function", "function": {"name", "arguments"}}, or
// the flat {"name", "arguments"}; arguments a JSON string or an object.
type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// parseConversation is one line's conversation, checked against the layout.
func parseConversation(b []byte, layout retool.Layout) ([]envs.Message, error) {
	var obj struct {
		Messages *[]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object with a messages list (%v)", err)
	}
	if obj.Messages == nil {
		return nil, fmt.Errorf("field messages: missing; each line needs a messages list of {role, content}")
	}
	if len(*obj.Messages) == 0 {
		return nil, fmt.Errorf("field messages: empty")
	}
	var conv []envs.Message
	assistants := 0
	for i, raw := range *obj.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		var w wireMessage
		if err := json.Unmarshal(raw, &w); err != nil {
			return nil, fmt.Errorf("field %s: not a message object (%v)", field, err)
		}
		if w.Role == nil || *w.Role == "" {
			return nil, fmt.Errorf("field %s.role: missing; want system, user, assistant or tool", field)
		}
		role := *w.Role
		if role == "developer" {
			role = "system"
		}
		m := envs.Message{Role: role, Name: w.Name, ToolCallID: w.ToolCallID, ReasoningContent: w.ReasoningContent}
		c := bytes.TrimSpace(w.Content)
		if len(c) > 0 && string(c) != "null" {
			if err := json.Unmarshal(c, &m.Content); err != nil {
				return nil, fmt.Errorf("field %s.content: not a string (%s)", field, describe(c))
			}
		}
		switch role {
		case "system":
			if i != 0 {
				return nil, fmt.Errorf("field %s.role: a system message after the first message", field)
			}
		case "user":
		case "assistant":
			assistants++
			for j, tc := range w.ToolCalls {
				call := envs.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
				if tc.Function != nil {
					call.Name, call.Arguments = tc.Function.Name, tc.Function.Arguments
				}
				if call.Name == "" {
					return nil, fmt.Errorf("field %s.tool_calls[%d].function.name: missing", field, j)
				}
				if a := bytes.TrimSpace(call.Arguments); len(a) == 0 || string(a) == "null" {
					call.Arguments = json.RawMessage(`{}`)
				}
				m.ToolCalls = append(m.ToolCalls, call)
			}
			if layout == retool.LayoutReTool {
				if len(m.ToolCalls) > 0 {
					return nil, fmt.Errorf("field %s.tool_calls: format retool keeps the code inline in <code>…</code>; give --format tool_call for tool_calls", field)
				}
				if err := checkCode(m.Content); err != nil {
					return nil, fmt.Errorf("field %s.content: %w", field, err)
				}
			}
		case "tool":
			if layout == retool.LayoutReTool {
				return nil, fmt.Errorf("field %s.role: a tool message in format retool, where the interpreter's output is inline in the assistant's turn; give --format tool_call", field)
			}
			prev := conv[len(conv)-1]
			if prev.Role != "tool" && (prev.Role != "assistant" || len(prev.ToolCalls) == 0) {
				return nil, fmt.Errorf("field %s.role: a tool message that answers no tool call (the message before it is %s without tool_calls)", field, prev.Role)
			}
		default:
			return nil, fmt.Errorf("field %s.role: %q; want system, user, assistant or tool", field, role)
		}
		conv = append(conv, m)
	}
	if conv[0].Role != "system" {
		conv = append([]envs.Message{{Role: "system", Content: systemFor(layout)}}, conv...)
	}
	if len(conv) < 2 || conv[1].Role != "user" {
		return nil, fmt.Errorf("field messages: the first message after the system prompt must be the user's")
	}
	if assistants == 0 {
		return nil, fmt.Errorf("field messages: no assistant message, nothing to train on")
	}
	return conv, nil
}

// checkCode reports an unclosed or nested <code> block in an assistant turn of format retool.
func checkCode(text string) error {
	rest, off := text, 0
	for {
		i := strings.Index(rest, "<code>")
		if i < 0 {
			return nil
		}
		after := rest[i+len("<code>"):]
		j := strings.Index(after, "</code>")
		if j < 0 {
			return fmt.Errorf("an assistant turn with an unclosed <code> (at byte %d): no </code> after it", off+i)
		}
		if k := strings.Index(after[:j], "<code>"); k >= 0 {
			return fmt.Errorf("an assistant turn with an unclosed <code> (at byte %d): another <code> before its </code>", off+i)
		}
		step := i + len("<code>") + j + len("</code>")
		rest, off = rest[step:], off+step
	}
}

// describe is a JSON value's kind, for errors.
func describe(raw []byte) string {
	switch raw[0] {
	case '[':
		return "a list"
	case '{':
		return "an object"
	case '"':
		return "a string"
	}
	return string(raw)
}

// systemFor is a layout's default system prompt (the chat layout's observations in
// <interpreter>), as a recipe without env.system gets it (engine/play FormatOf).
func systemFor(layout retool.Layout) string {
	return retool.SystemForLayout(layout, retool.FormatInterpreter)
}

// Tools are the tool schemas in the system turn of a layout: spec ("" for the default, a JSON
// array of function schemas, or @FILE holding one) as a recipe's env.tools; the default is the
// python tool for tool_call (under the name the conversations' calls give, python or
// code_interpreter) and none for the other layouts.
func Tools(spec string, layout retool.Layout, convs [][]envs.Message) ([]tokenizer.Tool, error) {
	if rest, ok := strings.CutPrefix(spec, "@"); ok {
		b, err := os.ReadFile(rest)
		if err != nil {
			return nil, fmt.Errorf("--tools: %w", err)
		}
		spec = string(b)
	}
	if spec != "" && spec != "python" {
		schemas, _, err := recipes.Env{Tools: spec}.ToolSchemas()
		if err != nil {
			return nil, fmt.Errorf("--tools %w", err)
		}
		tools := make([]tokenizer.Tool, len(schemas))
		for i, s := range schemas {
			tools[i] = tokenizer.Tool(s)
		}
		return tools, nil
	}
	if spec == "" && layout != retool.LayoutToolCall {
		return nil, nil
	}
	name := "python"
	for _, conv := range convs {
		for _, m := range conv {
			for _, c := range m.ToolCalls {
				if c.Name == "code_interpreter" {
					name = c.Name
				}
			}
		}
	}
	return []tokenizer.Tool{tokenizer.Tool(strings.Replace(retool.PythonTool, `"name": "python"`, `"name": "`+name+`"`, 1))}, nil
}

// Sequences lays each conversation out and masks it with batch.MaskAssistant (the layout and
// loss mask of RL rollouts), dropping those longer than maxLen tokens (0: no bound); dropped
// counts them.
func Sequences(tok *tokenizer.Tokenizer, convs [][]envs.Message, tools []tokenizer.Tool, maxLen int) (seqs []train.Sequence, kept [][]envs.Message, dropped int, err error) {
	for i, conv := range convs {
		if _, err := batch.TurnPieces(conv, tools); err != nil {
			return nil, nil, 0, fmt.Errorf("conversation %d: %w", i+1, err)
		}
		s, ok := batch.MaskAssistant(tok, conv, tools)
		if !ok {
			return nil, nil, 0, fmt.Errorf("conversation %d: not renderable", i+1)
		}
		if maxLen > 0 && len(s.Tokens) > maxLen {
			dropped++
			continue
		}
		seqs, kept = append(seqs, s), append(kept, conv)
	}
	return seqs, kept, dropped, nil
}
