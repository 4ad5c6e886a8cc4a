package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/store"
)

// stopBound is the claim: a signalled run exits within this long on the CPU recipe, wherever it is.
const stopBound = 10 * time.Second

// TestSignalsEndToEnd runs the built binary on the CPU recipe (recipes/retool.yaml on the built-in
// model, --ui json) and signals it where the run is slowest to leave: during the start evaluation
// (2,048 trajectories) and during a training step's update. It waits for the phase on the JSON
// stream, then checks the exit status, the stop announced and the run's end on the stream, the
// run's stored status, reason and end time, and that the store opens and its latest checkpoint
// loads; and that the process exits within stopBound of the signal (measured and logged).
func TestSignalsEndToEnd(t *testing.T) {
	bin, env := buildForSignals(t)
	inEval := func(e map[string]any) bool {
		return e["type"] == "progress" && e["phase"] == "eval" && e["step"] == 0.0
	}
	inUpdate := func(e map[string]any) bool {
		return e["type"] == "phase" && e["phase"] == "advantage" && e["step"] == 2.0
	}
	for _, tc := range []struct {
		name     string
		args     []string
		at       func(map[string]any) bool // the event after which the signals go
		signals  []syscall.Signal
		status   int
		reason   string
		announce []string // one of these is in the stop announced
		stored   string   // the run's stored status
	}{
		{name: "SIGTERM during the start evaluation", at: inEval, signals: []syscall.Signal{syscall.SIGTERM}, status: 143,
			reason: "terminated (SIGTERM)", announce: []string{"stopping now: the evaluation of step 0 is dropped"}, stored: "stopped"},
		{name: "SIGTERM during training", args: []string{"--set", "eval.at_start=false"}, at: inUpdate, signals: []syscall.Signal{syscall.SIGTERM},
			status: 143, reason: "terminated (SIGTERM)", stored: "stopped",
			announce: []string{"the update of step 2 is discarded", "finishing the update of step 2", "step 2 is dropped before its update"}},
		{name: "SIGHUP during the start evaluation", at: inEval, signals: []syscall.Signal{syscall.SIGHUP}, status: 129,
			reason: "hung up (SIGHUP)", announce: []string{"stopping now: the evaluation of step 0 is dropped"}, stored: "stopped"},
		{name: "Ctrl-C during the start evaluation", at: inEval, signals: []syscall.Signal{syscall.SIGINT}, status: 0,
			reason: "interrupted (Ctrl-C)", announce: []string{"stopping now: the evaluation of step 0 is dropped"}, stored: "stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			cmd, lines, stderr := startJSON(t, bin, env, append([]string{"recipes/retool.yaml", "--ui", "json", "--store", db, "--run-name", "sig"}, tc.args...)...)
			// start-up and the phase: a generous limit, only against a hung run
			for wait := time.After(5 * time.Minute); ; {
				var e map[string]any
				var ok bool
				select {
				case e, ok = <-lines:
				case <-wait:
					t.Fatalf("the phase never came; stderr:\n%s", stderr.String())
				}
				if !ok {
					t.Fatalf("the run ended before the phase; stderr:\n%s", stderr.String())
				}
				if tc.at(e) {
					if e["type"] == "progress" && (e["eta_s"] == nil || e["run_eta_s"] == nil || e["tasks"] != 128.0) {
						t.Errorf("the evaluation's progress has no ETA or tasks: %v", e)
					}
					break
				}
			}
			sent := time.Now()
			for _, sig := range tc.signals {
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
			}
			var stopping, end map[string]any
			var announced time.Duration
			for e := range lines { // the rest of the stream, to its end
				switch e["type"] {
				case "stopping":
					stopping, announced = e, time.Since(sent)
				case "run_end":
					end = e
				}
			}
			werr := waitExit(t, cmd, sent, "the signal")
			took := time.Since(sent)
			t.Logf("%s: %q announced %v after the signal, the process exited %v after it", tc.name, stopping["message"], announced.Round(time.Millisecond), took.Round(time.Millisecond))
			if took > stopBound {
				t.Errorf("the process exited %v after the signal; want within %v", took, stopBound)
			}
			status := 0
			var ee *exec.ExitError
			if errors.As(werr, &ee) {
				status = ee.ExitCode()
			} else if werr != nil {
				t.Fatal(werr)
			}
			if status != tc.status {
				t.Errorf("exit status %d; want %d; stderr:\n%s", status, tc.status, stderr.String())
			}
			if stopping == nil || stopping["reason"] != tc.reason || !containsAny(stopping["message"], tc.announce) {
				t.Errorf("announced %v; want reason %q and one of %q", stopping, tc.reason, tc.announce)
			}
			if end == nil || end["status"] != "stopped" || end["reason"] != tc.reason {
				t.Errorf("run end %v; want stopped, %q", end, tc.reason)
			}
			checkStored(t, db, tc.stored, tc.reason, end)
		})
	}
}

// buildForSignals builds the binary and the environment it runs in: this process's matrix kernels,
// named so that it does not stop to measure them, on the Go backend.
func buildForSignals(t *testing.T) (bin string, env []string) {
	t.Helper()
	return testBinary(t), append(append(os.Environ(), device.ActiveKernels(os.Getenv).Env()...), "GOMLX_BACKEND="+device.GoConfig)
}

