package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"agentrl/store"
)

// diskFullArgs is a tiny run of the CPU recipe on the built-in model: 4 steps of 1 task × 2
// samples, no evaluation, a checkpoint every step (about 7.7 MB each: weights and AdamW
// moments), all kept.
func diskFullArgs(db string) []string {
	return []string{"recipes/retool.yaml", "--ui", "json", "--store", db, "--run-name", "disk", "--backend", "go",
		"--set", "run.max_steps=4", "--set", "eval.at_start=false", "--set", "eval.every=0",
		"--set", "early_stop.patience=0", "--set", "early_stop.max_drop=0",
		"--set", "checkpoint.every=1", "--set", "checkpoint.keep_best=0", "--set", "checkpoint.keep_last=10",
		"--set", "rollout.tasks_per_step=1", "--set", "rollout.group_size=2",
		"--set", "rollout.max_new_tokens=16", "--set", "rollout.max_total_tokens=128"}
}

// diskRun is what one run of the binary showed: its run id, the checkpoints announced, the
// warnings (error events), its end and its exit status and standard error.
type diskRun struct {
	id          string
	checkpoints []int
	warnings    []string
	end         map[string]any
	status      int
	stderr      string
}

// runToEnd runs the binary with args and env to its end (a generous bound, against a hung run).
func runToEnd(t *testing.T, bin string, env []string, args ...string) diskRun {
	t.Helper()
	cmd, lines, stderr := startJSON(t, bin, env, args...)
	var r diskRun
	for wait := time.After(5 * time.Minute); ; {
		var e map[string]any
		var ok bool
		select {
		case e, ok = <-lines:
		case <-wait:
			t.Fatalf("the run did not end in 5 minutes; stderr:\n%s", stderr.String())
		}
		if !ok {
			break
		}
		switch e["type"] {
		case "run_start":
			r.id, _ = e["run_id"].(string)
		case "checkpoint":
			r.checkpoints = append(r.checkpoints, int(e["step"].(float64)))
		case "error":
			r.warnings = append(r.warnings, fmt.Sprint(e["message"]))
		case "run_end":
			r.end = e
		}
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.stderr = stderr.String()
	return r
}

// checkDiskFailure checks a run the disk stopped: exit 1, a run end "failed" whose reason is one
// line naming the store's path, the bytes needed and the bytes free and the last good checkpoint,
// the same line on standard error; the store opens, records the run as failed for that reason,
// and its latest checkpoint, the one before the failed step, loads. It returns the failed step.
func checkDiskFailure(t *testing.T, r diskRun, db string) int {
	t.Helper()
	if r.status != 1 || r.end == nil || r.end["status"] != "failed" {
		t.Fatalf("exit %d, run end %v; want 1 and failed; stderr:\n%s", r.status, r.end, r.stderr)
	}
	reason, _ := r.end["reason"].(string)
	t.Logf("checkpoints %v, then: %s", r.checkpoints, reason)
	last := 0
	if n, ok := r.end["checkpoint"].(float64); ok {
		last = int(n)
	}
	if last == 0 || len(r.checkpoints) > 0 && r.checkpoints[len(r.checkpoints)-1] != last {
		t.Fatalf("the run end names checkpoint %v, the run saved %v: want the last saved, and one before the disk filled", r.end["checkpoint"], r.checkpoints)
	}
	failed := last + 1
	for _, w := range []string{db, "needs ", " bytes)", " free", fmt.Sprintf("the checkpoint of step %d", failed),
		fmt.Sprintf("the checkpoint of step %d is intact", last), "agentrl-tui resume --store " + db + " " + r.id} {
		if !strings.Contains(reason, w) {
			t.Errorf("the run's end %q lacks %q", reason, w)
		}
	}
	if strings.Contains(reason, "\n") {
		t.Errorf("the run's end spans lines: %q", reason)
	}
	if !strings.Contains(r.stderr, "agentrl-tui: "+reason+"\n") {
		t.Errorf("standard error does not carry the line; it says:\n%s", r.stderr)
	}
	checkStored(t, db, "failed", reason, r.end)
	return failed
}

// resumeAfterRoom resumes the run once there is room and checks that it finishes its 4 steps,
// saving from the failed step on, with every checkpoint loading.
func resumeAfterRoom(t *testing.T, bin string, env []string, db, id string, failed int) {
	t.Helper()
	r := runToEnd(t, bin, env, "resume", "--store", db, "--ui", "json", id)
	if r.status != 0 || r.end == nil || r.end["status"] != "finished" {
		t.Fatalf("resumed: exit %d, run end %v; want 0 and finished; stderr:\n%s", r.status, r.end, r.stderr)
	}
	if len(r.checkpoints) == 0 || r.checkpoints[0] != failed || r.checkpoints[len(r.checkpoints)-1] != 4 {
		t.Errorf("the resumed run saved %v; want steps %d … 4", r.checkpoints, failed)
	}
	st, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.Checkpoints(id)
	if err != nil || len(all) != 4 {
		t.Fatalf("the store holds %d checkpoints after the resume (%v); want 4", len(all), err)
	}
	for _, m := range all {
		if err := st.Verify(id, m.Step); err != nil {
			t.Errorf("checkpoint %d: %v", m.Step, err)
		}
	}
	t.Logf("resumed with room: saved %v, finished", r.checkpoints)
}

// TestDiskFullEndToEnd runs the built binary with its store on a 20 MiB tmpfs (mounted here as
// root; skipped, saying so, where mounting is refused: TestDiskFullInjectedEndToEnd covers the
// path anywhere). The first 7.7 MB checkpoint fits, with less than the margin to spare, so the
// run warns before it; the second, which makes bbolt rewrite the first's chunks (engine's
// rewriteBytes), does not: the run refuses it before writing any of it (without the check, bbolt's
// write fails with ENOSPC halfway) and stops with one line naming the path, the bytes needed and
// free. The store opens, records the run as failed, the checkpoint before loads; `resume` is
// refused the same way while there is no room, and continues the run to its end once the tmpfs is
// remounted larger (space freed).
func TestDiskFullEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root; TestDiskFullInjectedEndToEnd covers the path with an injected ENOSPC")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=20m"); err != nil {
		t.Skipf("mount -t tmpfs -o size=20m tmpfs %s was refused (%v); TestDiskFullInjectedEndToEnd covers the path with an injected ENOSPC", dir, err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH) //nolint:errcheck // the test's own mount
	bin, env := buildForSignals(t)
	db := filepath.Join(dir, "runs.db")
	r := runToEnd(t, bin, env, diskFullArgs(db)...)
	failed := checkDiskFailure(t, r, db)
	if reason := fmt.Sprint(r.end["reason"]); !strings.HasPrefix(reason, "no room for the checkpoint of step") || !strings.Contains(reason, "nothing was written") {
		t.Errorf("the disk filled under the write rather than the check refusing it first (the estimate fell short): %s", reason)
	}
	low := 0
	for _, w := range r.warnings {
		if strings.Contains(w, "disk space low") && strings.Contains(w, db) {
			low++
		}
	}
	if low == 0 {
		t.Errorf("no low-disk warning before the disk filled; warnings: %q", r.warnings)
	}
	// Without room, resume is refused again at the same checkpoint, nothing written.
	again := runToEnd(t, bin, env, "resume", "--store", db, "--ui", "json", r.id)
	if again.id = r.id; checkDiskFailure(t, again, db) != failed {
		t.Errorf("resumed without room, the run failed at another step: %v", again.end)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=128m"); err != nil {
		t.Fatalf("remounting the tmpfs larger: %v", err)
	}
	resumeAfterRoom(t, bin, env, db, r.id, failed)
}

// TestDiskFullInjectedEndToEnd is the same on any machine: the store's fault hook
// (AGENTRL_STORE_FAULT=enospc@10485760) fails the write of the second checkpoint with ENOSPC once
// 10 MiB of chunks are written (the space check passed: the disk filled under the write). The
// run stops with one line naming the path, the bytes needed and free; the store opens with the
// first checkpoint; `resume` without the fault (space freed) continues to the end.
func TestDiskFullInjectedEndToEnd(t *testing.T) {
	bin, env := buildForSignals(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	r := runToEnd(t, bin, append(env, store.FaultEnv+"=enospc@10485760"), diskFullArgs(db)...)
	failed := checkDiskFailure(t, r, db)
	if reason := fmt.Sprint(r.end["reason"]); failed != 2 || !strings.Contains(reason, "no space left on device (injected by "+store.FaultEnv+")") ||
		!strings.Contains(reason, "its partial chunks were dropped") {
		t.Errorf("want the second checkpoint to fail under the injected ENOSPC; got step %d: %s", failed, reason)
	}
	resumeAfterRoom(t, bin, env, db, r.id, failed)
}
