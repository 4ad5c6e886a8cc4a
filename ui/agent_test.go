package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"agentrl/engine/event"
	"agentrl/envs"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// agentRunEvents is a step of an external agent's run (env.name external): trajectories in the
// ReTool text protocol and with an OpenAI tool call, one whose agent rewrote its history, and two
// dropped ones (a crash with its stderr, a timeout).
func agentRunEvents() []event.Event {
	str := func(s string) *string { return &s }
	opening := []envs.Message{
		{Role: "system", Content: "Solve the problem. You may run code by writing it between <code> and </code>; its output comes back in <interpreter></interpreter>. Give the final answer as \\boxed{answer}."},
		{Role: "user", Content: "What is 77 + 87?"},
	}
	base := func(sample int) event.Trajectory {
		return event.Trajectory{Step: 1, TaskID: "train-0007", Prompt: "What is 77 + 87?", Group: 0, Sample: sample, Tokens: 119}
	}
	text := base(0)
	text.Turns = []event.Turn{
		{Assistant: "<code>\nprint(77 + 87)\n</code>", Code: "print(77 + 87)", Observation: "<interpreter>\n164\n</interpreter>", ToolStatus: "ok", Finish: "stop",
			Sent: []envs.Message{{Role: "user", Content: "<interpreter>\n164\n</interpreter>"}}},
		{Assistant: "\\boxed{164}", Finish: "stop"},
	}
	text.Reward, text.Correct = envs.Reward{Outcome: 1, Shaping: 1, Total: 1}, true
	text.Agent = &event.Agent{Answer: str("164"), Info: json.RawMessage(`{"turns":2,"tool_calls":1,"tool_errors":0,"finish":"answer"}`),
		Seconds: 3.4, Requests: 2, Segments: 1, Opening: opening}
	call := base(1)
	call.Turns = []event.Turn{
		{Assistant: "", Code: "print(77 + 87)", ToolCalls: []envs.ToolCall{{Name: "python", Arguments: envs.TextArguments(`{"code": "print(77 + 87)"}`)}}, Finish: "tool_calls",
			Observation: "163", ToolStatus: "ok", Sent: []envs.Message{{Role: "tool", Content: "163", ToolCallID: "call_0"}}},
		{Assistant: "\\boxed{163}", Finish: "stop"},
	}
	call.Reward = envs.Reward{Shaping: 1}
	call.Agent = &event.Agent{Answer: str("163"), Seconds: 2.9, Queued: 1.5, Requests: 2, Segments: 1, Opening: opening}
	rewrote := base(2)
	rewrote.Turns = []event.Turn{{Assistant: "Let me think.", Finish: "stop"}, {Assistant: "\\boxed{164}", Finish: "stop", NewSegment: true}}
	rewrote.Reward, rewrote.Correct = envs.Reward{Outcome: 1, FormatPenalty: 1, Total: 0.9}, true
	rewrote.Agent = &event.Agent{Answer: str("164"), Seconds: 4.1, Requests: 2, Segments: 2, Opening: opening}
	crashed := base(3)
	crashed.Turns = []event.Turn{{Assistant: "<code>\nprint(77 + 87)\n</code>", Code: "print(77 + 87)", Finish: "stop"}}
	crashed.Agent = &event.Agent{Drop: "crashed", Dropped: `crashed: exit status 1; stderr ends "retool-agent: cannot run the sandbox agentrl-tui (ENOENT); set AGENTRL_BIN to the agentrl-tui binary"`,
		StderrTail: "(node:4242) Warning: something harmless\nretool-agent: cannot run the sandbox agentrl-tui (ENOENT); set AGENTRL_BIN to the agentrl-tui binary\n",
		ExitCode:   1, Seconds: 1.2, Requests: 1, Segments: 1, Opening: opening}
	timeout := base(4)
	timeout.Agent = &event.Agent{Drop: "timeout", Dropped: "timed out after 5m0s; its process group was killed", ExitCode: -1, Signal: "SIGTERM", Seconds: 300, Requests: 0}
	return []event.Event{
		event.RunStart{RunID: "agent-retool-20261125", Name: "agent-retool", Recipe: "recipes/agent-retool.yaml", TotalSteps: 1, Backend: "go"},
		event.Phase{Step: 1, Phase: event.PhaseRollout, Seconds: 30},
		event.StepMetrics{Step: 1, Metrics: map[event.Metric]float64{"reward_mean": 0.633, "accuracy": 0.667, "loss": 0.1, "logprob_diff_max": 3e-6,
			"dropped": 2, "dropped_crashed": 1, "dropped_timeout": 1, "dropped_no_result": 0, "dropped_bad_result": 0, "dropped_no_requests": 0}},
		text, call, rewrote, crashed, timeout,
		event.RunEnd{Status: "finished", Reason: "all 1 steps done", Step: 1, Checkpoint: 1},
	}
}

