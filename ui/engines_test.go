package ui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"agentrl/engine/event"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// enginesRun is the sample run on two rollout engines: after step 2's push both were up; in step
// 3's rollout the sglang one stalled and left the rotation, its requests moved to the serve one.
func enginesRun() []event.Event {
	return append(sampleRun(),
		event.Engines{Weights: 2, Phase: event.EnginesSync, Engines: []event.EngineState{
			{URL: "http://10.0.0.5:8001", Kind: "serve", Up: true, Done: 260, Tokens: 58000, TokensPerSec: 1180},
			{URL: "http://10.0.0.6:30000", Kind: "sglang", Up: true, Done: 252, Tokens: 56100, TokensPerSec: 1105}}},
		event.Engines{Weights: 2, Phase: event.EnginesGenerate, Engines: []event.EngineState{
			{URL: "http://10.0.0.5:8001", Kind: "serve", Up: true, InFlight: 3, Done: 412, Tokens: 91000, TokensPerSec: 1250.5},
			{URL: "http://10.0.0.6:30000", Kind: "sglang", Down: "no reply within 5m0s (stalled)", Done: 398, Tokens: 88000, TokensPerSec: 1100,
				Failovers: 2, Errors: 1}}})
}

// TestEnginesRows: each engine a row with its kind and URL, up or DOWN, requests in flight and
// done, tokens/s, failovers and errors under the headers of the width (long at 100 columns and
// more, short below); a down engine's reason under it; nothing without engines.
func TestEnginesRows(t *testing.T) {
	evs := enginesRun()
	e := evs[len(evs)-1].(event.Engines)
	th := NewTheme(lipgloss.NewRenderer(nil), false)
	if got := enginesTitle(&e); got != "Engines (rollout.engines: weights of step 2, 1 of 2 up)" {
		t.Errorf("title %q", got)
	}
	for _, w := range []int{118, 78} {
		rows := enginesRows(&e, th, w)
		if len(rows) != 4 {
			t.Fatalf("width %d: %d rows; want header, 2 engines and 1 reason:\n%s", w, len(rows), strings.Join(rows, "\n"))
		}
		for i, r := range rows {
			if width(r) > w {
				t.Errorf("width %d: row %d is %d wide: %q", w, i, width(r), r)
			}
		}
		head := []string{"engine", "state", "in flight", "done", "tok/s", "failovers", "errors"}
		if w < enginesWide {
			head = []string{"engine", "state", "infl", "done", "tok/s", "fail", "err"}
		}
		if got := strings.Fields(strings.ReplaceAll(rows[0], "in flight", "in_flight")); strings.Join(got, " ") != strings.ReplaceAll(strings.Join(head, " "), "in flight", "in_flight") {
			t.Errorf("width %d: header %q; want %v", w, rows[0], head)
		}
		for i, want := range [][]string{
			{"serve", "http://10.0.0.5:8001", "up", "3", "412", "1.3k", "0", "0"},
			{"sglang", "http://10.0.0.6:30000", "DOWN", "0", "398", "1.1k", "2", "1"},
		} {
			if got := strings.Fields(rows[1+i]); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("width %d: engine %d row %q; want the cells %v", w, i, rows[1+i], want)
			}
		}
		if !strings.Contains(rows[3], "down: no reply within 5m0s (stalled)") {
			t.Errorf("width %d: %q; want the down engine's reason", w, rows[3])
		}
	}
	// A narrow pane (the side GPU pane): each engine's name, then its counters wrapped.
	rows := enginesRows(&e, th, 34)
	want := []string{" up   serve http://10.0.0.5:8001", "      3 in flight · 412 done", " DOWN sglang http://10.0.0.6:30000", "      down: no reply within 5m0s"}
	for _, w := range want {
		found := false
		for _, r := range rows {
			found = found || strings.HasPrefix(r, w)
			if width(r) > 34 {
				t.Errorf("narrow row %q is %d wide; want ≤ 34", r, width(r))
			}
		}
		if !found {
			t.Errorf("narrow rows:\n%s\nwant one starting %q", strings.Join(rows, "\n"), w)
		}
	}
	if rows := enginesRows(nil, th, 80); rows != nil {
		t.Errorf("no engines: %q; want nothing", rows)
	}
	// A log shows the push's state only: the generating ones come every few seconds.
	if got := PlainLine(e); got != "" {
		t.Errorf("plain line of a generating engines event %q; want none", got)
	}
	sync := evs[len(evs)-2].(event.Engines)
	if got, want := PlainLine(sync), "step 2  engines after the push: serve http://10.0.0.5:8001 up, 0 in flight, 260 done, 1.2k tok/s, 0 failovers, 0 errors; sglang"; !strings.HasPrefix(got, want) {
		t.Errorf("plain line %q; want it to start %q", got, want)
	}
}

// TestEnginesViews: the Status pane (scrolled to its Engines block where the pane is short) and
// the GPU pane show each engine, at 120×40 and 80×24 under NO_COLOR (testdata/TestEnginesViews).
func TestEnginesViews(t *testing.T) {
	for _, tc := range []struct {
		name string
		w, h int
		keys []string
	}{
		{name: "status_120x40", w: 120, h: 40},
		{name: "status_80x24", w: 80, h: 24, keys: []string{"j", "j", "j", "j", "j", "j", "j", "j"}},
		{name: "gpu_120x40", w: 120, h: 40, keys: []string{"2"}},
		{name: "gpu_80x24", w: 80, h: 24, keys: []string{"2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config{initial: enginesRun(), ctrl: &fakeCtrl{}, noColor: true, memSample: func() uint64 { return 123 << 20 }}
			tm := teatest.NewTestModel(t, newModel(cfg), teatest.WithInitialTermSize(tc.w, tc.h))
			for _, k := range tc.keys {
				tm.Send(keyMsg(k))
			}
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("sglang http://10.0.0.6")) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
			tm.Send(tea.Quit())
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*model)
			view := final.View()
			for _, want := range []string{"Engines (rollout.engines: weights of step 2, 1 of 2 up)", "serve http://10.0.0.5:8001", "sglang http://10.0.0.6:30000", "DOWN", "down: no reply"} {
				if !strings.Contains(view, want) {
					t.Errorf("view lacks %q:\n%s", want, view)
				}
			}
			golden.RequireEqual(t, []byte(view))
		})
	}
}
