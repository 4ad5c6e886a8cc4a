package ui

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"agentrl/engine/event"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
)

// The long texts of hybridRun: as the real binary words them.
const (
	hybridKernels = "avx512 kernels, measured fastest on this CPU (decode step / train micro-step in ms: avx512 2.4/68, avx2 2.1/80, portable 7.5/588); " +
		"measured 2026-11-28, cached in /root/.cache/agentrl-tui/kernels.json"
	hybridAttention = "chunked, blocks of 256 queries (dense for sequences up to 256 tokens) (auto: the go backend has no fused attention op " +
		"(only XLA's CUDA backend has cuDNN flash attention))"
	hybridAlarm = "hints do not help the teacher (hint_lift, the hint's effect on the reference's log-prob of a correct sample): " +
		"the OPD term is noise and the run is GRPO at extra cost; hinter.gate: lift keeps only the hints that raise it"
)

// hybridRun is a finished three-step Hybrid run with the long texts a real one shows: a run id
// with its seed and time, the CPU kernel choice and the attention path with their reasons, the
// hint_useless alarm with its whole message, components of the memory ledger kept in host memory
// ("(host)"), and checkpoints as the live engine announces them (without an id). gpu makes it a
// GPU run with host offload: eight ledger components and NVML's reading.
func hybridRun(gpu bool) []event.Event {
	const runID = "retool-hybrid-s1-20261128-190747"
	start := event.RunStart{RunID: runID, Name: "retool-hybrid", Recipe: "recipes/retool.yaml", TotalSteps: 3, Backend: "go",
		Kernels: hybridKernels, Attention: hybridAttention,
		Compiles: map[string]event.Compiled{"decode": {Programs: 4, Seconds: 0.01}, "prefill": {Programs: 8, Seconds: 0.01}, "sync": {Programs: 1, Seconds: 0}}}
	const mib = 1 << 20
	ledger := event.Ledger{Backend: "go", Components: map[string]int64{"KV cache": 16 * mib, "AdamW moments (host)": 49 * mib / 10,
		"inference weights": 24 * mib / 10, "master weights": 24 * mib / 10, "reference weights (host)": 24 * mib / 10}}
	if gpu {
		start.Backend, start.Kernels, start.Model = "xla:cuda", "", "Qwen/Qwen3-4B"
		start.Attention = "chunked, blocks of 256 queries (auto: the fused attention program failed to compile for a 16384-token sequence, so chunked: cuDNN rejected it)"
		const gib = 1 << 30
		ledger = event.Ledger{Backend: "xla:cuda", Components: map[string]int64{
			"KV cache": 20 * gib, "inference weights": 8 * gib, "master weights": 8 * gib, "master weights (host)": 8 * gib,
			"AdamW moments": 10 * gib, "AdamW moments (host)": 16 * gib, "reference weights": 4 * gib, "reference weights (host)": 4 * gib},
			Budget: 120 * gib, DeviceUsed: 66 * gib, DeviceTotal: 141 * gib, UtilPct: 83}
	}
	evs := []event.Event{start, ledger,
		event.Eval{Step: 0, PassAtK: map[int]float64{1: 0.436, 2: 0.560, 4: 0.661, 8: 0.751}}}
	secs := map[string]float64{"rollout": 2.39, "score": 0.001, "reference": 1.02, "advantage": 0.002, "train": 1.98, "sync": 0.01, "save": 0.04}
	for step := 1; step <= 3; step++ {
		for _, ph := range []string{event.PhaseRollout, event.PhaseScore, event.PhaseReference, event.PhaseAdvantage, event.PhaseTrain, event.PhaseSync} {
			evs = append(evs, event.Phase{Step: step, Phase: ph, Seconds: secs[ph]})
			if ph == event.PhaseRollout {
				evs = append(evs, generation(step, event.PhaseRollout))
			}
		}
		evs = append(evs, event.StepMetrics{Step: step, Metrics: map[event.Metric]float64{
			"reward_mean": 0.6 + 0.01*float64(step), "accuracy": 0.45, "hinted_share": 0.547, "loss": -0.107, "grad_norm": 0.924,
			"tokens_per_s": 1012, event.MetricHintLift: -0.287, event.MetricHintLiftDemo: 0.096}})
		for i := 0; i < 8; i++ {
			evs = append(evs, trajectory(step, i))
		}
		if step == 3 {
			evs = append(evs, event.Alarm{Step: 3, Kind: event.AlarmHintUseless, Value: -0.287, Threshold: 0, Below: true,
				Message: hybridAlarm},
				generation(step, event.PhaseEval),
				event.Eval{Step: 3, PassAtK: map[int]float64{1: 0.431, 2: 0.552, 4: 0.650, 8: 0.744}},
				event.Phase{Step: 3, Phase: event.PhaseEval, Seconds: 66})
		}
		if step >= 2 {
			evs = append(evs, event.Checkpoint{Step: step, Bytes: 73 * mib / 10})
		}
		evs = append(evs, event.Phase{Step: step, Phase: event.PhaseSave, Seconds: secs["save"]})
	}
	return append(evs, event.RunEnd{Status: "finished", Reason: "all 3 steps done", BestStep: 0, Step: 3, Checkpoint: 3, Evaluations: 2})
}

