package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"agentrl/store"
)

// TestSFTKillResume: an SFT run of the built binary (sft --data, the built-in model, 8 steps,
// a checkpoint every 2) killed with SIGKILL after step 5's metrics were stored (its latest
// checkpoint is step 4), then resumed with `resume`, stores the same loss, held-out loss and
// learning rate at every step as an uninterrupted run, and writes the same model; one stopped by
// SIGTERM after step 3 exits 143, is stored as stopped with step 3 saved, and resumes to the same
// numbers. `runs` lists the runs as sft runs.
func TestSFTKillResume(t *testing.T) {
	bin, env := buildForSignals(t)
	data := filepath.Join("testdata", "data", "sft-tiny.jsonl") // eight conversations of about 90 tokens
	dir := t.TempDir()
	args := func(db, out string) []string {
		return []string{"sft", "--data", data, "--init", "testdata/builtin", "--out", out, "--store", db, "--steps", "8", "--batch", "2",
			"--lr", "2e-3", "--save-every", "2", "--eval-every", "1", "--heldout-share", "0.25", "--ui", "json", "--backend", "go"}
	}
	start := func(args ...string) (*exec.Cmd, <-chan map[string]any, *bytes.Buffer) {
		return startJSON(t, bin, env, args...)
	}
	exit := func(cmd *exec.Cmd) int {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return -int(ws.Signal())
			}
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	runID := func(lines <-chan map[string]any) string {
		for e := range lines {
			if e["type"] == "run_start" {
				return e["run_id"].(string)
			}
		}
		t.Fatal("no run_start")
		return ""
	}
	// until reads events up to metrics of step n.
	until := func(lines <-chan map[string]any, n float64) {
		for e := range lines {
			if e["type"] == "metrics" && e["step"] == n {
				return
			}
		}
		t.Fatalf("the run ended before step %v", n)
	}
	drain := func(lines <-chan map[string]any) {
		for range lines {
		}
	}
	stored := func(db, id string) (store.Run, map[int]map[string]float64, []int) {
		st, err := store.Open(db, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		run, err := st.GetRun(id)
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.Metrics(id)
		if err != nil {
			t.Fatal(err)
		}
		cps, _ := st.Checkpoints(id)
		var steps []int
		for _, c := range cps {
			steps = append(steps, c.Step)
		}
		return run, m, steps
	}

	// The uninterrupted run.
	dbA, outA := filepath.Join(dir, "a.db"), filepath.Join(dir, "a")
	cmd, lines, stderr := start(args(dbA, outA)...)
	idA := runID(lines)
	drain(lines)
	if code := exit(cmd); code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, stderr)
	}
	runA, metricsA, _ := stored(dbA, idA)
	if runA.Status != "finished" || runA.Kind != store.KindSFT || len(metricsA) != 9 {
		t.Fatalf("uninterrupted run stored %+v with %d steps of metrics", runA, len(metricsA))
	}

	same := func(name, db, id, out string) {
		t.Helper()
		run, metrics, _ := stored(db, id)
		if run.Status != "finished" || len(metrics) != 9 {
			t.Errorf("%s: stored status %q, %d steps of metrics", name, run.Status, len(metrics))
		}
		for step := 0; step <= 8; step++ {
			for _, k := range []string{"loss", "eval_loss", "lr"} {
				a, okA := metricsA[step][k]
				b, okB := metrics[step][k]
				if okA != okB || a != b {
					t.Errorf("%s: step %d %s %v (%v), uninterrupted %v (%v)", name, step, k, b, okB, a, okA)
				}
			}
		}
		wa, _ := os.ReadFile(filepath.Join(outA, "model.safetensors"))
		wb, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
		if err != nil || !bytes.Equal(wa, wb) {
			t.Errorf("%s: the model written differs from the uninterrupted run's (%v)", name, err)
		}
		t.Logf("%s: step 8 loss %.6f eval_loss %.6f, as uninterrupted", name, metrics[8]["loss"], metrics[8]["eval_loss"])
	}

	// SIGKILL after step 5's metrics: the checkpoint of step 4 is the latest.
	dbB, outB := filepath.Join(dir, "b.db"), filepath.Join(dir, "b")
	cmd, lines, stderr = start(args(dbB, outB)...)
	idB := runID(lines)
	until(lines, 5)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	drain(lines)
	if code := exit(cmd); code != -int(syscall.SIGKILL) {
		t.Fatalf("killed run: exit %d\n%s", code, stderr)
	}
	run, _, cps := stored(dbB, idB)
	if run.Status != "running" || len(cps) == 0 || cps[len(cps)-1] < 4 || cps[len(cps)-1] >= 8 {
		t.Fatalf("killed run: stored status %q, checkpoints %v", run.Status, cps)
	}
	t.Logf("killed after step 5's metrics; checkpoints %v", cps)
	cmd, lines, stderr = start("resume", "--store", dbB, idB, "--ui", "json")
	drain(lines)
	if code := exit(cmd); code != 0 {
		t.Fatalf("resume after SIGKILL: exit %d\n%s", code, stderr)
	}
	same("SIGKILL + resume", dbB, idB, outB)

	// SIGTERM after step 3's metrics: a clean stop, step 3 saved.
	dbC, outC := filepath.Join(dir, "c.db"), filepath.Join(dir, "c")
	cmd, lines, stderr = start(args(dbC, outC)...)
	idC := runID(lines)
	until(lines, 3)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var end map[string]any
	for e := range lines {
		if e["type"] == "run_end" {
			end = e
		}
	}
	if code := exit(cmd); code != 143 {
		t.Fatalf("SIGTERM: exit %d; want 143\n%s", code, stderr)
	}
	run, _, cps = stored(dbC, idC)
	if run.Status != "stopped" || run.StopReason != "terminated (SIGTERM)" || len(cps) == 0 || end == nil || end["checkpoint"] != float64(cps[len(cps)-1]) || end["step"] != float64(cps[len(cps)-1]) {
		t.Fatalf("SIGTERM: stored %q (%q), checkpoints %v, run end %v", run.Status, run.StopReason, cps, end)
	}
	t.Logf("SIGTERM: stopped at step %v with checkpoints %v", end["step"], cps)
	cmd, lines, stderr = start("resume", "--store", dbC, idC, "--ui", "json")
	drain(lines)
	if code := exit(cmd); code != 0 {
		t.Fatalf("resume after SIGTERM: exit %d\n%s", code, stderr)
	}
	same("SIGTERM + resume", dbC, idC, outC)

	out, err := exec.Command(bin, "runs", "--store", dbC).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("sft finished")) || !bytes.Contains(out, []byte("8/8")) {
		t.Errorf("runs: %v\n%s", err, out)
	}
}
