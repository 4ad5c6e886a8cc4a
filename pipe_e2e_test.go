package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"agentrl/store"
)

// tinyRL is the CPU recipe cut to seconds: 6 steps of one task × 2 samples of short turns, no
// evaluation, a checkpoint every 2 steps, all kept.
func tinyRL(db string, extra ...string) []string {
	return append([]string{"recipes/retool.yaml", "--store", db, "--run-name", "pipe", "--backend", "go", "--max-steps", "6",
		"--set", "eval.at_start=false", "--set", "eval.every=0", "--set", "eval.validation_tasks=0",
		"--set", "early_stop.patience=0", "--set", "early_stop.max_drop=0",
		"--set", "rollout.tasks_per_step=1", "--set", "rollout.group_size=2",
		"--set", "rollout.max_new_tokens=32", "--set", "rollout.max_total_tokens=256",
		"--set", "checkpoint.every=2", "--set", "checkpoint.keep_best=0", "--set", "checkpoint.keep_last=10"}, extra...)
}

// tinySFT is TestSFTKillResume's SFT: 8 steps on eight conversations, a checkpoint every 2.
func tinySFT(db, out string, extra ...string) []string {
	return append([]string{"sft", "--data", filepath.Join("testdata", "data", "sft-tiny.jsonl"), "--init", "testdata/builtin", "--out", out,
		"--store", db, "--steps", "8", "--batch", "2", "--lr", "2e-3", "--save-every", "2", "--eval-every", "1",
		"--heldout-share", "0.25", "--backend", "go"}, extra...)
}

// rlKeys and sftKeys are the metrics a resumed run must repeat exactly (the rest are timings and
// compile counts).
var (
	rlKeys  = []string{"loss", "reward_mean", "accuracy", "grad_norm", "entropy", "lr"}
	sftKeys = []string{"loss", "eval_loss", "lr"}
)