// fitModel builds the workbench on evs at w×h with colours off (NO_COLOR), as the real binary
// does: the run id comes from the run's start; clip records what goes to the clipboard.
func fitModel(evs []event.Event, ctrl Controller, w, h int, clip *[]string) *model {
	c := config{initial: evs, ctrl: ctrl, noColor: true, memSample: func() uint64 { return 123 << 20 }}
	if clip != nil {
		c.clipboard = func(s string) { *clip = append(*clip, s) }
	}
	m := newModel(c)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

// liveHybrid is hybridRun in the middle of step 3's evaluation: no end yet, the time left known.
func liveHybrid() []event.Event {
	evs := hybridRun(false)
	evs = evs[:len(evs)-1]
	return append(evs, event.Progress{Step: 3, Phase: event.PhaseEval, Done: 867, Total: 2048, ETA: 27, RunETA: 31.4, RunETAAtLeast: true})
}

// TestStripWhole: the status strip's run line keeps the state, the run and the step whole, and
// the alarm line the alarm's kind and step (and as much of its message as fits), at 80×24 and
// 160×45 under NO_COLOR, finished or running, with the strip's two or three rows or its one.
func TestStripWhole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		evs   []event.Event
		w, h  int
		run   []string // on the run line
		alarm []string // on the alarm line
	}{
		{"finished 80x24", hybridRun(false), 80, 24, []string{"run finished", "retool-hybrid", "step 3/3"}, []string{"ALARM hint_useless at step 3", "hints do not help the teacher", "a ack"}},
		{"finished 160x45", hybridRun(false), 160, 45, []string{"run finished: all 3 steps done", "retool-hybrid", "step 3/3", "1.0k tok/s", "recipe retool.yaml"},
			[]string{"ALARM hint_useless at step 3", "hints do not help the teacher (-0.287 ≤ 0)", "a acknowledges"}},
		{"running 80x24", liveHybrid(), 80, 24, []string{"stored run", "retool-hybrid", "step 3/3", "ETA"}, []string{"ALARM hint_useless at step 3"}},
		{"one strip row 80x15", hybridRun(false), 80, 15, nil, []string{"run finished", "ALARM hint_useless at step 3"}},
		{"narrow 50x24", hybridRun(false), 50, 24, []string{"run finished", "retool-hybrid", "step 3/3"}, []string{"hint_useless", "step 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fitModel(tc.evs, &fakeCtrl{}, tc.w, tc.h, nil)
			lines := strings.Split(screen(t, m, tc.w, tc.h), "\n")
			l := m.layout
			strip := lines[l.Strip.Y : l.Strip.Y+l.Strip.H]
			for i, row := range strip {
				if strings.Contains(row, "…") {
					t.Errorf("strip row %d is cut: %q", i, row)
				}
			}
			for _, want := range tc.run {
				if !strings.Contains(strip[0], want) {
					t.Errorf("run line %q; want %q in it", strip[0], want)
				}
			}
			for _, want := range tc.alarm {
				if !strings.Contains(strip[len(strip)-1], want) {
					t.Errorf("alarm line %q; want %q in it", strip[len(strip)-1], want)
				}
			}
		})
	}
}

