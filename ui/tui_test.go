package ui

import (
	"bytes"
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"agentrl/engine/event"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// recordingPath is the recorded run the teatest flows replay: sampleRun and its end, as JSON
// Lines (regenerated with go test ./ui -update).
const recordingPath = "testdata/run.jsonl"

func recordedRun() []event.Event {
	return append(sampleRun(),
		event.Stopping{Step: 4, Phase: event.PhaseRollout, Reason: ReasonStop, Message: "stopping now: step 4's rollout is dropped; saving step 3", Save: 3},
		event.RunEnd{Status: "stopped", Reason: ReasonStop, BestStep: 3, Detail: "step 4 was dropped during its rollout, before its update", Step: 3, Checkpoint: 3, Evaluations: 3})
}

func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// TestRecording keeps testdata/run.jsonl equal to the fixture it was written from.
func TestRecording(t *testing.T) {
	if updating() {
		f, err := os.Create(recordingPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := event.Recording(recordedRun()).WriteTo(f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := event.ReadRecording(recordingPath)
	if err != nil {
		t.Fatal(err)
	}
	want := recordedRun()
	if len(rec) != len(want) {
		t.Fatalf("recording has %d events, the fixture %d (go test ./ui -update rewrites it)", len(rec), len(want))
	}
	for i := range want {
		a, _ := event.Marshal(rec[i])
		b, _ := event.Marshal(want[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("event %d differs:\n%s\n%s", i, a, b)
		}
	}
}

// TestTUI drives the root model in a bubbletea program (teatest): the recorded run is replayed
// on the live stream, the keys of each case are pressed once the run has ended, and the final
// view is compared with its golden file (testdata/TestTUI/NAME.golden).
func TestTUI(t *testing.T) {
	rec, err := event.ReadRecording(recordingPath)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		w, h  int
		live  bool // replay on the stream with a controller; else a read-only view
		keys  []string
		until string // output to wait for after the keys
		check func(t *testing.T, m *model, c *fakeCtrl)
	}{
		{name: "status_120x40", w: 120, h: 40, live: true},
		{name: "status_80x24", w: 80, h: 24, live: true},
		{name: "filter_120x40", w: 120, h: 40, live: true, keys: []string{"3", "/", "w", "r", "o", "n", "g", "enter"}, until: "filter: wrong"},
		{name: "detail_80x24", w: 80, h: 24, live: true, keys: []string{"3", "g", "j", "j", "enter"}, until: "4 Detail"},
		{name: "tokens_120x40", w: 120, h: 40, live: true, keys: []string{"3", "g", "enter", "t"}, until: "advantage min"},
		{name: "hints_80x24", w: 80, h: 24, live: true, keys: []string{"5"}, until: "5 Hints"},
		{name: "curves_120x40", w: 120, h: 40, live: true, keys: []string{"6"}, until: "6 Curves"},
		{name: "gpu_80x24", w: 80, h: 24, live: true, keys: []string{"2"}, until: "2 GPU"},
		{name: "markbest_80x24", w: 80, h: 24, live: true, keys: []string{"7", "k", "b"}, until: "★ manual",
			check: func(t *testing.T, m *model, c *fakeCtrl) {
				if m.sh.data.bestOverride != 2 || len(c.calls) != 1 || c.calls[0] != "best 2" {
					t.Fatalf("mark best: override %d calls %v", m.sh.data.bestOverride, c.calls)
				}
			}},
		{name: "help_120x40", w: 120, h: 40, live: true, keys: []string{"3", "?"}, until: "Help"},
		{name: "view_120x40", w: 120, h: 40, keys: []string{"7"}, until: "7 Checkpoints"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctrl := &fakeCtrl{}
			cfg := config{runID: "r-20250101-abc", memSample: func() uint64 { return 123 << 20 }}
			var ch chan event.Event
			if tc.live {
				ch = make(chan event.Event)
				cfg.events, cfg.ctrl = ch, ctrl
			} else {
				cfg.initial = rec
			}
			tm := teatest.NewTestModel(t, newModel(cfg), teatest.WithInitialTermSize(tc.w, tc.h))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.live {
				go func() {
					rec.Replay(ctx, ch)
					close(ch)
				}()
				teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("run stopped")) },
					teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
			}
			for _, k := range tc.keys {
				tm.Send(keyMsg(k))
			}
			if tc.until != "" {
				teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(tc.until)) },
					teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
			}
			tm.Send(tea.Quit())
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*model)
			if tc.check != nil {
				tc.check(t, final, ctrl)
			}
			golden.RequireEqual(t, []byte(final.View()))
		})
	}
}
