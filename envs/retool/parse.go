// Package retool is the ReTool environment: the model solves math problems by writing code that
// a sandbox runs (an executor of envs/sandbox); the output goes back into its context; a verifier
// checks the final \boxed{} answer. The chain is action text → parser → executor → observation →
// verifier → reward.
package retool

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"agentrl/envs"
	"agentrl/envs/mathverify"
)

// Action is what one assistant turn asked for.
type Action struct {
	Code []string // code blocks to run, in order
	// Calls are the turn's well-formed <tool_call>s, name and arguments as the model wrote them
	// (arguments kept as text, so the chat template renders them back verbatim).
	Calls []envs.ToolCall
	// Content is the text before the first <tool_call>, less one newline before it: the
	// assistant message's content when the calls go in its tool_calls, as the chat template
	// renders "content\n<tool_call>…". The whole text when there is no <tool_call>.
	Content   string
	Answer    string // the last \boxed{...} content
	HasAnswer bool
	// FormatError explains a malformed turn (unclosed tag, bad tool-call JSON, unbalanced
	// \boxed); "" when the turn parsed.
	FormatError string
}

var fenceRE = regexp.MustCompile("(?s)```(?:python|py|python3)?[ \t]*\n(.*?)```")

// Parse reads one assistant turn of the chat format (ParseAs with LayoutChat and the default
// tool names).
func Parse(text string) Action { return ParseAs(LayoutChat, text, nil) }

// ParseAs reads one assistant turn (or, in the retool layout, one stretch of the response) as
// the layout reads it. The chat layout recognises code in <code>…</code>, in ```python fences
// and in tool calls <tool_call>{"name": "python", "arguments": {"code": …}}</tool_call>; the
// retool layout only <code> blocks; the tool_call layout only tool calls. A ```python fence inside
// a <code> block or a tool call's code is taken off (ReTool-SFT writes "<code>\n```python\n…\n```\n</code>").
// Fences count only in a chat turn without <code> blocks, so that a fence inside a block is not
// run twice. The final answer is the last \boxed{…} outside code and outside <interpreter>
// blocks (nested braces allowed; "Answer: \boxed{…}" reads the same). names are the tools a
// call may name (nil: python and code_interpreter; a call without a name counts too).
func ParseAs(layout Layout, text string, names []string) Action {
	a := Action{Content: text}
	var problems []string
	var spans [][2]int // code and interpreter regions, excluded from the answer search
	// <interpreter> … </interpreter>: tool output already in the text (a ReTool turn)
	for from := 0; ; {
		i := strings.Index(text[from:], "<interpreter>")
		if i < 0 {
			break
		}
		open := from + i
		j := strings.Index(text[open:], "</interpreter>")
		if j < 0 {
			spans = append(spans, [2]int{open, len(text)})
			break
		}
		from = open + j + len("</interpreter>")
		spans = append(spans, [2]int{open, from})
	}
	inSpan := func(i int) bool {
		for _, sp := range spans {
			if i >= sp[0] && i < sp[1] {
				return true
			}
		}
		return false
	}
	// <code> … </code>
	for from := 0; layout != LayoutToolCall; {
		i := strings.Index(text[from:], "<code>")
		if i < 0 {
			break
		}
		open := from + i
		if inSpan(open) {
			from = open + len("<code>")
			continue
		}
		body := open + len("<code>")
		j := strings.Index(text[body:], "</code>")
		if j < 0 {
			problems = append(problems, "<code> is not closed by </code>")
			spans = append(spans, [2]int{open, len(text)})
			break
		}
		a.Code = append(a.Code, unfence(text[body:body+j]))
		from = body + j + len("</code>")
		spans = append(spans, [2]int{open, from})
	}
	// ``` fences
	if len(a.Code) == 0 && layout == LayoutChat {
		for _, m := range fenceRE.FindAllStringSubmatchIndex(text, -1) {
			a.Code = append(a.Code, trimCode(text[m[2]:m[3]]))
			spans = append(spans, [2]int{m[0], m[1]})
		}
		if len(a.Code) == 0 && strings.Count(text, "```")%2 == 1 {
			problems = append(problems, "a ``` code fence is not closed")
			spans = append(spans, [2]int{strings.Index(text, "```"), len(text)})
		}
	}
	// <tool_call> JSON
	for from, first := 0, true; layout != LayoutReTool; first = false {
		i := strings.Index(text[from:], "<tool_call>")
		if i < 0 {
			break
		}
		open := from + i
		if first {
			a.Content = strings.TrimSuffix(text[:open], "\n")
		}
		body := open + len("<tool_call>")
		j := strings.Index(text[body:], "</tool_call>")
		if j < 0 {
			problems = append(problems, "<tool_call> is not closed by </tool_call>")
			spans = append(spans, [2]int{open, len(text)})
			break
		}
		call, code, err := toolCallCode(text[body:body+j], names)
		if err != "" {
			problems = append(problems, err)
		} else {
			a.Code = append(a.Code, unfence(code))
			a.Calls = append(a.Calls, call)
		}
		from = body + j + len("</tool_call>")
		spans = append(spans, [2]int{open, from})
	}
	rest := outside(text, spans)
	ans, ok, bad := lastBoxed(rest)
	if !ok && !bad && len(a.Code) == 0 && layout != LayoutChat {
		// The seed's data asks for the answer on an "Answer: …" line (DAPO-Math-17k's prompt) or
		// in <answer> tags; a ReTool-SFT model writes "Answer: \boxed{…}". Outside the chat
		// layout (the built-in model's, whose numbers stay as they were) a turn without code and
		// without a box answers with such a line.
		ans, ok = mathverify.Extract(rest)
	}
	a.Answer, a.HasAnswer = ans, ok
	if bad {
		problems = append(problems, `\boxed{ has unbalanced braces`)
	}
	a.FormatError = strings.Join(problems, "; ")
	return a
}

