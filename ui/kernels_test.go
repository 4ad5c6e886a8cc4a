package ui

import (
	"strings"
	"testing"

	"agentrl/engine/event"
)

// TestKernelsShown: the CPU kernel choice and its reason are in the plain run line and in the
// Status pane, wrapped to the pane's width.
func TestKernelsShown(t *testing.T) {
	start := event.RunStart{RunID: "r", Name: "cpu", Recipe: "retool.yaml", TotalSteps: 2, Backend: "go",
		Kernels: "portable kernels, measured fastest on this CPU (decode step / train micro-step in ms: avx512 60.0/900, avx2 57.0/880, portable 19.0/350)"}
	if got, want := PlainLine(start), "run r (cpu): recipe retool.yaml, 2 steps, backend go; portable kernels, measured fastest"; !strings.HasPrefix(got, want) {
		t.Errorf("plain line %q; want it to start with %q", got, want)
	}
	m := testModel([]event.Event{start}, nil, 80, 24)
	run(m, m.Init())
	press(m, "1")
	v := screen(t, m, 80, 24)
	for _, want := range []string{"Kernels   portable kernels, measured fastest", "portable 19.0/350)"} {
		if !strings.Contains(v, want) {
			t.Errorf("the Status pane lacks %q:\n%s", want, v)
		}
	}
	start.Kernels = ""
	if got := PlainLine(start); strings.Contains(got, ";") {
		t.Errorf("plain line without kernels: %q", got)
	}
}
