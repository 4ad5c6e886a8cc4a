package ui

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/event"

	tea "github.com/charmbracelet/bubbletea"
)

func trajPaneOf(m *model) *trajPane { return m.panes[paneTrajs].(*trajPane) }

// shown returns the task/sample/reward of the rows the Trajectories pane lists, in order.
func shown(m *model) []*event.Trajectory {
	p := trajPaneOf(m)
	out := make([]*event.Trajectory, len(p.view))
	for i, idx := range p.view {
		out[i] = &m.sh.data.trajs[idx]
	}
	return out
}

func TestFilter(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 120, 40)
	press(m, "3", "/")
	if !trajPaneOf(m).Capturing() {
		t.Fatal("/ did not start the filter")
	}
	typeText(m, "wrong step:2")
	// keys typed into the filter are not global keys: "2" did not jump to the GPU pane
	if m.focus != paneTrajs {
		t.Fatalf("focus moved to %v while typing a filter", m.focus)
	}
	rows := shown(m)
	if len(rows) == 0 {
		t.Fatal("the filter matches nothing")
	}
	for _, r := range rows {
		if r.Correct || r.Step != 2 {
			t.Fatalf("filter wrong step:2 kept step %d correct=%v", r.Step, r.Correct)
		}
	}
	press(m, "enter")
	v := screen(t, m, 120, 40)
	if !strings.Contains(v, "filter: wrong step:2") || !strings.Contains(v, fmt.Sprintf("%d of 28", len(rows))) {
		t.Fatalf("the filter is not shown:\n%s", v)
	}
	// esc clears the filter, a second esc does nothing more in the list
	press(m, "esc")
	if n := len(shown(m)); n != 28 {
		t.Fatalf("after esc the list has %d rows, want 28 (24 training, 4 evaluation)", n)
	}
	// esc while typing restores the previous filter
	press(m, "/")
	typeText(m, "hinted")
	press(m, "esc")
	if n := len(shown(m)); n != 28 || trajPaneOf(m).filter != "" {
		t.Fatalf("esc while typing left filter %q with %d rows", trajPaneOf(m).filter, n)
	}
	// a bad term is reported, not applied
	press(m, "/")
	typeText(m, "reward>x")
	if !strings.Contains(screen(t, m, 120, 40), "want reward>x") {
		t.Fatal("a malformed reward filter is not explained")
	}
	press(m, "backspace")
	typeText(m, "1")
	press(m, "enter")
	for _, r := range shown(m) {
		if r.Reward.Total <= 1 {
			t.Fatalf("reward>1 kept reward %v", r.Reward.Total)
		}
	}
	// text matches the task id and the prompt, case-insensitively
	press(m, "esc", "/")
	typeText(m, "GSM8K-0015 natalia")
	press(m, "enter")
	if rows := shown(m); len(rows) != 4 || rows[0].TaskID != "gsm8k-0015" {
		t.Fatalf("text filter kept %d rows", len(rows))
	}
}

func TestSort(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 120, 40)
	press(m, "3", "s") // arrival → reward, highest first
	rows := shown(m)
	for i := 1; i < len(rows); i++ {
		if rows[i-1].Reward.Total < rows[i].Reward.Total {
			t.Fatalf("not sorted by reward descending at row %d", i)
		}
	}
	if !strings.Contains(screen(t, m, 120, 40), "sort reward ↓") {
		t.Fatal("the sort is not shown")
	}
	press(m, "r")
	rows = shown(m)
	for i := 1; i < len(rows); i++ {
		if rows[i-1].Reward.Total > rows[i].Reward.Total {
			t.Fatalf("reverse did not sort ascending at row %d", i)
		}
	}
	press(m, "s") // tokens
	rows = shown(m)
	for i := 1; i < len(rows); i++ {
		if rows[i-1].Tokens < rows[i].Tokens {
			t.Fatalf("not sorted by tokens at row %d", i)
		}
	}
	for range len(sortKeys) - 2 {
		press(m, "s")
	}
	if p := trajPaneOf(m); p.sortBy != 0 || p.desc {
		t.Fatalf("s did not cycle back to arrival order: %d desc=%v", p.sortBy, p.desc)
	}
	for i, idx := range trajPaneOf(m).view {
		if idx != i {
			t.Fatalf("arrival order broken at %d", i)
		}
	}
}