// unfence is a code block's code: the content of its first ``` fence when it has one (the
// fence's language tag and the text around it dropped), else the block trimmed of newlines.
func unfence(block string) string {
	if m := innerFenceRE.FindStringSubmatch(block); m != nil {
		return strings.Trim(m[1], "\n")
	}
	return trimCode(block)
}

var innerFenceRE = regexp.MustCompile("(?s)```[A-Za-z0-9_+-]*[ \t]*\n(.*?)```")

// outside returns text without the spans (which may overlap), each replaced by a newline.
func outside(text string, spans [][2]int) string {
	if len(spans) == 0 {
		return text
	}
	cut := make([]bool, len(text))
	for _, sp := range spans {
		for i := max(sp[0], 0); i < sp[1] && i < len(text); i++ {
			cut[i] = true
		}
	}
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		switch {
		case !cut[i]:
			b.WriteByte(text[i])
		case i == 0 || !cut[i-1]:
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func trimCode(s string) string { return strings.Trim(s, "\n") }

// toolCallCode reads a tool call's JSON body: the call (arguments as written) and its code.
func toolCallCode(body string, names []string) (envs.ToolCall, string, string) {
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &call); err != nil {
		return envs.ToolCall{}, "", "the <tool_call> body is not valid JSON: " + err.Error()
	}
	if names == nil {
		names = []string{"python", "code_interpreter"}
	}
	if call.Name != "" && !slices.Contains(names, call.Name) {
		return envs.ToolCall{}, "", `unknown tool "` + call.Name + `": the tools are ` + strings.Join(names, ", ")
	}
	args := call.Arguments
	var s string
	if json.Unmarshal(args, &s) == nil { // arguments given as a JSON string
		args = json.RawMessage(s)
	}
	var v struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(args, &v); err != nil || v.Code == "" {
		return envs.ToolCall{}, "", `the tool call has no "code" argument`
	}
	return envs.ToolCall{Name: call.Name, Arguments: envs.TextArguments(string(call.Arguments))}, v.Code, ""
}

// lastBoxed returns the content of the last \boxed{…}, matching nested braces. bad reports an
// opening \boxed{ whose braces never close.
func lastBoxed(text string) (content string, ok, bad bool) {
	const open = `\boxed{`
	from := 0
	for {
		i := strings.Index(text[from:], open)
		if i < 0 {
			return content, ok, bad
		}
		start := from + i + len(open)
		depth, j := 1, start
		for ; j < len(text) && depth > 0; j++ {
			switch text[j] {
			case '{':
				depth++
			case '}':
				depth--
			}
		}
		if depth != 0 {
			return content, ok, true
		}
		content, ok = strings.TrimSpace(text[start:j-1]), true
		from = j
	}
}
