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

// TestSandboxShown: the Status pane names the sandbox's isolation, as an alarm when the recipe
// turned it off, and the plain run line says so too; the Starlark executor (no sandbox line) shows none.
func TestSandboxShown(t *testing.T) {
	for _, tc := range []struct {
		sandbox, pane, plain string
	}{
		{"strict: own user, mount, PID, network, IPC and UTS namespaces", "Sandbox   strict isolation", ""},
		{"NONE (env.sandbox.isolation: none): the code can read every file this user can", "Sandbox   isolation NONE: model code can read your files", "SANDBOX ISOLATION NONE"},
		{"", "", ""},
	} {
		start := event.RunStart{RunID: "r", Name: "cpu", Recipe: "retool.yaml", TotalSteps: 2, Backend: "go", Sandbox: tc.sandbox}
		if got := PlainLine(start); (tc.plain == "") == strings.Contains(got, "SANDBOX") || !strings.Contains(got, tc.plain) {
			t.Errorf("sandbox %q: plain line %q; want %q in it", tc.sandbox, got, tc.plain)
		}
		m := testModel([]event.Event{start}, nil, 120, 40)
		run(m, m.Init())
		press(m, "1")
		v := screen(t, m, 120, 40)
		if tc.pane == "" {
			if strings.Contains(v, "Sandbox") {
				t.Errorf("no sandbox, yet the Status pane shows one:\n%s", v)
			}
		} else if !strings.Contains(v, tc.pane) {
			t.Errorf("sandbox %q: the Status pane lacks %q:\n%s", tc.sandbox, tc.pane, v)
		}
	}
}

// TestAttentionShown: the attention path a run takes, and why, is in the plain run line and in
// the Status pane; a run start without one (a stored run replayed) shows none.
func TestAttentionShown(t *testing.T) {
	for _, tc := range []struct {
		attention, pane, plain string
	}{
		{"chunked, blocks of 256 queries (auto: the go backend has no fused attention op)", "Attention chunked, blocks of 256 queries", "; attention chunked, blocks of 256 queries (auto: the go backend"},
		{"chunked, blocks of 256 queries (auto: the fused attention program failed to compile for a 16384-token sequence, so chunked: cuDNN rejected it)",
			"Attention chunked, blocks of 256 queries", "failed to compile"},
		{"", "", ""},
	} {
		start := event.RunStart{RunID: "r", Name: "gpu", Recipe: "retool.yaml", TotalSteps: 2, Backend: "cuda", Attention: tc.attention}
		if got := PlainLine(start); (tc.plain == "") == strings.Contains(got, "attention") || !strings.Contains(got, tc.plain) {
			t.Errorf("attention %q: plain line %q; want %q in it", tc.attention, got, tc.plain)
		}
		m := testModel([]event.Event{start}, nil, 120, 40)
		run(m, m.Init())
		press(m, "1")
		v := screen(t, m, 120, 40)
		if tc.pane == "" {
			if strings.Contains(v, "Attention") {
				t.Errorf("no attention line, yet the Status pane shows one:\n%s", v)
			}
		} else if !strings.Contains(v, tc.pane) {
			t.Errorf("attention %q: the Status pane lacks %q:\n%s", tc.attention, tc.pane, v)
		}
	}
}