func TestFollow(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 80, 24)
	p := trajPaneOf(m)
	press(m, "3")
	if !p.follow || p.selected() != 27 {
		t.Fatalf("follow should start on and select the newest: follow=%v selected=%d", p.follow, p.selected())
	}
	m.Update(eventsMsg{events: []event.Event{trajectory(4, 0), trajectory(4, 1)}})
	if p.selected() != 29 {
		t.Fatalf("following: selected %d after two more, want 29", p.selected())
	}
	v := screen(t, m, 80, 24)
	if !strings.Contains(v, "following latest") || !strings.Contains(v, "›     4") {
		t.Fatalf("the newest row is not selected on screen:\n%s", v)
	}
	// moving the cursor stops following; new rows no longer move it
	press(m, "k")
	if p.follow || p.selected() != 28 {
		t.Fatalf("k: follow=%v selected=%d", p.follow, p.selected())
	}
	m.Update(eventsMsg{events: []event.Event{trajectory(4, 2)}})
	if p.selected() != 28 {
		t.Fatalf("not following: selection moved to %d", p.selected())
	}
	press(m, "f")
	if !p.follow || p.selected() != 30 {
		t.Fatalf("f: follow=%v selected=%d", p.follow, p.selected())
	}
	press(m, "f", "g")
	if p.follow || p.selected() != 0 {
		t.Fatalf("f g: follow=%v selected=%d", p.follow, p.selected())
	}
}

func TestDetailOpenBack(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 80, 24)
	press(m, "3", "g", "j", "j", "enter")
	if m.focus != paneDetail || m.detail.idx != 2 {
		t.Fatalf("enter: focus %v, detail %d", m.focus, m.detail.idx)
	}
	v := screen(t, m, 80, 24)
	for _, want := range []string{"4 Detail", "task gsm8k-0007", "sample 2", "Turn 1", "april = 42"} {
		if !strings.Contains(v, want) {
			t.Fatalf("detail lacks %q:\n%s", want, v)
		}
	}
	// the reward breakdown and the bridge thought are further down
	press(m, "G")
	v = screen(t, m, 80, 24)
	for _, want := range []string{"Reward", "outcome", "format penalty", "Bridge thought", "check the"} {
		if !strings.Contains(v, want) {
			t.Fatalf("detail end lacks %q:\n%s", want, v)
		}
	}
	// token view coloured by advantage: without colours, level marks
	press(m, "t")
	v = screen(t, m, 80, 24)
	if !strings.Contains(v, "advantage min") || !strings.Contains(v, "⟨-") || !strings.Contains(v, "compute") {
		t.Fatalf("token view:\n%s", v)
	}
	press(m, "]")
	if m.detail.idx != 3 || m.detail.tokens {
		t.Fatalf("]: detail %d tokens=%v", m.detail.idx, m.detail.tokens)
	}
	press(m, "esc")
	if m.focus != paneTrajs {
		t.Fatalf("esc from Detail went to %v", m.focus)
	}
	// from Hints, esc returns to Hints
	press(m, "5", "enter")
	if m.focus != paneDetail || m.sh.data.trajs[m.detail.idx].Hint == "" {
		t.Fatal("enter in Hints did not open a hinted trajectory")
	}
	press(m, "esc")
	if m.focus != paneHints {
		t.Fatalf("esc went to %v, want Hints", m.focus)
	}
}

