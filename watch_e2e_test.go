package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"agentrl/store"
)

// watchSettings shrink the default recipe so that a run takes seconds a step: the watchers below
// read it while it runs.
var watchSettings = []string{"AGENTRL_ROLLOUT_TASKS_PER_STEP=2", "AGENTRL_ROLLOUT_GROUP_SIZE=4",
	"AGENTRL_EVAL_HELDOUT_TASKS=4", "AGENTRL_EVAL_N_SAMPLES=2", "AGENTRL_EVAL_KS=1,2", "AGENTRL_EVAL_EVERY=1",
	"AGENTRL_EVAL_VALIDATION_TASKS=2", "AGENTRL_EVAL_VALIDATION_SAMPLES=2", "AGENTRL_CHECKPOINT_EVERY=1",
	"AGENTRL_EARLY_STOP_PATIENCE=0", "AGENTRL_EARLY_STOP_MAX_DROP=0"}

// TestWatchLiveRunEndToEnd runs a headless run and, while it writes its store, watches it from
// other processes: `runs` lists it running with its steps so far (reading the run's live
// snapshot, and saying so), `compare` reads its evaluations so far against a finished run of
// the same recipe, and `view` under tmux shows the workbench and follows the run to its end. The
// watched run's fingerprint equals the same run's without watchers.
func TestWatchLiveRunEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (.ci/run installs it, so CI always runs this test)")
	}
	bin, env := buildForSignals(t)
	env = append(env, watchSettings...)
	dir := t.TempDir()
	args := func(db string) []string {
		return []string{"run", "recipes/retool.yaml", "--ui", "json", "--store", db, "--seed", "1", "--max-steps", "6"}
	}
	cmdOut := func(args ...string) (string, string, error) {
		c := exec.Command(bin, args...)
		c.Env = env
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		return out.String(), errb.String(), err
	}

	base := filepath.Join(dir, "base.db")
	if _, errs, err := cmdOut(args(base)...); err != nil {
		t.Fatalf("the run without watchers: %v\n%s", err, errs)
	}
	live := filepath.Join(dir, "live.db")
	run := exec.Command(bin, args(live)...)
	run.Env = env
	var runErr strings.Builder
	run.Stderr = &runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()

	// runs: the run, running, with steps done, from its live snapshot.
	steps := regexp.MustCompile(`running\s+(\d+)/6`)
	var listed string
	for deadline := time.Now().Add(3 * time.Minute); ; {
		out, errs, err := cmdOut("runs", "--store", live)
		if m := steps.FindStringSubmatch(out); err == nil && m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= 1 {
				listed = out
				if !strings.Contains(errs, "reading its live snapshot") {
					t.Errorf("runs on a live store did not say it reads the live snapshot: %q", errs)
				}
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before runs saw a step of it live; runs printed:\n%s%s", err, out, errs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs never listed the run as running with a step done:\n%s%s", out, errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("runs, while the run writes:\n%s", listed)

	// compare: its evaluations so far against the finished run's.
	ids := func(db string) string {
		s, err := store.Open(db, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rs, err := s.Runs()
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %d runs, %v", db, len(rs), err)
		}
		return rs[0].ID
	}
	out, errs, err := cmdOut("compare", "--store", base, "--store", live, ids(base), ids(live))
	if err != nil || !strings.Contains(out, "pass@1") {
		t.Errorf("compare with the live run: %v\n%s%s", err, out, errs)
	}

	// view under tmux: the workbench of the live run, following it to its end.
	s := &tmuxSession{t: t, socket: fmt.Sprintf("agentrl-watch-%d", os.Getpid())}
	wd, _ := os.Getwd()
	s.tmux("new-session", "-d", "-s", "e2e", "-x", "120", "-y", "40", "-c", wd,
		fmt.Sprintf("%s view --store %s; echo EXIT=$?; sleep 600", bin, live))
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	s.waitFor("the workbench of the live run", time.Minute, "[1 Status]")
	if err := <-done; err != nil {
		t.Fatalf("the watched run: %v\n%s", err, runErr.String())
	}
	s.waitFor("the run's end in the view", time.Minute, "finished")
	s.keys("q")
	s.waitFor("the view's exit", 30*time.Second, "EXIT=0")
	if _, err := os.Stat(store.LivePath(live)); !os.IsNotExist(err) {
		t.Errorf("the live snapshot is still there after the run: %v", err)
	}

	fp := func(db string) string {
		out, errs, err := cmdOut("dev", "fingerprint", "--store", db)
		if err != nil {
			t.Fatalf("fingerprint %s: %v\n%s", db, err, errs)
		}
		return strings.Fields(out)[0]
	}
	if a, b := fp(base), fp(live); a != b {
		t.Errorf("the watched run's fingerprint %s differs from the same run's without watchers, %s", b, a)
	}
}

// TestViewFollowsLiveRunInTmux: `view` opened on a running run (under tmux) shows its steps as
// they come — a later step than the one it opened at, while the run is still running — and its
// end when the run stops on Ctrl-C; quitting the view then leaves the store as the run left it.
func TestViewFollowsLiveRunInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (.ci/run installs it, so CI always runs this test)")
	}
	bin, env := buildForSignals(t)
	env = append(env, watchSettings...)
	live := filepath.Join(t.TempDir(), "live.db")
	run := exec.Command(bin, "run", "recipes/retool.yaml", "--ui", "json", "--store", live, "--seed", "1", "--max-steps", "500")
	run.Env = env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	defer func() {
		_ = run.Process.Kill()
	}()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		c := exec.Command(bin, "runs", "--store", live)
		c.Env = env
		if out, err := c.Output(); err == nil && strings.Contains(string(out), "running") {
			break // the run's record is in its live snapshot
		}
		if time.Now().After(deadline) {
			t.Fatal("runs never listed the run as running")
		}
	}
	s := &tmuxSession{t: t, socket: fmt.Sprintf("agentrl-follow-%d", os.Getpid())}
	wd, _ := os.Getwd()
	s.tmux("new-session", "-d", "-s", "e2e", "-x", "120", "-y", "40", "-c", wd,
		fmt.Sprintf("%s view --store %s; echo EXIT=$?; sleep 600", bin, live))
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	stepRe := regexp.MustCompile(`step (\d+)/500`)
	step := func(scr string) int {
		if m := stepRe.FindStringSubmatch(scr); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		return -1
	}
	first := step(s.waitUntil("a step of the live run", 2*time.Minute, func(scr string) bool { return step(scr) >= 0 }))
	s.waitUntil(fmt.Sprintf("a step after %d", first), 2*time.Minute, func(scr string) bool { return step(scr) > first })
	select {
	case err := <-done:
		t.Fatalf("the 500-step run ended by itself (%v) while the view followed it", err)
	default:
	}
	if err := run.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the run stopped on Ctrl-C: %v", err)
	}
	s.waitFor("the run's end in the view", time.Minute, "run stopped")
	s.keys("q")
	s.waitFor("the view's exit", 30*time.Second, "EXIT=0")
	checkStored(t, live, "stopped", "interrupted (Ctrl-C)", nil)
}
