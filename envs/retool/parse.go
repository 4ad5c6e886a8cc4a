// Package retool is the ReTool environment: the model solves math problems by writing code that
// a sandbox runs; the output goes back into its context; a verifier checks the final \boxed{}
// answer. The chain is action text → parser → executor → observation → verifier → reward.
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
// final answer in \boxed{…} (nested braces allowed; the last one counts).
func Parse(text string) Action {
	var a Action
	var problems []string
	// <code> … </code>
	rest := text
	for {
		i := strings.Index(rest, "<code>")
		if i < 0 {
			break
		}
		body := rest[i+len("<code>"):]
		j := strings.Index(body, "</code>")
		if j < 0 {
			problems = append(problems, "<code> is not closed by </code>")
			break
		}
		a.Code = append(a.Code, trimCode(body[:j]))
		rest = body[j+len("</code>"):]
	}
	// ``` fences (only when no <code> block was found, so that one block is not run twice)
	if len(a.Code) == 0 {
		for _, m := range fenceRE.FindAllStringSubmatch(text, -1) {
			a.Code = append(a.Code, trimCode(m[1]))
		}
		if len(a.Code) == 0 && strings.Count(text, "```")%2 == 1 {
			problems = append(problems, "a ``` code fence is not closed")
		}
	}
	// <tool_call> JSON
	rest = text
	for {
		i := strings.Index(rest, "<tool_call>")
		if i < 0 {
			break
		}
		body := rest[i+len("<tool_call>"):]
		j := strings.Index(body, "</tool_call>")
		if j < 0 {
			problems = append(problems, "<tool_call> is not closed by </tool_call>")
			break
		}
		code, err := toolCallCode(body[:j])
		if err != "" {
			problems = append(problems, err)
		} else {
			a.Code = append(a.Code, code)
		}
		rest = body[j+len("</tool_call>"):]
	}
	ans, ok, bad := lastBoxed(text)
	a.Answer, a.HasAnswer = ans, ok
	if bad {
		problems = append(problems, `\boxed{ has unbalanced braces`)
	}
	a.FormatError = strings.Join(problems, "; ")
	return a
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
