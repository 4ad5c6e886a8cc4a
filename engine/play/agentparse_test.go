package play

import (
	"testing"

	"agentrl/engine/event"
	"agentrl/engine/serve"
	"agentrl/envs"
)

// TestAgentSummary: what the hinter, the process scorer and the reward read from an agent's
// transcript in the ReTool format: tool results, their errors and the last output, format errors.
func TestAgentSummary(t *testing.T) {
	obs := func(body string) []envs.Message {
		return []envs.Message{{Role: "user", Content: "<interpreter>\n" + body + "\n</interpreter>"}}
	}
	rec := &serve.Trajectory{Turns: []serve.Turn{
		{Messages: []envs.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "What is 6 * 7?"}}},
		{Messages: obs("Traceback (most recent call last):\n  File \"<code>\", line 1, in <module>\nNameError: name 'x' is not defined")},
		{Messages: obs("42")},
		{Messages: []envs.Message{{Role: "tool", Content: "5\n[timeout: 5s]"}}},
	}}
	turns := []event.Turn{{Assistant: "<code>\nprint(x)\n</code>"}, {Assistant: "<code>\nprint(6*7)\n</code>"}, {Assistant: "thinking"}, {Assistant: `\boxed{42}`}}
	s := agentSummary(rec, turns)
	if s.Turns != 4 || s.ToolCalls != 3 || s.ToolErrors != 1 || s.Timeouts != 1 || s.LastOutput != "42" || s.FormatErrors != 1 || s.Recovered {
		t.Errorf("summary %+v; want 4 turns, 3 calls (an error, an output 42, a timeout), 1 format error, not recovered", s)
	}
	if s.LastError != "timeout: 5s" {
		t.Errorf("last error %q; want the timeout's", s.LastError)
	}
	for text, want := range map[string]string{"164": "ok", "code.py:1:7: undefined: x": "error", "ZeroDivisionError: division by zero": "error",
		"1\n[stopped: memory]": "killed", "<interpreter>\n7\n</interpreter>": "ok", "": ""} {
		if got := readObservation(text).status; got != want {
			t.Errorf("readObservation(%q) = %q; want %q", text, got, want)
		}
	}
}
