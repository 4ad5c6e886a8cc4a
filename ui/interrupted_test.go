package ui

import (
	"strings"
	"testing"

	"agentrl/engine/event"
	"agentrl/store"
)

// TestInterruptedRunOnScreen: a stored run whose process is gone (the view appends the end
// cli gives it: status interrupted, why, where it stood, the resume command) says so in the
// status strip, and the Checkpoints pane says where it stood and the command that continues it.
func TestInterruptedRunOnScreen(t *testing.T) {
	resume := "continue it with: " + store.ResumeLine("runs/agentrl.db", "r-20250101-abc")
	evs := append(sampleRun(), event.RunEnd{Status: store.StatusInterrupted, Reason: "its process (pid 4242) has exited",
		Detail: resume, Step: 3, Checkpoint: 3, BestStep: 3, Evaluations: 3})
	m := testModel(evs, nil, 160, 40)
	press(m, "7")
	v := screen(t, m, 160, 40)
	for _, want := range []string{"run interrupted: its process (pid 4242) has exited",
		"interrupted at step 3 (last checkpoint 3) (its process (pid 4242) has exited)", resume} {
		if !strings.Contains(v, want) {
			t.Errorf("the screen lacks %q:\n%s", want, v)
		}
	}
}
