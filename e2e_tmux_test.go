package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agentrl/engine/device"
	"agentrl/store"
)

// tmuxSession drives the real binary in a detached tmux server of its own (a private socket, so a
// user's tmux is never touched).
type tmuxSession struct {
	t      *testing.T
	socket string
}

func (s *tmuxSession) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (s *tmuxSession) screen() string { return s.tmux("capture-pane", "-p", "-t", "e2e") }

// keys sends key names as tmux spells them (e.g. "j", "Enter", "Escape", "S").
func (s *tmuxSession) keys(keys ...string) {
	s.tmux(append([]string{"send-keys", "-t", "e2e"}, keys...)...)
}

// waitFor polls the screen until every want is on it; the deadline only bounds a hung run.
func (s *tmuxSession) waitFor(what string, deadline time.Duration, want ...string) string {
	s.t.Helper()
	return s.waitUntil(what+fmt.Sprintf(" (%q)", want), deadline, func(scr string) bool {
		for _, w := range want {
			if !strings.Contains(scr, w) {
				return false
			}
		}
		return true
	})
}

// waitUntil polls the screen until ok holds.
func (s *tmuxSession) waitUntil(what string, deadline time.Duration, ok func(screen string) bool) string {
	s.t.Helper()
	end := time.Now().Add(deadline)
	for {
		scr := s.screen()
		if ok(scr) {
			return scr
		}
		if time.Now().After(end) {
			s.t.Fatalf("%s never appeared; the screen:\n%s", what, scr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startInTmux builds the binary and starts it on the built-in recipe in a tmux session of its own
// at 120×40, with the recipe fields set in the environment, the store in db; the shell then
// prints EXIT=status.
func startInTmux(t *testing.T, name, db string, env ...string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (.ci/run installs it, so CI always runs this test)")
	}
	bin := testBinary(t)
	// The binary runs this process's matrix kernels (as make test chose them), named in the
	// environment so that it does not stop to measure them before the workbench appears.
	env = append(append(device.ActiveKernels(os.Getenv).Env(), "GOMLX_BACKEND="+device.GoConfig), env...)
	cmd := fmt.Sprintf("env %s %s recipes/retool.yaml --max-steps 40 --store %s --run-name %s; echo EXIT=$?; sleep 600",
		strings.Join(env, " "), bin, db, name)
	s := &tmuxSession{t: t, socket: fmt.Sprintf("agentrl-%s-%d", name, os.Getpid())}
	wd, _ := os.Getwd()
	s.tmux("new-session", "-d", "-s", "e2e", "-x", "120", "-y", "40", "-c", wd, cmd)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	return s
}

// TestTUIEndToEndInTmux runs the built binary on the built-in recipe in tmux at 120×40 and presses
// the keys a user would: waits for the first trajectory, moves down, opens the detail and returns,
// switches to curves and checkpoints, marks a checkpoint best, stops the run (S, confirming with
// y) and quits; then checks the exit status, the last lines printed and that the store holds the
// run as stopped by the user with the marked best step and a loadable latest checkpoint.
func TestTUIEndToEndInTmux(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	s := startInTmux(t, "e2e", db, "AGENTRL_ROLLOUT_TASKS_PER_STEP=2", "AGENTRL_ROLLOUT_GROUP_SIZE=4",
		"AGENTRL_EVAL_HELDOUT_TASKS=4", "AGENTRL_EVAL_N_SAMPLES=2", "AGENTRL_EVAL_KS=1,2", "AGENTRL_EVAL_EVERY=1", "AGENTRL_EVAL_VALIDATION_TASKS=2", "AGENTRL_EVAL_VALIDATION_SAMPLES=2",
		"AGENTRL_CHECKPOINT_EVERY=1", "AGENTRL_EARLY_STOP_PATIENCE=0", "AGENTRL_EARLY_STOP_MAX_DROP=0")

	s.waitFor("the workbench", time.Minute, "[1 Status]")
	s.keys("3")
	s.waitFor("first trajectory", 3*time.Minute, "[3 Trajectories]", "reward", "tokens", "train-0000")
	s.keys("e", "f", "g", "j") // training trajectories only, stop following the newest, go to the top, move down one
	s.keys("Enter")
	scr := s.waitFor("detail", 10*time.Second, "[4 Detail]", "Prompt", "Turn 1", "Reward", "total")
	if !strings.Contains(scr, "train-0000 #1") {
		t.Errorf("the detail is not of the second trajectory (train-0000 #1):\n%s", scr)
	}
	s.keys("Escape")
	s.waitFor("back to the list", 10*time.Second, "[3 Trajectories]")
	s.keys("6")
	s.waitFor("curves", 10*time.Second, "[6 Curves]", "pass@1")
	s.keys("7")
	s.waitFor("checkpoints pane", 10*time.Second, "[7 Checkpoints]")
	s.waitUntil("a checkpoint", 3*time.Minute, func(scr string) bool { return !strings.Contains(scr, "no checkpoint saved yet") })
	s.keys("g", "b")
	var marked int
	s.waitUntil("a row marked ★ manual", 10*time.Second, func(scr string) bool {
		marked = markedStep(scr)
		return marked > 0
	})
	s.keys("S")
	s.waitFor("stop confirmation", 10*time.Second, "Stop the run now?")
	s.keys("y")
	s.waitFor("stopping", 10*time.Second, "stopping")
	s.waitFor("run stopped", 3*time.Minute, "run stopped")
	s.keys("q")
	// The closing line is longer than the pane is wide: read it with tmux's wrapped lines joined.
	s.waitUntil("exit (EXIT=0 after the run's closing line)", 30*time.Second, func(string) bool {
		j := s.tmux("capture-pane", "-p", "-J", "-t", "e2e")
		return strings.Contains(j, "EXIT=0") && strings.Contains(j, "run stopped: stopped by the user; ") && strings.Contains(j, "; last checkpoint: step ")
	})

	st, r := storedRun(t, db)
	defer st.Close()
	if r.Status != "stopped" || r.StopReason != "stopped by the user" || r.BestStep != marked {
		t.Errorf("stored run: status %q, reason %q, best step %d; want stopped, stopped by the user, %d", r.Status, r.StopReason, r.BestStep, marked)
	}
	if m, err := st.LatestCheckpoint(r.ID); err != nil {
		t.Error("the stopped run kept no checkpoint")
	} else if _, err := st.LoadCheckpoint(r.ID, m.Step); err != nil {
		t.Error(err)
	}
}

// TestTUIQuitDuringEvaluationInTmux starts the built-in recipe as `make run` does (its start
// evaluation: 128 tasks × 16 samples) and, while that evaluation runs, sees its trajectories in the
// Trajectories pane (marked eval) and the ETA in the header; then presses q: the workbench closes,
// the terminal says at once that the evaluation is dropped and then how the run ended, the
// process exits 0, and the store holds the run as stopped on quitting, with no checkpoint.
func TestTUIQuitDuringEvaluationInTmux(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	s := startInTmux(t, "quit", db)
	s.waitFor("the workbench", time.Minute, "[1 Status]")
	s.keys("3")
	scr := s.waitFor("an evaluation trajectory and the ETA", 3*time.Minute, "[3 Trajectories]", " eval  heldout-", "▶eval", "ETA eval ")
	if !strings.Contains(strings.Split(scr, "\n")[1], "ETA eval ") {
		t.Errorf("the ETA is not in the header:\n%s", scr)
	}
	s.keys("q")
	s.waitFor("exit", 30*time.Second, "stopping now: the evaluation of step 0 is dropped (",
		"run stopped: quit from the workbench; the evaluation of step 0 was dropped", "EXIT=0")
	st, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs()
	if err != nil || len(runs) != 1 || runs[0].Status != "stopped" || runs[0].StopReason != "quit from the workbench" || runs[0].Ended.IsZero() {
		t.Fatalf("stored runs %+v (%v); want one, stopped on quitting, with its end time", runs, err)
	}
	if _, err := st.LatestCheckpoint(runs[0].ID); err == nil {
		t.Error("a checkpoint was stored, though no step was trained")
	}
}

// markedStep reads the step of the checkpoints row showing "★ manual" (0: none; the legend below
// the table names the mark too, but has no size column).
func markedStep(screen string) int {
	for _, line := range strings.Split(screen, "\n") {
		if strings.Contains(line, "★ manual") && strings.Contains(line, "iB") {
			for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == '│' || r == ' ' || r == '›' }) {
				var n int
				if _, err := fmt.Sscanf(f, "%d", &n); err == nil {
					return n
				}
			}
		}
	}
	return 0
}