func TestConfirmStop(t *testing.T) {
	for _, answer := range []string{"y", "n", "esc"} {
		t.Run(answer, func(t *testing.T) {
			c := &fakeCtrl{}
			m := testModel(sampleRun(), c, 80, 24)
			press(m, "7", "S")
			if v := screen(t, m, 80, 24); !strings.Contains(v, "Stop the run now?") {
				t.Fatalf("S did not ask:\n%s", v)
			}
			// other keys wait for the answer
			press(m, "3", "q")
			if m.focus != paneCkpts || len(c.calls) != 0 {
				t.Fatalf("keys acted during the question: focus %v calls %v", m.focus, c.calls)
			}
			press(m, answer)
			v := screen(t, m, 80, 24)
			if answer == "y" {
				if len(c.calls) != 1 || c.calls[0] != "stop: "+ReasonStop || !m.sh.data.stopping {
					t.Fatalf("y: calls %v stopping %v", c.calls, m.sh.data.stopping)
				}
				if !strings.Contains(v, " stopping · ") || !strings.Contains(v, "stopping now: step 3's rollout is dropped") {
					t.Fatalf("the status line does not say stopping, or the footer what the stop does:\n%s", v)
				}
				return
			}
			if len(c.calls) != 0 || m.sh.data.stopping || strings.Contains(v, "stopping") || strings.Contains(v, "(y/n)") {
				t.Fatalf("%s: calls %v stopping %v\n%s", answer, c.calls, m.sh.data.stopping, v)
			}
		})
	}
}

// TestEvaluationOnScreen: while the start evaluation runs, before any step, its trajectories are
// listed (marked eval; e shows only them or only the training ones), pass@k fills in as tasks
// complete, and the header and the Status pane give the time left in the phase and the run.
func TestEvaluationOnScreen(t *testing.T) {
	evs := append(sampleRun()[:2], evalProgress(0, 3)...)
	m := testModel(evs, &fakeCtrl{}, 120, 40)
	v := screen(t, m, 120, 40)
	for _, want := range []string{"▶eval 3/4", "ETA eval 7.50s, run ≥ 14m37s", "eval so far pass@1 0.500 · pass@4 0.750 (1/2 tasks)",
		"Evaluation of step 0 in progress: 3 of 4 trajectories", "so far pass@1 0.500", "the evaluation of step 0 is", "running: so far pass@1 0.500 ·"} {
		if !strings.Contains(v, want) {
			t.Errorf("the screen lacks %q:\n%s", want, v)
		}
	}
	press(m, "3")
	v = screen(t, m, 120, 40)
	if !strings.Contains(v, "3 Trajectories · 3 (3 eval)") || !strings.Contains(v, "     0 eval  heldout-0001") {
		t.Errorf("the evaluation's trajectories are not listed as such:\n%s", v)
	}
	for _, tc := range []struct {
		keys  []string
		shown int
		info  string
	}{
		{[]string{"e"}, 0, "training only (e)"},
		{[]string{"e"}, 3, "evaluation only (e)"},
		{[]string{"e"}, 3, "/ filters"},
		{[]string{"/", "t", "r", "a", "i", "n", "enter"}, 0, "filter: train"},
		{[]string{"esc", "/", "e", "v", "a", "l", "enter"}, 3, "filter: eval"},
	} {
		press(m, tc.keys...)
		if v := screen(t, m, 120, 40); len(shown(m)) != tc.shown || !strings.Contains(v, tc.info) {
			t.Errorf("after %v: %d rows shown; want %d, and %q:\n%s", tc.keys, len(shown(m)), tc.shown, tc.info, v)
		}
	}
}

