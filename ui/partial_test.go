package ui

import (
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"

	"agentrl/engine/event"
)

// TestPartialShown: a paused trajectory reads as paused in the list, the filter and the
// detail; a resumed one names its segments and their policy versions; the Status pane's line
// gives the step's paused, resumed, stale-dropped counts and the batch's staleness.
func TestPartialShown(t *testing.T) {
	th := NewTheme(lipgloss.NewRenderer(io.Discard), false)
	paused := &event.Trajectory{Step: 2, TaskID: "t1", Paused: true}
	resumed := &event.Trajectory{Step: 3, TaskID: "t2", Correct: true, Segments: []event.Segment{{From: 0, Step: 2, Version: 1}, {From: 70, Step: 3, Version: 2}}}
	if got := summaryLine(th, paused); !strings.Contains(got, "paused unfinished") {
		t.Errorf("paused summary %q", got)
	}
	if got, want := summaryLine(th, resumed), "resumed, 2 segments (from token 0: step 2, policy v1; from token 70: step 3, policy v2)"; !strings.Contains(got, want) {
		t.Errorf("resumed summary %q; want it to contain %q", got, want)
	}
	cols := map[string]func(*event.Trajectory) string{}
	for _, c := range allTrajColumns {
		cols[c.title] = c.cell
	}
	if r, ok := cols["reward"](paused), cols["ok"](paused); r != "paused" || ok != "⏸" {
		t.Errorf("paused row: reward %q ok %q; want paused ⏸", r, ok)
	}
	if ok := cols["ok"](resumed); ok != "✓↻" {
		t.Errorf("resumed row ok %q; want ✓↻", ok)
	}
	for filter, want := range map[string][2]bool{"paused": {true, false}, "resumed": {false, true}} {
		f, err := parseFilter(filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]bool{f.match(paused), f.match(resumed)}; got != want {
			t.Errorf("filter %s: %v; want %v", filter, got, want)
		}
	}
	d := newRunData()
	d.apply(event.StepMetrics{Step: 3, Metrics: map[event.Metric]float64{"paused": 2, "resumed": 1, "stale_dropped": 3, "staleness_mean": 0.5}})
	if got, want := partialText(d), "partial: 2 paused · 1 resumed · 3 stale dropped · staleness 0.50"; got != want {
		t.Errorf("status line %q; want %q", got, want)
	}
}