// TestStatusPhasesVisible: on a Status pane too short for the run's setup and its Phases block
// (80×24, where the kernels' and attention's reasons take six rows), the Phases block comes
// first and whole, the setup under it, still whole for whoever scrolls; a tall pane keeps the
// setup on top.
func TestStatusPhasesVisible(t *testing.T) {
	phases := []string{"  rollout ", "  score ", "  reference ", "  advantage ", "  train ", "  sync ", "  eval ", "  save ", "step 3 took"}
	for _, tc := range []struct {
		w, h       int
		setupAbove bool
	}{{80, 24, false}, {160, 45, true}} {
		t.Run(fmt.Sprintf("%dx%d", tc.w, tc.h), func(t *testing.T) {
			m := fitModel(hybridRun(false), &fakeCtrl{}, tc.w, tc.h, nil)
			v := screen(t, m, tc.w, tc.h)
			for _, want := range append([]string{"Run       retool-hybrid  (run retool-hybrid-s1-20261128-190747)", "Step      3 of 3", "Phases (time each took last)"}, phases...) {
				if !strings.Contains(v, want) {
					t.Errorf("the Status pane lacks %q:\n%s", want, v)
				}
			}
			if got := strings.Contains(v, "Kernels   avx512 kernels"); got != tc.setupAbove {
				t.Errorf("kernels on the first screen: %v; want %v:\n%s", got, tc.setupAbove, v)
			}
			// the whole pane, scrolled through: the setup whole, nothing cut
			p := m.panes[paneStatus].(*statusPane)
			p.build()
			all := strings.Join(p.lines, "\n")
			words := strings.Join(strings.Fields(all), " ") // wrapped lines read as one
			for _, want := range []string{"Recipe recipes/retool.yaml", "Kernels " + hybridKernels, "Attention " + hybridAttention, "hint_useless -0.287 ≤ 0: " + hybridAlarm} {
				if !strings.Contains(words, want) {
					t.Errorf("the Status pane lacks %q:\n%s", want, all)
				}
			}
			if strings.Contains(all, "…") {
				t.Errorf("the Status pane cuts a line:\n%s", all)
			}
		})
	}
}

// firstRows returns the first row inside every pane frame on screen v (colours off: a rune is a
// cell), by the frame's title: the text between the frame's sides under its top edge.
func firstRows(t *testing.T, v string) map[string]string {
	t.Helper()
	var lines [][]rune
	for _, l := range strings.Split(v, "\n") {
		r := []rune(l)
		if len(r) != width(l) {
			t.Fatalf("a wide rune or an escape sequence in %q", l)
		}
		lines = append(lines, r)
	}
	out := map[string]string{}
	for i, l := range lines[:len(lines)-1] {
		for c := 0; c < len(l); c++ {
			if l[c] != '╭' {
				continue
			}
			end := c + 1
			for end < len(l) && l[end] != '╮' {
				end++
			}
			if end == len(l) {
				break
			}
			title := strings.Trim(string(l[c+1:end]), "─ ")
			out[title] = string(lines[i+1][c+1 : end])
			c = end
		}
	}
	return out
}