// TestQuitStopsALiveRun: q and ctrl+c close the workbench, asking a live run to stop first (the
// command line then waits for it); a run that has ended, or a stored one, is only closed.
func TestQuitStopsALiveRun(t *testing.T) {
	ended := append(sampleRun(), event.RunEnd{Status: "finished", Reason: "all 4 steps done", Step: 4, Checkpoint: 4, Evaluations: 2})
	for _, tc := range []struct {
		name  string
		evs   []event.Event
		ctrl  bool
		key   string
		calls []string
	}{
		{name: "q on a live run", evs: sampleRun(), ctrl: true, key: "q", calls: []string{"stop: " + ReasonQuit}},
		{name: "ctrl+c on a live run", evs: sampleRun(), ctrl: true, key: "ctrl+c", calls: []string{"stop: " + ReasonQuit}},
		{name: "q in help", evs: sampleRun(), ctrl: true, key: "?q", calls: []string{"stop: " + ReasonQuit}},
		{name: "q after the run ended", evs: ended, ctrl: true, key: "q"},
		{name: "q on a stored run", evs: ended, key: "q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCtrl{}
			var ctrl Controller
			if tc.ctrl {
				ctrl = c
			}
			m := testModel(tc.evs, ctrl, 80, 24)
			keys := []string{tc.key}
			if tc.key == "?q" {
				keys = []string{"?", "q"}
			}
			var quit bool
			for _, k := range keys {
				_, cmd := m.Update(keyMsg(k))
				quit = quits(m, cmd)
			}
			if !quit || !slices.Equal(c.calls, tc.calls) {
				t.Errorf("quit %v, calls %v; want quit, calls %v", quit, c.calls, tc.calls)
			}
		})
	}
}

// quits runs cmd like run does and reports whether it ends in tea.Quit.
func quits(m *model, cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	msg := cmd()
	if v := reflect.ValueOf(msg); v.Kind() == reflect.Slice && v.Type().Elem() == reflect.TypeFor[tea.Cmd]() {
		q := false
		for i := range v.Len() {
			q = quits(m, v.Index(i).Interface().(tea.Cmd)) || q
		}
		return q
	}
	if _, ok := msg.(tea.QuitMsg); ok {
		return true
	}
	if msg != nil {
		_, next := m.Update(msg)
		return quits(m, next)
	}
	return false
}

func TestMarkBestAndExport(t *testing.T) {
	c := &fakeCtrl{}
	m := testModel(sampleRun(), c, 80, 24)
	press(m, "7")
	v := screen(t, m, 80, 24)
	if !strings.Contains(v, "best*") {
		t.Fatalf("the automatic best is not marked:\n%s", v)
	}
	press(m, "k", "b")
	if len(c.calls) != 1 || c.calls[0] != "best 2" {
		t.Fatalf("b called %v", c.calls)
	}
	v = screen(t, m, 80, 24)
	var row string
	autoRows := 0
	for _, l := range ckptRows(v) {
		if strings.Contains(l, "★ manual") {
			row = l
		}
		if strings.Contains(l, "best*") {
			autoRows++
		}
	}
	if !strings.Contains(row, "   2 ") || autoRows != 0 {
		t.Fatalf("step 2 is not the manual best:\n%s", v)
	}
	press(m, "e")
	if c.calls[1] != "export 2" || !strings.Contains(screen(t, m, 80, 24), "exported step 2 to /tmp/export/step-2") {
		t.Fatalf("export: %v\n%s", c.calls, screen(t, m, 80, 24))
	}
	// a failing controller is reported, and changes nothing
	c.err = errors.New("disk full")
	press(m, "j", "b")
	if m.sh.data.bestOverride != 2 || !strings.Contains(screen(t, m, 80, 24), "disk full") {
		t.Fatal("a failed mark changed the best or was not reported")
	}
}

// ckptRows are the Checkpoints table's rows on screen v: the lines whose pane text starts with a
// step (after the cursor mark).
func ckptRows(v string) []string {
	var out []string
	for _, l := range strings.Split(v, "\n") {
		if _, text, ok := strings.Cut(l, "│"); ok && ckptRow.MatchString(text) {
			out = append(out, text)
		}
	}
	return out
}

var ckptRow = regexp.MustCompile(`^[› ] +[0-9]+ `)

