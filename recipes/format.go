package recipes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Formats are the values of env.format.
var Formats = []string{"chat", "retool", "tool_call"}

// ResolveFiles reads the files that env.system_prompt and env.tools name with "@PATH" (a
// relative PATH taken relative to dir, the recipe file's folder) into SystemPromptFile and
// ToolsFile; a field without "@" clears its copy. Load and Parse call it; a recipe built in code
// calls it before Validate.
func (e *Env) ResolveFiles(dir string) []Problem {
	var ps []Problem
	read := func(key, val string, dst *string) {
		*dst = ""
		path, ok := strings.CutPrefix(val, "@")
		if !ok {
			return
		}
		if path == "" {
			ps = append(ps, Problem{Field: key, Message: fmt.Sprintf("%s %q names no file; want @PATH, e.g. @prompts/system.txt", key, val)})
			return
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			ps = append(ps, Problem{Field: key, Message: fmt.Sprintf("%s %q: %v (a relative path is relative to the recipe file's folder)", key, val, err)})
			return
		}
		*dst = string(data)
	}
	read("env.system_prompt", e.SystemPrompt, &e.SystemPromptFile)
	read("env.tools", e.Tools, &e.ToolsFile)
	return ps
}

// SystemText is the system prompt the recipe gives: the file's text for "@PATH", else the text
// itself; "" means the format's own.
func (e Env) SystemText() string {
	if strings.HasPrefix(e.SystemPrompt, "@") {
		return e.SystemPromptFile
	}
	return e.SystemPrompt
}

// ToolSchemas are the function schemas of env.tools, each as its JSON; python reports the
// "python" keyword (the caller supplies the python tool's schema), and "" gives none and false.
func (e Env) ToolSchemas() (schemas []json.RawMessage, python bool, err error) {
	text := e.Tools
	switch {
	case text == "":
		return nil, false, nil
	case text == "python":
		return nil, true, nil
	case strings.HasPrefix(text, "@"):
		text = e.ToolsFile
	}
	if err := json.Unmarshal([]byte(text), &schemas); err != nil {
		return nil, false, fmt.Errorf("is not a JSON array of function schemas: %w", err)
	}
	for i, s := range schemas {
		var f struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(s, &f); err != nil || f.Type != "function" || f.Function.Name == "" {
			return nil, false, fmt.Errorf(`tool %d is not {"type": "function", "function": {"name": …, "parameters": …}}`, i)
		}
	}
	if len(schemas) == 0 {
		return nil, false, fmt.Errorf("is an empty array; leave it empty (\"\") for the format's own tools")
	}
	return schemas, false, nil
}

// ToolNames are the names of env.tools' functions (nil for "" and "python").
func (e Env) ToolNames() []string {
	schemas, _, err := e.ToolSchemas()
	if err != nil {
		return nil
	}
	var names []string
	for _, s := range schemas {
		var f struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		_ = json.Unmarshal(s, &f) // checked by ToolSchemas
		names = append(names, f.Function.Name)
	}
	return names
}

// format checks env.format, env.system_prompt, env.tools and env.max_tool_calls.
func (c *checker) format() {
	e := c.r.Env
	c.oneOf("env.format", e.Format, Formats...)
	if strings.HasPrefix(e.SystemPrompt, "@") && e.SystemPromptFile == "" {
		c.failf("env.system_prompt", "%q was not read (or the file is empty); a recipe built in code calls Env.ResolveFiles first", e.SystemPrompt)
	}
	if strings.HasPrefix(e.Tools, "@") && e.ToolsFile == "" {
		c.failf("env.tools", "%q was not read (or the file is empty); a recipe built in code calls Env.ResolveFiles first", e.Tools)
	} else if _, _, err := e.ToolSchemas(); err != nil {
		c.failf("env.tools", "%s", err)
	}
	c.atLeast("env.max_tool_calls", e.MaxToolCalls, 0)
	r := c.r.Rollout
	c.atLeast("rollout.max_response_tokens", r.MaxResponseTokens, 0)
	if r.MaxResponseTokens > r.MaxTotalTokens && r.MaxTotalTokens >= 1 {
		c.fail([]string{"rollout.max_response_tokens", "rollout.max_total_tokens"}, fmt.Sprintf(
			"rollout.max_response_tokens %d is more than rollout.max_total_tokens %d, which holds the prompt too; lower it, or 0 for no bound but max_total_tokens",
			r.MaxResponseTokens, r.MaxTotalTokens))
	}
}
