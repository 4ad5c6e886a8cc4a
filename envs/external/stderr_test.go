package external

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStderrCause: the line that says what failed is the first that names an error, not the
// stderr's last line; without one it is the last line.
func TestStderrCause(t *testing.T) {
	for _, tt := range []struct{ stderr, want string }{
		{nodeMissingOpenAI, "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'openai' imported from /src/examples/retool-agent/agent.mjs"},
		{"Traceback (most recent call last):\n  File \"agent.py\", line 1, in <module>\n    import openai\nModuleNotFoundError: No module named 'openai'\n",
			"ModuleNotFoundError: No module named 'openai'"},
		{"file:///a/agent.mjs:9\n    x.y();\n      ^\n\nTypeError: Cannot read properties of undefined (reading 'y')\n    at file:///a/agent.mjs:9:7\n\nNode.js v20.20.2\n",
			"TypeError: Cannot read properties of undefined (reading 'y')"},
		{"panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n", "panic: runtime error: index out of range [3] with length 3"},
		{"boom: the model is gone\n", "boom: the model is gone"},
		{"", ""},
	} {
		if got := StderrCause(tt.stderr); got != tt.want {
			t.Errorf("StderrCause(%q) = %q; want %q", tt.stderr, got, tt.want)
		}
	}
}

// TestStderrHint: a package Node cannot find is named with the fix (npm ci in the agent's
// folder); a missing file of the agent's own, or any other failure, gets no hint.
func TestStderrHint(t *testing.T) {
	if got := StderrHint(nodeMissingOpenAI, "/src/examples/retool-agent"); !strings.Contains(got, "the package 'openai' is not installed") ||
		!strings.Contains(got, "npm ci") || !strings.Contains(got, "env.external.dir: /src/examples/retool-agent") {
		t.Errorf("StderrHint of a missing package = %q; want it to name the package, npm ci and the folder", got)
	}
	if got := StderrHint("Error: Cannot find module 'openai'\nRequire stack:\n- /a/agent.cjs\n", ""); !strings.Contains(got, "npm ci") || !strings.Contains(got, "(env.external.dir)") {
		t.Errorf("StderrHint of CommonJS's missing module = %q; want npm ci and env.external.dir", got)
	}
	for _, s := range []string{"Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/a/helper.mjs' imported from /a/agent.mjs\n", "boom\n"} {
		if got := StderrHint(s, "/a"); got != "" {
			t.Errorf("StderrHint(%q) = %q; want none", s, got)
		}
	}
}

// TestRunCrashNamesTheCause: an agent that crashes as Node does without its packages is dropped
// with the line that says so and the fix, not with "Node.js v20.20.2".
func TestRunCrashNamesTheCause(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Command: []string{"sh", "-c", `printf '%s' "$ERR" >&2; exit 1`}, Dir: dir, Env: map[string]string{"ERR": nodeMissingOpenAI}}
	res, err := Run(context.Background(), cfg, testTask, "http://127.0.0.1:1/v1", "key-1")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, want := range []string{"crashed: exit status 1", `stderr says "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'openai'`,
		"run `npm ci`", "env.external.dir: " + dir} {
		if res.Drop != DropCrashed || !strings.Contains(res.Dropped, want) {
			t.Errorf("Dropped %q (%s); want it to contain %q", res.Dropped, res.Drop, want)
		}
	}
	if strings.Contains(res.Dropped, "Node.js v20") {
		t.Errorf("Dropped %q names Node's version, not the cause", res.Dropped)
	}
}

// nodeMissingOpenAI is what Node 20 writes when the agent's folder has no node_modules (npm ci
// never ran): the cause is near the top, the last line is Node's version. engine/play's tests read
// the same file.
var nodeMissingOpenAI = func() string {
	b, err := os.ReadFile(filepath.Join("testdata", "node-missing-openai.stderr"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()