func TestPause(t *testing.T) {
	c := &fakeCtrl{}
	m := testModel(sampleRun(), c, 80, 24)
	press(m, "a") // the alarm would hide the phase row; the run line shows the state either way
	press(m, "p")
	if !m.sh.data.paused || !strings.Contains(screen(t, m, 80, 24), "paused") {
		t.Fatal("p did not pause")
	}
	press(m, "p")
	if m.sh.data.paused || strings.Contains(strings.Split(screen(t, m, 80, 24), "\n")[1], "paused") {
		t.Fatal("p did not resume")
	}
	if strings.Join(c.calls, ",") != "pause,resume" {
		t.Fatalf("calls %v", c.calls)
	}
}

func TestAlarmAck(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 80, 24)
	v := screen(t, m, 80, 24)
	if !strings.Contains(v, "!! ALARM logprob_mismatch at step 3") {
		t.Fatalf("the alarm is not in the status line:\n%s", v)
	}
	// a second alarm of another kind, and a repeat of the first
	m.Update(eventsMsg{events: []event.Event{
		event.Alarm{Step: 4, Kind: event.AlarmTokenDrift, Value: 1, Message: "tokens re-encode differently"},
		event.Alarm{Step: 4, Kind: event.AlarmLogProbMismatch, Value: 0.4, Threshold: 0.1, Message: "still stale"},
	}})
	v = screen(t, m, 80, 24)
	if !strings.Contains(v, "×2") || !strings.Contains(v, "1 more") {
		t.Fatalf("repeat and second alarm not counted:\n%s", v)
	}
	press(m, "a")
	v = screen(t, m, 80, 24)
	if !strings.Contains(v, "!! ALARM token_drift") {
		t.Fatalf("after a, the next alarm should show:\n%s", v)
	}
	press(m, "a")
	v = screen(t, m, 80, 24)
	if strings.Contains(v, "!! ALARM") {
		t.Fatalf("all acknowledged, yet an alarm shows:\n%s", v)
	}
	// acknowledged alarms stay listed in Status
	press(m, "1", "G")
	if v = screen(t, m, 80, 24); !strings.Contains(v, "acknowledged") {
		t.Fatalf("Status does not list the acknowledged alarms:\n%s", v)
	}
	// a new alarm comes back at once
	m.Update(eventsMsg{events: []event.Event{event.Alarm{Step: 5, Kind: event.AlarmStaleWeights, Value: 2, Threshold: 1, Message: "weights two versions old"}}})
	if v = screen(t, m, 80, 24); !strings.Contains(v, "!! ALARM stale_weights") {
		t.Fatalf("a new alarm does not show:\n%s", v)
	}
	press(m, "A")
	if len(m.sh.data.unacked()) != 0 {
		t.Fatal("A did not acknowledge all")
	}
}

func TestReadOnlyView(t *testing.T) {
	evs := append(sampleRun(), event.RunEnd{Status: "finished", BestStep: 3})
	m := testModel(evs, nil, 120, 40)
	press(m, "7", "S", "p", "b")
	v := screen(t, m, 120, 40)
	for _, hidden := range []string{"(y/n)", "b/space", "e export", "pause", "★ manual"} {
		if strings.Contains(v, hidden) {
			t.Fatalf("read-only view shows %q:\n%s", hidden, v)
		}
	}
	if !strings.Contains(v, "read-only view: the best checkpoint is the one the run chose") {
		t.Fatalf("b in the read-only view says nothing:\n%s", v)
	}
	press(m, "e") // silent before: now it gives the command that exports the selected checkpoint
	if v = screen(t, m, 120, 40); !strings.Contains(v, "agentrl-tui export --store runs/agentrl.db --run r-20250101-abc --step 3 runs/export/r-20250101-abc-step3") {
		t.Fatalf("e in the read-only view does not name the export command:\n%s", v)
	}
	if !strings.Contains(v, "run finished") || !strings.Contains(v, "view (read-only)") {
		t.Fatalf("read-only view:\n%s", v)
	}
	press(m, "?")
	v = screen(t, m, 120, 40)
	if strings.Contains(v, "pause / resume") || strings.Contains(v, "mark as best") || !strings.Contains(v, "next pane") {
		t.Fatalf("help in view mode:\n%s", v)
	}
}

