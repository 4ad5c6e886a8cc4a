package ui

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"agentrl/engine/event"
	"agentrl/envs"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

func TestMain(m *testing.M) {
	// golden views are plain text: no colours, no styles
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// fakeCtrl records the commands it is given.
type fakeCtrl struct {
	calls []string
	err   error
}

func (f *fakeCtrl) Pause() error  { f.calls = append(f.calls, "pause"); return f.err }
func (f *fakeCtrl) Resume() error { f.calls = append(f.calls, "resume"); return f.err }
func (f *fakeCtrl) Stop(reason string) (string, error) {
	f.calls = append(f.calls, "stop: "+reason)
	return "stopping now: step 3's rollout is dropped; the checkpoint of step 2 is kept", f.err
}
func (f *fakeCtrl) MarkBest(step int) error {
	f.calls = append(f.calls, fmt.Sprintf("best %d", step))
	return f.err
}
func (f *fakeCtrl) Export(step int) (string, error) {
	f.calls = append(f.calls, fmt.Sprintf("export %d", step))
	return fmt.Sprintf("/tmp/export/step-%d", step), f.err
}

// trajectory makes a deterministic trajectory i of a step.
func trajectory(step, i int) event.Trajectory {
	correct := (step+i)%3 != 0
	t := event.Trajectory{
		Step: step, TaskID: fmt.Sprintf("gsm8k-%04d", (step*7+i/4)%1000), Prompt: fmt.Sprintf("Natalia sold clips to %d of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?", 40+i),
		Group: i / 4, Sample: i % 4, Tokens: 180 + 37*i%400, ToolErrors: i % 5 / 4,
	}
	t.Turns = []event.Turn{
		{Assistant: "Let me compute the total number of clips with a short program.", Code: fmt.Sprintf("april = %d\nmay = april // 2  # half as many\nprint(april + may)", 40+i),
			Observation: fmt.Sprint(40 + i + (40+i)/2), ToolStatus: "ok", ToolSeconds: 0.12},
	}
	if i%5 == 4 {
		t.Turns = append(t.Turns, event.Turn{Assistant: "The tool failed; retrying with a fixed name.", Code: "print(totl)",
			Observation: "NameError: name 'totl' is not defined", ToolStatus: "error", ToolSeconds: 0.05})
	}
	t.Turns = append(t.Turns, event.Turn{Assistant: fmt.Sprintf("The answer is \\boxed{%d}.", 40+i+(40+i)/2)})
	if correct {
		t.Reward = envs.Reward{Outcome: 1, Process: 0.8, Shaping: 0.05, Total: 1.05}
	} else {
		t.Reward = envs.Reward{Outcome: 0, Process: 0.3, Shaping: 0.05, FormatPenalty: 0.1, Total: -0.05}
	}
	t.Correct = correct
	if !correct && i%2 == 0 {
		t.Hint = "Wait — the program printed the sum but May is half of April; check the division before answering."
	}
	adv := float32(-0.6)
	if correct {
		adv = 0.4
	}
	for j, p := range []string{"Let", " me", " compute", " the", " total", ".", "\n", "april", " =", " 4", "2"} {
		t.Pieces = append(t.Pieces, p)
		t.Advantages = append(t.Advantages, adv*float32(1+j%3)/2)
	}
	return t
}

// sampleRun is a small recorded run: three steps of eight trajectories on a GPU backend, with
// evaluations, checkpoints and one alarm, stopped in the middle of step 4's rollout.
func sampleRun() []event.Event {
	evs := []event.Event{
		event.RunStart{RunID: "r-20250101-abc", Name: "retool-qwen-0.5b", Recipe: "recipes/retool.yaml", TotalSteps: 10, Backend: "xla:cuda", Model: "Qwen/Qwen2.5-0.5B-Instruct",
			Compiles: map[string]event.Compiled{"decode": {Programs: 8, Seconds: 4.1}, "prefill": {Programs: 16, Seconds: 9.8}}},
		event.Ledger{Backend: "xla:cuda", Components: map[string]int64{"weights": 2 << 30, "kv_cache": 6 << 30, "optimizer": 4 << 30, "activations": 3 << 30}, Budget: 20 << 30, DeviceUsed: 18 << 30, DeviceTotal: 80 << 30, UtilPct: 71},
		event.Eval{Step: 0, PassAtK: map[int]float64{1: 0.21, 4: 0.38, 8: 0.47}},
	}
	secs := map[string]float64{"rollout": 41.5, "score": 0.8, "reference": 3.2, "advantage": 0.02, "train": 12.4, "sync": 0.4, "eval": 20.1, "save": 1.9}
	for step := 1; step <= 3; step++ {
		for _, ph := range []string{event.PhaseRollout, event.PhaseScore, event.PhaseReference, event.PhaseAdvantage, event.PhaseTrain, event.PhaseSync} {
			if ph == event.PhaseRollout {
				evs = append(evs, event.Progress{Step: step, Phase: ph, Done: 4, Total: 8})
			}
			evs = append(evs, event.Phase{Step: step, Phase: ph, Seconds: secs[ph] + float64(step)/10})
			if ph == event.PhaseRollout {
				evs = append(evs, generation(step, event.PhaseRollout))
			}
		}
		if step == 3 {
			evs = append(evs, event.Alarm{Step: 3, Kind: event.AlarmLogProbMismatch, Value: 0.31, Threshold: 0.1,
				Message: "rollout and trainer log-probs disagree: the inference weights may be stale"})
		}
		evs = append(evs, event.StepMetrics{Step: step, Metrics: map[event.Metric]float64{
			"reward_mean": 0.2 + 0.1*float64(step), "accuracy": 0.3 + 0.05*float64(step), "hinted_share": 0.25, "loss": 0.9 - 0.1*float64(step),
			"grad_norm": 1.2, "clip_frac": 0.02, "lr": 1e-6, "tokens_per_s": 1500 + 100*float64(step), "logprob_diff_max": 0.01,
			"rollout_occupancy": 0.6 + 0.05*float64(step), "rollout_tail_s": 9.5 - float64(step), "tool_stall_share": 0.01, "tool_queue_s": 0.2},
			Compiles: map[string]event.Compiled{"decode": {Programs: 8, Seconds: 4.1}, "prefill": {Programs: 16, Seconds: 9.8},
				"reference": {Programs: 3, Seconds: 2.2}, "train": {Programs: 2, Seconds: 6.5}, "sync": {Programs: 2, Seconds: 0.4}}})
		for i := 0; i < 8; i++ {
			evs = append(evs, trajectory(step, i))
		}
		if step == 3 {
			evs = append(evs, evalProgress(3, 4)...)
		}
		if step >= 2 {
			evs = append(evs, generation(step, event.PhaseEval))
			evs = append(evs, event.Eval{Step: step, PassAtK: map[int]float64{1: 0.21 + 0.06*float64(step), 4: 0.38 + 0.05*float64(step), 8: 0.47 + 0.04*float64(step)}, Best: step == 3},
				event.Phase{Step: step, Phase: event.PhaseEval, Seconds: secs["eval"]})
			evs = append(evs, event.Checkpoint{Step: step, ID: fmt.Sprintf("r-20250101-abc/%d", step), Bytes: 988 << 20, Best: step == 3})
		}
		evs = append(evs, event.Phase{Step: step, Phase: event.PhaseSave, Seconds: secs["save"]})
		evs = append(evs, event.Ledger{Backend: "xla:cuda", Components: map[string]int64{"weights": 2 << 30, "kv_cache": 6 << 30, "optimizer": 4 << 30, "activations": int64(2+step) << 30},
			Budget: 20 << 30, DeviceUsed: uint64(17+step) << 30, DeviceTotal: 80 << 30, UtilPct: uint32(60 + 10*step)})
	}
	evs = append(evs, event.Progress{Step: 4, Phase: event.PhaseRollout, Done: 3, Total: 8, ETA: 25, RunETA: 512})
	return evs
}

// generation is how a generation phase of step used 16 slots: full, then the tail.
func generation(step int, phase string) event.Generation {
	trace := []float64{1, 1, 1, 0.94, 1, 1, 0.88, 0.94, 0.81, 0.75, 0.5, 0.31, 0.19, 0.12, 0.06, 0.06}
	occ := 0.0
	for _, v := range trace {
		occ += v
	}
	return event.Generation{Step: step, Phase: phase, Slots: 16, Steps: 480, Occupancy: occ / float64(len(trace)), TailSeconds: 9.5 - float64(step),
		ToolStallShare: 0.01, ToolQueueSeconds: 0.2, Trace: trace, TraceEvery: 30}
}

// evalProgress is an evaluation of step as it runs, through its first n of 4 trajectories (2
// held-out tasks × 2 samples): each trajectory, marked Eval, then its progress.
func evalProgress(step, n int) []event.Event {
	var evs []event.Event
	for i := 0; i < n; i++ {
		tr := trajectory(step, i)
		tr.TaskID, tr.Group, tr.Sample, tr.Hint, tr.Pieces, tr.Advantages, tr.Eval = fmt.Sprintf("heldout-%04d", i/2), i/2, i%2, "", nil, nil, true
		p := event.Progress{Step: step, Phase: event.PhaseEval, Done: i + 1, Total: 4, ETA: 30 - 7.5*float64(i+1), RunETA: 900 - 7.5*float64(i+1),
			RunETAAtLeast: step == 0, Tasks: 2, TasksDone: (i + 1) / 2}
		if p.TasksDone > 0 {
			p.PassAtK = map[int]float64{1: 0.5, 4: 0.75}
		}
		evs = append(evs, tr, p)
	}
	return evs
}

// testModel builds the root model on recorded events at a size, with a fixed memory sample.
func testModel(evs []event.Event, ctrl Controller, w, h int) *model {
	m := newModel(config{initial: evs, ctrl: ctrl, runID: "r-20250101-abc", memSample: func() uint64 { return 123 << 20 }})
	if ctrl != nil {
		m.events = make(chan event.Event) // a live run: its stream is open
		m.streamEnd = false
	}
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

// run executes cmd and feeds what it returns back into m, depth first (no blocking commands are
// in these tests: no stream, no memory ticker).
func run(m *model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	msg := cmd()
	if v := reflect.ValueOf(msg); v.Kind() == reflect.Slice && v.Type().Elem() == reflect.TypeFor[tea.Cmd]() {
		// tea.BatchMsg, and tea.Sequence's unexported message: run them in order
		for i := range v.Len() {
			run(m, v.Index(i).Interface().(tea.Cmd))
		}
		return
	}
	switch msg := msg.(type) {
	case nil:
	case tea.QuitMsg:
	default:
		_, next := m.Update(msg)
		run(m, next)
	}
}

// press sends keys to m (running the commands they return); names are bubbletea key strings
// ("enter", "esc", "tab", "shift+tab") or single runes.
func press(m *model, keys ...string) {
	for _, k := range keys {
		_, cmd := m.Update(keyMsg(k))
		run(m, cmd)
	}
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// typeText types s rune by rune.
func typeText(m *model, s string) {
	for _, r := range s {
		if r == ' ' {
			press(m, " ")
		} else {
			press(m, string(r))
		}
	}
}

// screen returns the view and checks its shape: h lines of exactly w cells.
func screen(t *testing.T, m *model, w, h int) string {
	t.Helper()
	v := m.View()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Fatalf("view has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if width(l) != w {
			t.Fatalf("line %d is %d cells wide, want %d: %q", i, width(l), w, l)
		}
	}
	return v
}