// checkStored opens the store read-only and checks the one run in it: its status, reason and end
// time, and that its latest checkpoint, when there is one, loads and is the one end names.
func checkStored(t *testing.T, db, status, reason string, end map[string]any) {
	t.Helper()
	st, r := storedRun(t, db)
	defer st.Close()
	if r.Status != status || r.StopReason != reason || r.Ended.IsZero() {
		t.Errorf("stored run: status %q, reason %q, ended %v; want %s, %q, an end time", r.Status, r.StopReason, r.Ended, status, reason)
	}
	m, err := st.LatestCheckpoint(r.ID)
	switch {
	case err == nil:
		cp, err := st.LoadCheckpoint(r.ID, m.Step)
		if err != nil || st.Verify(r.ID, m.Step) != nil || len(cp.Weights) == 0 {
			t.Errorf("the latest checkpoint (step %d) does not load: %v", m.Step, err)
		}
		if end != nil && end["checkpoint"] != float64(m.Step) {
			t.Errorf("the run end names checkpoint %v, the store's latest is %d", end["checkpoint"], m.Step)
		}
	case end != nil && end["checkpoint"] != 0.0:
		t.Errorf("the run end names checkpoint %v, the store has none (%v)", end["checkpoint"], err)
	}
	var ev event.RunEnd // the stream's run end reads back as the event it is
	if b, _ := json.Marshal(end); end != nil && json.Unmarshal(b, &ev) != nil {
		t.Errorf("run end %v does not read as an event", end)
	}
}

// TestSecondCtrlCAborts: a second signal while the run stops aborts it at once: the process exits
// 128 + that signal (130 for Ctrl-C), the run is recorded as aborted and the store opens. A stalled
// output no longer holds a stop up (TestStalledOutputStops), and the stop of an evaluation takes
// milliseconds, so the test sends SIGHUP and SIGINT together during the start evaluation: two
// signals of different numbers do not merge; the process takes them in either order (Linux hands
// the lower-numbered first: SIGHUP, then Ctrl-C), the first asking the run to stop and the second
// aborting it. The run can still end on the first before the process takes the second: that
// attempt must end as a stop by the first (its status, no abort, no crash: a second signal taken
// as the session closed once closed the store twice and panicked), and the test tries again, up
// to five times, until one aborts.
func TestSecondCtrlCAborts(t *testing.T) {
	bin, env := buildForSignals(t)
	for attempt := 1; attempt <= 5; attempt++ {
		if secondSignalAborts(t, bin, env, attempt) {
			return
		}
	}
	t.Fatal("in five attempts the run always ended on the first signal before the second was taken")
}

// secondSignalAborts sends SIGHUP and SIGINT together during a run's start evaluation and checks
// the outcome: true when the second aborted the run, false when the run had already ended on the
// first (checked as such).
func secondSignalAborts(t *testing.T, bin string, env []string, attempt int) bool {
	t.Helper()
	db := filepath.Join(t.TempDir(), "runs.db")
	cmd, lines, stderr := startJSON(t, bin, env, "recipes/retool.yaml", "--ui", "json", "--store", db, "--run-name", "sig")
	for e := range lines { // start-up and the start evaluation's first progress
		if e["type"] == "progress" && e["phase"] == "eval" && e["step"] == 0.0 {
			break
		}
	}
	sent := time.Now()
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	for range lines {
	}
	werr := waitExit(t, cmd, sent, "the two signals")
	took := time.Since(sent)
	var ee *exec.ExitError
	status := 0
	if errors.As(werr, &ee) {
		status = ee.ExitCode()
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Fatalf("attempt %d: the process panicked (exit %v):\n%s", attempt, werr, stderr.String())
	}
	if status == 129 && !strings.Contains(stderr.String(), "aborted by a second") {
		// SIGHUP's stop ended the run before the process took Ctrl-C: a stop, recorded as one.
		t.Logf("attempt %d: the run ended on the first signal before the second was taken (exit 129)", attempt)
		checkStored(t, db, "stopped", "hung up (SIGHUP)", nil)
		return false
	}
	second := map[int]string{130: "Ctrl-C", 129: "SIGHUP"}[status]
	if second == "" {
		t.Fatalf("exit %v; want status 130 or 129 (an abort by the second signal); stderr:\n%s", werr, stderr.String())
	}
	t.Logf("aborted by a second %s: exit %d, %v after the signals", second, status, took.Round(time.Millisecond))
	if want := "agentrl-tui: aborted by a second " + second + ": aborted "; !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "no checkpoint") {
		t.Errorf("stderr lacks %q… no checkpoint:\n%s", want, stderr.String())
	}
	checkStored(t, db, "aborted", "aborted by a second "+second, nil)
	return true
}

// containsAny reports whether s (a string) contains one of subs.
func containsAny(s any, subs []string) bool {
	str, _ := s.(string)
	for _, sub := range subs {
		if strings.Contains(str, sub) {
			return true
		}
	}
	return false
}

// waitExit waits for cmd, signalled at sent, to exit, failing the test if it runs on past the
// claim's bound plus a margin for a loaded machine; what names the signal in the failure.
func waitExit(t *testing.T, cmd *exec.Cmd, sent time.Time, what string) error {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(stopBound + 10*time.Second):
		t.Fatalf("still running %v after %s", time.Since(sent), what)
		return nil
	}
}

// storedRun opens the store read-only and returns it (the caller closes it) with the one run it
// holds, failing the test when it holds another number of runs.
func storedRun(t *testing.T, db string) (*store.Store, store.Run) {
	t.Helper()
	st, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs()
	if err != nil || len(runs) != 1 {
		st.Close()
		t.Fatalf("store holds %d runs (%v); want 1", len(runs), err)
	}
	return st, runs[0]
}

// startJSON starts the binary with args and env and returns its JSON events as they come (a
// channel closed when its standard output ends) and its standard error; the process is killed
// when the test ends, in case it hangs.
func startJSON(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, <-chan map[string]any, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan map[string]any, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20) // a step's events carry whole trajectories
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				lines <- e
			}
		}
		close(lines)
	}()
	return cmd, lines, &stderr
}
