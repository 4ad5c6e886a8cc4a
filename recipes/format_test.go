package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFormatFields(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"format unknown", "env:\n  format: xml\n", `bad.yaml:2: env.format: "xml" is not one of chat, retool, tool_call`},
		{"tools not JSON", "env:\n  tools: '[{'\n", "bad.yaml:2: env.tools: is not a JSON array of function schemas"},
		{"tools not functions", "env:\n  tools: '[{\"name\": \"python\"}]'\n", `bad.yaml:2: env.tools: tool 0 is not {"type": "function"`},
		{"tools empty array", "env:\n  tools: '[]'\n", "bad.yaml:2: env.tools: is an empty array"},
		{"tools file missing", "env:\n  tools: '@nowhere.json'\n", `bad.yaml:2: env.tools: "@nowhere.json": open`},
		{"system prompt without a path", "env:\n  system_prompt: '@'\n", `bad.yaml:2: env.system_prompt: "@" names no file`},
		{"max tool calls negative", "env:\n  max_tool_calls: -1\n", "bad.yaml:2: env.max_tool_calls: -1 is out of range; want at least 0"},
		{"response budget past the slot", "rollout:\n  max_response_tokens: 600\n", "bad.yaml:2: rollout.max_response_tokens: 600 is more than rollout.max_total_tokens 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := loadInline(t, tc.yaml, Options{IgnoreEnv: true})
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q; want it to contain %q", got, tc.want)
			}
		})
	}
}

// "@PATH" reads a file relative to the recipe's folder into the recipe, so a stored run (its
// recipe JSON) needs no file and validates alone.
func TestFormatFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := `[{"type": "function", "function": {"name": "code_interpreter", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]`
	os.WriteFile(filepath.Join(dir, "prompts", "system.txt"), []byte("You are ReTool."), 0o644)
	os.WriteFile(filepath.Join(dir, "tools.json"), []byte(tools), 0o644)
	path := filepath.Join(dir, "r.yaml")
	os.WriteFile(path, []byte("env:\n  format: retool\n  system_prompt: '@prompts/system.txt'\n  tools: '@tools.json'\n  max_tool_calls: 8\nrollout:\n  max_response_tokens: 400\n"), 0o644)
	r, err := Load(path, Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Env.Format != "retool" || r.Env.SystemText() != "You are ReTool." || r.Env.MaxToolCalls != 8 || r.Rollout.MaxResponseTokens != 400 {
		t.Errorf("env %+v", r.Env)
	}
	schemas, python, err := r.Env.ToolSchemas()
	if err != nil || python || len(schemas) != 1 || strings.Join(r.Env.ToolNames(), ",") != "code_interpreter" {
		t.Errorf("tools %s %v %v, names %v", schemas, python, err, r.Env.ToolNames())
	}
	if err := r.Validate(); err != nil {
		t.Errorf("the loaded recipe does not validate alone: %v", err)
	}
	d := Default()
	if d.Env.Format != "chat" || d.Env.SystemText() != "" || d.Env.ToolNames() != nil {
		t.Errorf("defaults %+v", d.Env)
	}
	d.Env.Tools = "python"
	if _, python, err := d.Env.ToolSchemas(); !python || err != nil {
		t.Errorf("python: %v %v", python, err)
	}
	d.Env.SystemPrompt = "@x.txt"
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "ResolveFiles") {
		t.Errorf("an unread @PATH validated: %v", err)
	}
}