func TestHelpFromKeyTable(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 120, 40)
	press(m, "?")
	v := screen(t, m, 120, 40)
	k := m.sh.keys
	for _, b := range append(k.globals(), k.section(paneTrajs)...) {
		words := strings.Fields(b.Help().Desc)
		if b.Enabled() && !strings.Contains(v, strings.Join(words[:min(2, len(words))], " ")) {
			t.Fatalf("help lacks %q:\n%s", b.Help().Desc, v)
		}
	}
	press(m, "3") // keys other than esc, ? and q do not act under help
	if m.focus != paneStatus || !m.showHelp {
		t.Fatal("a key acted under help")
	}
	press(m, "esc")
	if m.showHelp {
		t.Fatal("esc did not close help")
	}
}

func TestTabCycle(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 80, 24)
	for i := 1; i <= int(numPanes); i++ {
		press(m, "tab")
		if want := paneID(i % int(numPanes)); m.focus != want {
			t.Fatalf("tab %d: focus %v, want %v", i, m.focus, want)
		}
	}
	press(m, "shift+tab")
	if m.focus != paneCkpts {
		t.Fatalf("shift+tab from Status: %v", m.focus)
	}
	for i, name := range []string{"Status", "GPU", "Trajectories", "Detail", "Hints", "Curves", "Checkpoints"} {
		press(m, fmt.Sprint(i+1))
		if m.focus.String() != name || !strings.Contains(screen(t, m, 80, 24), fmt.Sprintf("%d %s", i+1, name)) {
			t.Fatalf("%d: focus %v", i+1, m.focus)
		}
	}
	_, cmd := m.Update(keyMsg("q"))
	if !quits(m, cmd) {
		t.Fatal("q did not quit")
	}
}

func TestStreamEnd(t *testing.T) {
	ch := make(chan event.Event, 4)
	m := newModel(config{events: ch, ctrl: &fakeCtrl{}, memSample: func() uint64 { return 1 }})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	ch <- event.RunStart{RunID: "r1", Name: "n1", TotalSteps: 2}
	ch <- event.RunEnd{Status: "stopped", Reason: "stopped by the user"}
	close(ch)
	msg := waitEvents(ch)()
	em := msg.(eventsMsg)
	if len(em.events) != 2 || !em.closed {
		t.Fatalf("batch %d closed=%v", len(em.events), em.closed)
	}
	if _, cmd := m.Update(em); cmd != nil {
		run(m, cmd)
	}
	v := screen(t, m, 80, 24)
	if !strings.Contains(v, "run stopped: stopped by the user") {
		t.Fatalf("status line at the end:\n%s", v)
	}
	press(m, "S")
	if m.confirm != "" {
		t.Fatal("stop asked after the run ended")
	}
	// a stream that closes without an end event
	ch2 := make(chan event.Event)
	close(ch2)
	m2 := newModel(config{events: ch2, ctrl: &fakeCtrl{}, memSample: func() uint64 { return 1 }})
	m2.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m2.Update(waitEvents(ch2)())
	if !strings.Contains(screen(t, m2, 80, 24), "run ended (stream closed)") {
		t.Fatal("a closed stream is not shown")
	}
}