// TestPipesKillResumeEndToEnd runs the built binary on tiny runs and leaves them every way the
// issue names, checking each saves its step, exits as docs/stopping.md says and is listed as it
// ended, and that resume then stores the numbers of the uninterrupted run:
//
//   - its standard output's reader leaves (head -1: the test closes the pipe's read end after a
//     trained step), then Ctrl-C (exit 0) or SIGTERM (143); the same for an SFT and Ctrl-C;
//   - its standard output is a full pipe nobody reads: the run goes on to its last step (exit 0);
//   - SIGKILL: runs lists it "interrupted at step 3 (last checkpoint 2)" with the resume command.
func TestPipesKillResumeEndToEnd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pipe sizes and /proc the Linux way")
	}
	bin, env := buildForSignals(t)
	dir := t.TempDir()
	exitCode := func(err error) int {
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
	runBin := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), exitCode(err)
	}
	metricsOf := func(db string) (store.Run, map[int]map[string]float64, int) {
		t.Helper()
		st, run := storedRun(t, db)
		defer st.Close()
		m, err := st.Metrics(run.ID)
		if err != nil {
			t.Fatal(err)
		}
		ckpt := 0
		if c, err := st.LatestCheckpoint(run.ID); err == nil {
			ckpt = c.Step
		}
		return run, m, ckpt
	}
	lastStep := func(m map[int]map[string]float64) int {
		n := 0
		for s := range m {
			n = max(n, s)
		}
		return n
	}
	same := func(name string, want, got map[int]map[string]float64, keys []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %d steps of metrics, the uninterrupted run %d", name, len(got), len(want))
		}
		for step, w := range want {
			for _, k := range keys {
				if a, b := w[k], got[step][k]; a != b {
					t.Errorf("%s: step %d %s %v, uninterrupted %v", name, step, k, b, a)
				}
			}
		}
	}
	resume := func(name, db string, run store.Run, want map[int]map[string]float64, keys []string) {
		t.Helper()
		out, code := runBin("resume", "--store", db, run.ID, "--ui", "json")
		if code != 0 {
			t.Fatalf("%s: resume exited %d:\n%s", name, code, out)
		}
		r, got, _ := metricsOf(db)
		if r.Status != "finished" {
			t.Errorf("%s: resumed run stored %q", name, r.Status)
		}
		same(name+" + resume", want, got, keys)
	}

	// The uninterrupted runs.
	dbA := filepath.Join(dir, "a.db")
	if out, code := runBin(tinyRL(dbA, "--ui", "json")...); code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, out)
	}
	runA, metricsA, _ := metricsOf(dbA)
	if runA.Status != "finished" || len(metricsA) != 6 {
		t.Fatalf("uninterrupted run stored %q with %d steps of metrics", runA.Status, len(metricsA))
	}
	dbS := filepath.Join(dir, "s.db")
	if out, code := runBin(tinySFT(dbS, filepath.Join(dir, "s"), "--ui", "json")...); code != 0 {
		t.Fatalf("uninterrupted sft: exit %d\n%s", code, out)
	}
	_, metricsS, _ := metricsOf(dbS)

	// start runs the binary with standard output into a pipe the test holds the read end of, and
	// standard error read line by line.
	start := func(args ...string) (*exec.Cmd, *os.File, <-chan string, *syncLines) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Stdout = env, w
		errPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		t.Cleanup(func() { _ = cmd.Process.Kill(); r.Close() })
		lines, all := make(chan string, 1024), &syncLines{}
		go func() {
			sc := bufio.NewScanner(errPipe)
			for sc.Scan() {
				all.add(sc.Text())
				select {
				case lines <- sc.Text():
				default:
				}
			}
			close(lines)
		}()
		return cmd, r, lines, all
	}
	// waitFor reads lines up to one containing s, only against a hung run bounded in time.
	waitFor := func(lines <-chan string, s string, all *syncLines) {
		t.Helper()
		for deadline := time.After(5 * time.Minute); ; {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("standard error ended before %q:\n%s", s, all)
				}
				if strings.Contains(l, s) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q on standard error:\n%s", s, all)
			}
		}
	}
	// readerLeaves reads standard output up to a line with prefix, then closes it, as head does.
	readerLeaves := func(r *os.File, prefix string) {
		t.Helper()
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("standard output ended before %q: %v", prefix, err)
			}
			if strings.HasPrefix(line, prefix) {
				break
			}
		}
		r.Close()
	}

	for _, tc := range []struct {
		name   string
		sft    bool
		sig    syscall.Signal
		status int
		reason string
	}{
		{name: "reader leaves, then Ctrl-C", sig: syscall.SIGINT, status: 0, reason: "interrupted (Ctrl-C)"},
		{name: "reader leaves, then SIGTERM", sig: syscall.SIGTERM, status: 143, reason: "terminated (SIGTERM)"},
		{name: "sft: reader leaves, then Ctrl-C", sft: true, sig: syscall.SIGINT, status: 0, reason: "interrupted (Ctrl-C)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			args := tinyRL(db, "--ui", "plain")
			if tc.sft {
				args = tinySFT(db, filepath.Join(t.TempDir(), "out"), "--ui", "plain")
			}
			cmd, r, lines, all := start(args...)
			readerLeaves(r, "step 2  metrics") // a trained step
			waitFor(lines, "standard output is gone", all)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			code := exitCode(waitExit(t, cmd, sent, "the signal"))
			t.Logf("%s: exit %d, %v after the signal", tc.name, code, time.Since(sent).Round(time.Millisecond))
			if code != tc.status {
				t.Errorf("exit %d; want %d; standard error:\n%s", code, tc.status, all)
			}
			run, m, ckpt := metricsOf(db)
			last := lastStep(m)
			if run.Status != "stopped" || run.StopReason != tc.reason || last < 2 || ckpt != last {
				t.Errorf("stored %q (%q), steps to %d, latest checkpoint %d; want stopped, %q, the last trained step (≥ 2) saved; standard error:\n%s",
					run.Status, run.StopReason, last, ckpt, tc.reason, all)
			}
			if !tc.sft && !strings.Contains(all.String(), "agentrl-tui: run stopped: "+tc.reason) {
				t.Errorf("standard error does not say how the run ended:\n%s", all)
			}
			if out, _ := runBin("runs", "--store", db); !strings.Contains(out, "stopped ("+tc.reason+")") {
				t.Errorf("runs:\n%s", out)
			}
			t.Logf("%s: stopped at step %d, its checkpoint saved", tc.name, last)
			if tc.sft {
				resume(tc.name, db, run, metricsS, sftKeys)
			} else {
				resume(tc.name, db, run, metricsA, rlKeys)
			}
		})
	}

	t.Run("a full pipe nobody reads", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "runs.db")
		cmd, r, _, all := start(tinyRL(db, "--ui", "json")...)
		const fSetPipeSz = 1031
		if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), fSetPipeSz, 4096); errno != 0 {
			t.Fatalf("F_SETPIPE_SZ: %v", errno)
		}
		// Nobody reads: the pipe is full after a few events, and the run goes on to its end.
		code := exitCode(waitExit(t, cmd, time.Now().Add(5*time.Minute), "the last step"))
		exited := time.Now()
		if code != 0 {
			t.Errorf("exit %d; standard error:\n%s", code, all)
		}
		run, m, ckpt := metricsOf(db)
		t.Logf("a full pipe: the run recorded its end, then the process waited %v for the reader and exited", exited.Sub(run.Ended).Round(time.Millisecond))
		if run.Status != "finished" || len(m) != 6 || ckpt != 6 {
			t.Errorf("stored %q with %d steps, checkpoint %d; want finished, 6, 6", run.Status, len(m), ckpt)
		}
		same("a full pipe", metricsA, m, rlKeys)
		head, _ := io.ReadAll(io.LimitReader(r, 4096))
		var first map[string]any
		if line, _, _ := strings.Cut(string(head), "\n"); json.Unmarshal([]byte(line), &first) != nil || first["type"] != "run_start" {
			t.Errorf("the pipe's first line %q; want the run_start event", line)
		}
	})

	t.Run("SIGKILL", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "runs.db")
		cmd, lines, stderr := startJSON(t, bin, env, tinyRL(db, "--ui", "json")...)
		for e := range lines { // step 4 has begun: step 3 is stored, step 2 the latest checkpoint
			if e["step"] == 4.0 {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for range lines {
		}
		if code := exitCode(cmd.Wait()); code != -int(syscall.SIGKILL) {
			t.Fatalf("exit %d; want killed\n%s", code, stderr)
		}
		run, _, _ := metricsOf(db)
		if run.Status != "running" || run.Writer == nil || run.Writer.PID != cmd.Process.Pid {
			t.Fatalf("stored %q, writer %+v; want running, written by pid %d", run.Status, run.Writer, cmd.Process.Pid)
		}
		out, _ := runBin("runs", "--store", db)
		resumeLine := store.ResumeLine(db, run.ID)
		for _, want := range []string{"interrupted at step 3 (last checkpoint 2)", "3/6", "continue it with: " + resumeLine} {
			if !strings.Contains(out, want) {
				t.Errorf("runs lacks %q:\n%s", want, out)
			}
		}
		t.Logf("runs after SIGKILL:\n%s", out)
		js, _ := runBin("runs", "--store", db, "--json")
		var sums []store.RunSummary
		if err := json.Unmarshal([]byte(js), &sums); err != nil || len(sums) != 1 || sums[0].Status != "interrupted" ||
			sums[0].LastStep != 3 || sums[0].LastCheckpoint != 2 || sums[0].Resume != resumeLine {
			t.Errorf("runs --json: %v\n%s", err, js)
		}
		resume("SIGKILL", db, run, metricsA, rlKeys)
		if out, _ := runBin("runs", "--store", db); !strings.Contains(out, "finished") || strings.Contains(out, "interrupted") {
			t.Errorf("runs after resume:\n%s", out)
		}
	})
}