// TestFirstLinesWhole: the first line of every pane, focused or in the side column, is whole
// at 80×24 and 160×45 under NO_COLOR.
func TestFirstLinesWhole(t *testing.T) {
	for _, gpu := range []bool{false, true} {
		for _, sz := range [][2]int{{80, 24}, {160, 45}} {
			w, h := sz[0], sz[1]
			t.Run(fmt.Sprintf("gpu=%v %dx%d", gpu, w, h), func(t *testing.T) {
				m := fitModel(hybridRun(gpu), &fakeCtrl{}, w, h, nil)
				for p := paneStatus; p < numPanes; p++ {
					press(m, fmt.Sprint(int(p)+1))
					if p == paneDetail {
						press(m, "3", "enter")
					}
					v := screen(t, m, w, h)
					rows := firstRows(t, v)
					if len(rows) == 0 {
						t.Fatalf("no pane frame found:\n%s", v)
					}
					for title, row := range rows {
						if strings.Contains(row, "…") || strings.TrimSpace(row) == "" {
							t.Errorf("%v focused: the first line of %q is %q:\n%s", p, title, row, v)
						}
					}
				}
			})
		}
	}
}

// legendRow is a row of the memory ledger's legend: glyph, name, size, share.
var legendRow = regexp.MustCompile(`^ (\S) (.*?) +([0-9.]+ [KMG]iB)(?: +([0-9]+)%)? *$`)

// TestLedgerLegend: the GPU pane's legend names every component of the ledger, its sizes in one
// column however long the names ("reference weights (host)"), each component drawn with its own
// glyph (with colours on too: none differs from another by colour alone), the glyph the stacked
// bar draws it with; at 80×24 and 160×45, on the CPU backend and on a GPU with host offload
// (eight components).
func TestLedgerLegend(t *testing.T) {
	colour := lipgloss.NewRenderer(io.Discard)
	colour.SetColorProfile(termenv.TrueColor)
	for _, tc := range []struct {
		gpu   bool
		w, h  int
		color bool
		comps int
	}{
		{false, 80, 24, false, 5}, {false, 160, 45, false, 5}, {true, 80, 24, false, 8}, {true, 160, 45, false, 8}, {true, 160, 45, true, 8},
	} {
		t.Run(fmt.Sprintf("gpu=%v %dx%d colour=%v", tc.gpu, tc.w, tc.h, tc.color), func(t *testing.T) {
			m := fitModel(hybridRun(tc.gpu), &fakeCtrl{}, tc.w, tc.h, nil)
			if tc.color {
				m = newModel(config{initial: hybridRun(tc.gpu), ctrl: &fakeCtrl{}, renderer: colour, memSample: func() uint64 { return 1 }})
				m.Update(tea.WindowSizeMsg{Width: tc.w, Height: tc.h})
			}
			press(m, "2")
			v := screen(t, m, tc.w, tc.h)
			p := m.panes[paneGPU].(*gpuPane)
			p.build()
			var bar string
			glyphs := map[string]string{}
			sizeEnd := -1
			for _, l := range p.lines {
				l = ansi.Strip(l)
				if strings.HasPrefix(l, "▕") && bar == "" {
					bar = l
				}
				g := legendRow.FindStringSubmatch(l)
				if g == nil {
					continue
				}
				if other, ok := glyphs[g[1]]; ok {
					t.Errorf("%q and %q are both drawn with %q:\n%s", other, g[2], g[1], v)
				}
				glyphs[g[1]] = g[2]
				if !strings.Contains(bar, g[1]) {
					t.Errorf("the bar %q does not draw %q with %q", bar, g[2], g[1])
				}
				end := width(l[:strings.Index(l, g[3])+len(g[3])])
				if sizeEnd >= 0 && end != sizeEnd {
					t.Errorf("the size of %q ends at cell %d, the one above at %d:\n%s", g[2], end, sizeEnd, strings.Join(p.lines, "\n"))
				}
				sizeEnd = end
				if g[4] == "" && tc.w >= 80 {
					t.Errorf("%q has no share at %d columns: %q", g[2], tc.w, l)
				}
			}
			if len(glyphs) != tc.comps {
				t.Errorf("the legend lists %d components, want %d:\n%s", len(glyphs), tc.comps, strings.Join(p.lines, "\n"))
			}
		})
	}
}