func TestCPUBackendShowsProcessMemory(t *testing.T) {
	evs := []event.Event{
		event.RunStart{RunID: "r", Name: "cpu", Backend: "go"},
		event.Ledger{Backend: "go", Components: map[string]int64{"weights": 10 << 20}, Budget: 64 << 20},
	}
	m := testModel(evs, nil, 80, 24)
	run(m, m.Init())
	press(m, "2")
	v := screen(t, m, 80, 24)
	if !strings.Contains(v, "CPU backend (go)") || !strings.Contains(v, "process resident memory 123.0 MiB") {
		t.Fatalf("CPU backend GPU pane:\n%s", v)
	}
	if procMemory() == 0 {
		t.Fatal("procMemory read nothing")
	}
}

func TestMouseWheelScrolls(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 80, 24)
	press(m, "1")
	m.Update(tea.MouseMsg{X: 10, Y: 10, Button: tea.MouseButtonWheelDown, Action: tea.MouseActionPress})
	if st := m.panes[paneStatus].(*statusPane); st.scroll.top != 3 {
		t.Fatalf("wheel scrolled to %d", st.scroll.top)
	}
	// a click on a tab focuses its pane
	x := tabSpans(80)[paneCurves][0] + 1
	m.Update(tea.MouseMsg{X: x, Y: 0, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress})
	if m.focus != paneCurves {
		t.Fatalf("click on the Curves tab focused %v", m.focus)
	}
}

func TestCurvesKeys(t *testing.T) {
	m := testModel(sampleRun(), &fakeCtrl{}, 120, 40)
	press(m, "6")
	v := screen(t, m, 120, 40)
	for _, want := range []string{"pass@1", "pass@4", "pass@8", "smoothing 0.6", "(raw 0.390)"} {
		if !strings.Contains(v, want) {
			t.Fatalf("curves lack %q:\n%s", want, v)
		}
	}
	press(m, "s", "s", "s") // back to no smoothing: the legend shows raw values only
	if v = screen(t, m, 120, 40); !strings.Contains(v, "smoothing 0.0") || strings.Contains(v, "(raw") {
		t.Fatalf("smoothing 0:\n%s", v)
	}
	press(m, "m")
	if v = screen(t, m, 120, 40); !strings.Contains(v, "6 Curves · reward_mean") {
		t.Fatalf("m did not switch to a metric:\n%s", v)
	}
	press(m, "o") // no store: says so
	if v = screen(t, m, 120, 40); !strings.Contains(v, "no store") {
		t.Fatalf("overlay without a store:\n%s", v)
	}
}

func TestRunesTogether(t *testing.T) {
	// a terminal read can hold several keys typed quickly (tmux send-keys "a" "7" "S"): each acts
	m := testModel(sampleRun(), &fakeCtrl{}, 80, 24)
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("a7S")})
	run(m, cmd)
	if len(m.sh.data.unacked()) != 0 || m.focus != paneCkpts || m.confirm != stopQuestion {
		t.Fatalf("a7S: unacked %d, focus %v, confirm %q", len(m.sh.data.unacked()), m.focus, m.confirm)
	}
	// while a filter is typed they are text
	press(m, "n", "3", "/")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("wrong")})
	run(m, cmd)
	if p := trajPaneOf(m); p.edit != "wrong" || m.focus != paneTrajs {
		t.Fatalf("typed %q, focus %v", p.edit, m.focus)
	}
}