// TestStalledOutputStops: a run whose output is stalled (a full pipe nobody reads, as a paused
// pager leaves it) during its start evaluation takes the first Ctrl-C as ever: it stops at once,
// exit 0, its run stored as stopped by Ctrl-C with the evaluation dropped. (Before, the stalled
// output held the stop until a second Ctrl-C aborted the run.) The test fills the pipe and signals
// once the process has written nothing for 3 s while the pipe holds half its size or more.
func TestStalledOutputStops(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the pipe's fill and the process's writes the Linux way")
	}
	bin, env := buildForSignals(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const fSetPipeSz, fionread = 1031, 0x541B
	size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, r.Fd(), fSetPipeSz, 4096)
	if errno != 0 {
		t.Fatalf("F_SETPIPE_SZ: %v", errno)
	}
	cmd := exec.Command(bin, "recipes/retool.yaml", "--ui", "json", "--store", db, "--run-name", "sig")
	cmd.Env, cmd.Stdout = env, w
	var stderr syncLines
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill() //nolint:errcheck // a hung run: the test has failed already
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			stderr.add(sc.Text())
		}
	}()
	br := bufio.NewReaderSize(r, 1<<20)
	for { // start-up and the start evaluation's first progress
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the run ended before its evaluation (%v); stderr:\n%s", err, &stderr)
		}
		if strings.Contains(string(line), `"type":"progress","step":0,"phase":"eval"`) {
			break
		}
	}
	// Read no more: the pipe fills and the output stalls (not the run). Bounded only against a hang.
	var last string
	var since time.Time
	for end := time.Now().Add(5 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the output never stalled; stderr:\n%s", &stderr)
		}
		var n int32
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, r.Fd(), fionread, uintptr(unsafe.Pointer(&n)))
		io, _ := os.ReadFile(fmt.Sprintf("/proc/%d/io", cmd.Process.Pid))
		now := fmt.Sprint(n, " ", wchar(string(io)))
		if now != last {
			last, since = now, time.Now()
		}
		if errno == 0 && uintptr(n) >= size/2 && time.Since(since) > 3*time.Second {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	werr := waitExit(t, cmd, sent, "Ctrl-C")
	took := time.Since(sent)
	if werr != nil {
		t.Errorf("exit %v; want status 0; stderr:\n%s", werr, &stderr)
	}
	checkStored(t, db, "stopped", "interrupted (Ctrl-C)", nil)
	st, run := storedRun(t, db)
	defer st.Close()
	t.Logf("output stalled: the run recorded its stop %v after Ctrl-C, the process exited %v after it (the rest waiting for the reader)",
		run.Ended.Sub(sent).Round(time.Millisecond), took.Round(time.Millisecond))
	if !strings.Contains(run.StopDetail, "the evaluation of step 0 was dropped") {
		t.Errorf("stop detail %q; want the evaluation of step 0 dropped", run.StopDetail)
	}
}

// wchar is the bytes written so far, from /proc/PID/io.
func wchar(io string) string {
	for _, line := range strings.Split(io, "\n") {
		if v, ok := strings.CutPrefix(line, "wchar:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// syncLines collects lines another goroutine reads.
type syncLines struct {
	mu    sync.Mutex
	lines []string
}

func (s *syncLines) add(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, l)
}

func (s *syncLines) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}