// TestCheckpointIDs: the Checkpoints pane shows checkpoint ids whole or not at all (the live
// engine announces its checkpoints without one: the id is the run's and the step), the selected
// one's whole under the table, and c puts that id and the command that exports the checkpoint in
// the footer, the command broken into lines a shell reads as one, and on the clipboard; in a
// read-only view e gives the same command.
func TestCheckpointIDs(t *testing.T) {
	const id = "retool-hybrid-s1-20261128-190747"
	want := "agentrl-tui export --store runs/agentrl.db --run " + id + " --step 3 runs/export/" + id + "-step3"
	for _, tc := range []struct {
		w, h    int
		ctrl    Controller
		key     string
		inTable bool // the ids fit in the table
	}{
		{80, 24, &fakeCtrl{}, "c", false}, {160, 45, &fakeCtrl{}, "c", true}, {80, 24, nil, "e", false}, {60, 24, &fakeCtrl{}, "c", false},
	} {
		t.Run(fmt.Sprintf("%dx%d %s", tc.w, tc.h, tc.key), func(t *testing.T) {
			var clip []string
			m := fitModel(hybridRun(false), tc.ctrl, tc.w, tc.h, &clip)
			press(m, "7")
			v := screen(t, m, tc.w, tc.h)
			rows := ckptRows(v)
			if len(rows) != 2 {
				t.Fatalf("%d checkpoint rows, want 2:\n%s", len(rows), v)
			}
			for i, r := range rows {
				if strings.Contains(r, "…") || strings.Contains(r, id) != tc.inTable {
					t.Errorf("row %q: the id shown whole: %v; want %v", r, strings.Contains(r, id), tc.inTable)
				}
				if tc.inTable && !strings.Contains(r, fmt.Sprintf("%s/%d", id, i+2)) {
					t.Errorf("row %q lacks its id", r)
				}
			}
			if !strings.Contains(v, "› step 3: "+id+"/3") && !strings.Contains(v, "› "+id+"/3") {
				t.Errorf("the selected checkpoint's id is not whole under the table:\n%s", v)
			}
			press(m, tc.key)
			v = screen(t, m, tc.w, tc.h)
			lines := strings.Split(v, "\n")
			var cmd []string
			for _, l := range lines {
				if s := strings.TrimSpace(l); strings.HasPrefix(s, "agentrl-tui export") || len(cmd) > 0 {
					cmd = append(cmd, strings.TrimSuffix(s, "\\"))
					if !strings.HasSuffix(s, "\\") {
						break
					}
				}
			}
			if got := strings.Join(strings.Fields(strings.Join(cmd, " ")), " "); got != want {
				t.Errorf("the footer's command is %q; want %q:\n%s", got, want, v)
			}
			if !strings.Contains(v, "checkpoint "+id+"/3") {
				t.Errorf("the footer lacks the whole id:\n%s", v)
			}
			if len(clip) != 1 || clip[0] != want {
				t.Errorf("the clipboard got %q; want %q", clip, want)
			}
			for _, l := range lines {
				if strings.Contains(l, "…") {
					t.Errorf("a line is cut: %q", l)
				}
			}
			press(m, "j") // the next key takes the note away
			if v = screen(t, m, tc.w, tc.h); strings.Contains(v, "agentrl-tui export") {
				t.Errorf("the note stays after a key:\n%s", v)
			}
		})
	}
}

