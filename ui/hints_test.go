package ui

import (
	"testing"

	"agentrl/engine/event"
)

// TestProbeText: a step's row in the Hints pane names the probe it has — the lift of a correct
// sample before teacher − student — and the demonstrations' lift beside it.
func TestProbeText(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    map[event.Metric]float64
		want string
	}{
		{"nothing", map[event.Metric]float64{"loss": 1}, ""},
		{"teacher − student only", map[event.Metric]float64{"hint_gain": -0.25}, "  teacher−student -0.250"},
		{"lift wins over gain", map[event.Metric]float64{"hint_gain": -0.25, "hint_lift": 0.0123}, "  lift +0.012"},
		{"lift and demonstrations", map[event.Metric]float64{"hint_gain": -0.25, "hint_lift": -0.02, "hint_lift_demo": 0.31}, "  lift -0.020  demo +0.310"},
		{"demonstrations only", map[event.Metric]float64{"hint_lift_demo": -0.004}, "  demo -0.004"},
		{"gated hints", map[event.Metric]float64{"hint_lift_demo": 0.09, "hints_gated": 9, "hints_gate_measured": 16}, "  demo +0.090  gated 9 of 16"},
	} {
		if got := probeText(tc.m); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