// TestTUIAgent shows an external agent's trajectories: the list with the dropped ones marked by
// their reason, a trajectory's requests with the messages the agent sent and its tool calls, a
// rewritten history, and a dropped trajectory's reason and stderr (goldens in
// testdata/TestTUIAgent; go test ./ui -update rewrites them).
func TestTUIAgent(t *testing.T) {
	cases := []struct {
		name  string
		w, h  int
		keys  []string
		until string
	}{
		{name: "list_120x24", w: 120, h: 24, keys: []string{"3"}, until: "3 Trajectories"},
		{name: "text_100x40", w: 100, h: 40, keys: []string{"3", "g", "enter"}, until: "4 Detail"},
		{name: "toolcall_100x40", w: 100, h: 40, keys: []string{"3", "g", "j", "enter"}, until: "4 Detail"},
		{name: "segments_100x40", w: 100, h: 40, keys: []string{"3", "g", "j", "j", "enter"}, until: "new segment"},
		{name: "dropped_100x40", w: 100, h: 40, keys: []string{"3", "/", "d", "r", "o", "p", "p", "e", "d", "enter", "g", "enter"}, until: "Agent's stderr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan event.Event)
			cfg := config{runID: "agent-retool-20261125", memSample: func() uint64 { return 123 << 20 }, events: ch, ctrl: &fakeCtrl{}}
			tm := teatest.NewTestModel(t, newModel(cfg), teatest.WithInitialTermSize(tc.w, tc.h))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() {
				event.Recording(agentRunEvents()).Replay(ctx, ch)
				close(ch)
			}()
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("run finished")) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
			for _, k := range tc.keys {
				tm.Send(keyMsg(k))
			}
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(tc.until)) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
			tm.Send(tea.Quit())
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*model)
			golden.RequireEqual(t, []byte(final.View()))
		})
	}
}

// TestPlainDropped: the plain log says why each dropped trajectory was dropped, with its stderr's
// last line when the reason does not quote it; usable trajectories print nothing.
func TestPlainDropped(t *testing.T) {
	var b bytes.Buffer
	if err := Plain(&b, stream(agentRunEvents()[2:]...)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`step 1  dropped train-0007 #3: crashed: exit status 1; stderr ends "retool-agent: cannot run the sandbox`,
		"step 1  dropped train-0007 #4: timed out after 5m0s; its process group was killed\n",
		"dropped=2 dropped_bad_result=0 dropped_crashed=1",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the plain log lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "#0") || strings.Contains(b.String(), "#1:") {
		t.Errorf("a usable trajectory has a line:\n%s", b.String())
	}
	tr := agentRunEvents()[6].(event.Trajectory)
	tr.Agent.Dropped = "crashed: exit status 1"
	if got := PlainLine(tr); !strings.Contains(got, `(stderr ends "retool-agent: cannot run the sandbox`) {
		t.Errorf("without the stderr in its reason, the line reads %q; want the stderr's last line", got)
	}
}

// TestFilterDropped: dropped, !dropped and drop:KIND filter an agent's trajectories.
func TestFilterDropped(t *testing.T) {
	var trajs []event.Trajectory
	for _, e := range agentRunEvents() {
		if tr, ok := e.(event.Trajectory); ok {
			trajs = append(trajs, tr)
		}
	}
	for filter, want := range map[string]int{"dropped": 2, "!dropped": 3, "drop:timeout": 1, "drop:crashed correct": 0, "correct !dropped": 2} {
		f, err := parseFilter(filter)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range trajs {
			if f.match(&trajs[i]) {
				n++
			}
		}
		if n != want {
			t.Errorf("filter %q matches %d; want %d", filter, n, want)
		}
	}
}
