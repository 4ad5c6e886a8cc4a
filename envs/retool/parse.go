// Package retool is the ReTool environment: the model solves math problems by writing code that
// a sandbox runs (an executor of envs/sandbox); the output goes back into its context; a verifier
// checks the final \boxed{} answer. The chain is action text → parser → executor → observation →
// verifier → reward.
package retool

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Action is what one assistant turn asked for.
type Action struct {
	Code      []string // code blocks to run, in order
	Answer    string   // the last \boxed{...} content
	HasAnswer bool
	// FormatError explains a malformed turn (unclosed tag, bad tool-call JSON, unbalanced
	// \boxed); "" when the turn parsed.
	FormatError string
}

var fenceRE = regexp.MustCompile("(?s)```(?:python|py|python3)?[ \t]*\n(.*?)```")

// Parse reads one assistant turn. It recognises code in <code>…</code>, in ```python fences and
// in Qwen tool calls <tool_call>{"name": "python", "arguments": {"code": …}}</tool_call>, and a
// final answer in \boxed{…} outside code (nested braces allowed; the last one counts). Fences
// count only in a turn without <code> blocks, so that a fence inside a block is not run twice.
func Parse(text string) Action {
	var a Action
	var problems []string
	var spans [][2]int // code regions, excluded from the answer search
	// <code> … </code>
	for from := 0; ; {
		i := strings.Index(text[from:], "<code>")
		if i < 0 {
			break
		}
		open := from + i
		body := open + len("<code>")
		j := strings.Index(text[body:], "</code>")
		if j < 0 {
			problems = append(problems, "<code> is not closed by </code>")
			spans = append(spans, [2]int{open, len(text)})
			break
		}
		a.Code = append(a.Code, trimCode(text[body:body+j]))
		from = body + j + len("</code>")
		spans = append(spans, [2]int{open, from})
	}
	// ``` fences
	if len(a.Code) == 0 {
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
	for from := 0; ; {
		i := strings.Index(text[from:], "<tool_call>")
		if i < 0 {
			break
		}
		open := from + i
		body := open + len("<tool_call>")
		j := strings.Index(text[body:], "</tool_call>")
		if j < 0 {
			problems = append(problems, "<tool_call> is not closed by </tool_call>")
			spans = append(spans, [2]int{open, len(text)})
			break
		}
		code, err := toolCallCode(text[body : body+j])
		if err != "" {
			problems = append(problems, err)
		} else {
			a.Code = append(a.Code, code)
		}
		from = body + j + len("</tool_call>")
		spans = append(spans, [2]int{open, from})
	}
	ans, ok, bad := lastBoxed(outside(text, spans))
	a.Answer, a.HasAnswer = ans, ok
	if bad {
		problems = append(problems, `\boxed{ has unbalanced braces`)
	}
	a.FormatError = strings.Join(problems, "; ")
	return a
}

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

// toolCallCode extracts the python code of a tool call's JSON body.
func toolCallCode(body string) (string, string) {
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &call); err != nil {
		return "", "the <tool_call> body is not valid JSON: " + err.Error()
	}
	if call.Name != "python" && call.Name != "code_interpreter" && call.Name != "" {
		return "", `unknown tool "` + call.Name + `": the only tool is python`
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
		return "", `the tool call has no "code" argument`
	}
	return v.Code, ""
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