// TestCurvesSFTLoss: an SFT run (RunStart kind sft) plots its training and held-out loss where a
// training run plots pass@k, and m still steps through its other metrics; its phase timeline has
// the phases it runs (train, eval), not the RL loop's.
func TestCurvesSFTLoss(t *testing.T) {
	evs := []event.Event{event.RunStart{RunID: "sft-s1", Name: "sft", Recipe: "sft --data d.jsonl", TotalSteps: 4, Kind: "sft"},
		event.StepMetrics{Step: 0, Metrics: map[event.Metric]float64{event.MetricLoss: 4.2, event.MetricEvalLoss: 4.4}}}
	for s, l := range []float64{3.9, 3.4, 2.5, 2.0} {
		m := map[event.Metric]float64{event.MetricLoss: l, event.MetricLR: 1e-3, event.MetricTokensPerSecond: 250, event.MetricETASeconds: float64(3 - s)}
		if s%2 == 1 {
			m[event.MetricEvalLoss] = l - 0.3
		}
		evs = append(evs, event.Phase{Step: s + 1, Phase: event.PhaseTrain, Seconds: 1.5}, event.StepMetrics{Step: s + 1, Metrics: m})
		if s%2 == 1 {
			evs = append(evs, event.Phase{Step: s + 1, Phase: event.PhaseEval, Seconds: 0.25})
		}
	}
	m := testModel(evs, nil, 120, 40)
	if v := screen(t, m, 120, 40); !strings.Contains(v, "train") || !strings.Contains(v, "eval") {
		t.Fatalf("an SFT run's phase timeline lacks train and eval:\n%s", v)
	}
	press(m, "6", "s", "s", "s") // no smoothing: the legend's values are the last raw ones
	v := screen(t, m, 120, 40)
	for _, want := range []string{"6 Curves · loss", "━ loss 2 at step 4", "eval_loss 1.700 at step 4"} {
		if !strings.Contains(v, want) {
			t.Fatalf("SFT curves lack %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "pass@k ·") || strings.Contains(v, "pass@1") {
		t.Fatalf("an SFT run's curves show pass@k:\n%s", v)
	}
	for _, p := range []string{"rollout", "reference", "advantage", "sync"} {
		if strings.Contains(v, p) {
			t.Fatalf("an SFT run's status shows the RL phase %q:\n%s", p, v)
		}
	}
	press(m, "m")
	if v = screen(t, m, 120, 40); strings.Contains(v, "6 Curves · loss ") {
		t.Fatalf("m did not leave the loss:\n%s", v)
	}
}

// TestSFTPhases: an SFT run's current phase is train until the step's training is reported, then
// the step's end (save) until its save phase; its held-out loss shows as the eval phase without an
// evaluation's pass@k; steps count as done by their save phase, which every SFT step reports.
func TestSFTPhases(t *testing.T) {
	d := newRunData()
	steps := []struct {
		ev        event.Event
		phase     string
		stepsDone int
	}{
		{event.RunStart{RunID: "sft-s1", Kind: "sft", TotalSteps: 3}, event.PhaseTrain, 0},
		{event.Phase{Step: 1, Phase: event.PhaseTrain, Seconds: 1}, event.PhaseSave, 0},
		{event.Phase{Step: 1, Phase: event.PhaseSave, Seconds: 0.1}, event.PhaseTrain, 1},
		{event.Phase{Step: 2, Phase: event.PhaseTrain, Seconds: 1}, event.PhaseSave, 1},
		{event.Progress{Step: 2, Phase: event.PhaseEval, Total: 4}, event.PhaseEval, 1},
		{event.Phase{Step: 2, Phase: event.PhaseEval, Seconds: 0.2}, event.PhaseSave, 1},
		{event.Phase{Step: 2, Phase: event.PhaseSave, Seconds: 0.1}, event.PhaseTrain, 2},
		{event.Phase{Step: 3, Phase: event.PhaseTrain, Seconds: 1}, event.PhaseSave, 2},
	}
	for i, s := range steps {
		d.apply(s.ev)
		if got := d.currentPhase(); got != s.phase || d.stepsDone() != s.stepsDone {
			t.Fatalf("after event %d (%s): phase %q, %d steps done; want %q, %d", i, s.ev.Type(), got, d.stepsDone(), s.phase, s.stepsDone)
		}
		if d.evalLive != nil {
			t.Fatalf("after event %d: an SFT run's held-out loss shows as a live evaluation", i)
		}
	}
	if got := d.phases(); !slices.Equal(got, []string{event.PhaseTrain, event.PhaseEval, event.PhaseSave}) {
		t.Fatalf("phases %v; want train, eval, save", got)
	}
}