// TestFooterKeys: where the focused pane's keys do not all fit the footer, its actions come
// before its movement keys, each whole (the rest are in ?), and no key is listed twice (S is
// both a Checkpoints key and a global one).
func TestFooterKeys(t *testing.T) {
	for _, tc := range []struct {
		w, h  int
		pane  string
		want  []string
		never []string
	}{
		{80, 24, "7", []string{"b/space mark as best", "e export", "c id and export command"}, []string{"↑/k up"}},
		{160, 45, "7", []string{"b/space mark as best", "e export", "c id and export command", "S stop the run", "p pause / resume the run"}, nil},
		{80, 24, "3", []string{"enter open the trajectory", "/ filter"}, nil},
		{80, 24, "4", []string{"t turns / token heat map"}, nil},
	} {
		t.Run(fmt.Sprintf("%dx%d pane %s", tc.w, tc.h, tc.pane), func(t *testing.T) {
			m := fitModel(hybridRun(false), &fakeCtrl{}, tc.w, tc.h, nil)
			press(m, tc.pane)
			if tc.pane == "4" {
				press(m, "3", "enter")
			}
			lines := strings.Split(screen(t, m, tc.w, tc.h), "\n")
			foot := lines[len(lines)-1]
			if strings.Contains(foot, "…") {
				t.Errorf("the footer cuts a key: %q", foot)
			}
			for _, want := range tc.want {
				if strings.Count(foot, want) != 1 {
					t.Errorf("the footer %q lists %q %d times; want once", foot, want, strings.Count(foot, want))
				}
			}
			for _, never := range tc.never {
				if strings.Contains(foot, never) {
					t.Errorf("the footer %q lists %q before the pane's actions", foot, never)
				}
			}
		})
	}
}

// TestFitViews keeps golden views (testdata/TestFitViews/NAME.golden) of the Hybrid run at 80×24
// and 160×45 under NO_COLOR, driven as a user would (teatest): the keys of each case pressed, the
// final view compared.
func TestFitViews(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gpu   bool
		w, h  int
		keys  []string
		until string
	}{
		{name: "status_80x24", w: 80, h: 24, until: "Phases"},
		{name: "status_160x45", w: 160, h: 45, until: "Phases"},
		{name: "gpu_80x24", gpu: true, w: 80, h: 24, keys: []string{"2"}, until: "2 GPU · xla:cuda"},
		{name: "gpu_160x45", gpu: true, w: 160, h: 45, keys: []string{"2"}, until: "2 GPU · xla:cuda"},
		{name: "ckpts_80x24", w: 80, h: 24, keys: []string{"7", "c"}, until: "runs/export/"},
		{name: "ckpts_160x45", w: 160, h: 45, keys: []string{"7"}, until: "7 Checkpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config{initial: hybridRun(tc.gpu), ctrl: &fakeCtrl{}, noColor: true, memSample: func() uint64 { return 123 << 20 }}
			tm := teatest.NewTestModel(t, newModel(cfg), teatest.WithInitialTermSize(tc.w, tc.h))
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

// TestCurveMarks: each pass@k curve of the Curves pane has its own mark in the legend, with
// colours on or off (none differs from another by colour alone).
func TestCurveMarks(t *testing.T) {
	colour := lipgloss.NewRenderer(io.Discard)
	colour.SetColorProfile(termenv.TrueColor)
	for _, color := range []bool{false, true} {
		t.Run(fmt.Sprintf("colour=%v", color), func(t *testing.T) {
			cfg := config{initial: hybridRun(false), ctrl: &fakeCtrl{}, noColor: !color, memSample: func() uint64 { return 1 }}
			if color {
				cfg.renderer = colour
			}
			m := newModel(cfg)
			m.Update(tea.WindowSizeMsg{Width: 160, Height: 45})
			press(m, "6")
			marks := map[string]string{}
			for _, l := range strings.Split(ansi.Strip(screen(t, m, 160, 45)), "\n") {
				_, text, _ := strings.Cut(l, "│")
				mark, label, ok := strings.Cut(text, " pass@")
				if !ok || width(mark) != 1 {
					continue
				}
				k, _, _ := strings.Cut(label, " ")
				if other, ok := marks[mark]; ok && other != k {
					t.Errorf("pass@%s and pass@%s are both marked %q", other, k, mark)
				}
				marks[mark] = k
			}
			if len(marks) != 4 {
				t.Errorf("%d pass@k curves in the legend, want 4: %v", len(marks), marks)
			}
		})
	}
}
