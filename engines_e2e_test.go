package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"agentrl/engine/record"
)

// startServe starts `agentrl-tui serve` on the built-in model on a free port and returns its
// process and base URL, read from the line that announces it; the process is killed with the test.
func startServe(t *testing.T, bin string, env []string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--model", filepath.Join("testdata", "builtin"), "--addr", "127.0.0.1:0", "--backend", "go",
		"--max-total-tokens", "1024"}, extra...)...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), ") at "); ok && strings.HasPrefix(sc.Text(), "serving ") {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return cmd, strings.TrimSpace(rest)
		}
	}
	t.Fatal("serve exited before announcing its URL")
	return nil, ""
}

// engineRun is the default recipe cut to two steps without evaluation, on engines (none: the
// local engine), its weights written in f32 so that the probe is exact.
func engineRun(db, name string, engines ...string) []string {
	args := []string{"recipes/retool.yaml", "--store", db, "--run-name", name, "--backend", "go", "--max-steps", "2", "--ui", "plain",
		"--set", "eval.at_start=false", "--set", "eval.every=0", "--set", "eval.validation_tasks=0",
		"--set", "early_stop.patience=0", "--set", "early_stop.max_drop=0", "--set", "checkpoint.keep_best=0",
		"--set", "rollout.remote.weights_dtype=f32"}
	if len(engines) > 0 {
		args = append(args, "--set", "rollout.engines="+strings.Join(engines, ","))
	}
	return args
}

// stepMetrics reads the one run of db's metrics per step.
func stepMetrics(t *testing.T, db string) (string, map[int]map[string]float64) {
	t.Helper()
	st, r := storedRun(t, db)
	defer st.Close()
	m, err := st.Metrics(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r.ID, m
}

// TestRemoteEnginesEndToEnd runs two steps of the default recipe on two `agentrl-tui serve`
// processes as its rollout engines (issue #50): trajectories, rewards and training as with the
// local engine; after each update both servers' probe log-probs equal the trainer's (f32
// weights: within 1e-3); one server is killed (SIGKILL) in the middle of step 2's rollout and
// the step finishes on the other, the moved requests counted (in the metrics and the engines'
// state after each push). Then one engine of this project
// and the local engine, same seed: the same trajectories (tokens, hence rewards).
func TestRemoteEnginesEndToEnd(t *testing.T) {
	bin, env := buildForSignals(t)
	dir := t.TempDir()
	_, urlA := startServe(t, bin, env)
	b, urlB := startServe(t, bin, env)

	db := filepath.Join(dir, "two.db")
	cmd := exec.Command(bin, engineRun(db, "two", "serve "+urlA, "serve "+urlB)...)
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		// A quarter of step 2's trajectories are done; the rest are on both servers: kill one.
		if !killed && strings.HasPrefix(line, "step 2  rollout 16/") {
			_ = b.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run on two engines: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if !killed {
		t.Fatalf("step 2's rollout never reached 16 trajectories:\n%s", strings.Join(lines, "\n"))
	}
	_, m := stepMetrics(t, db)
	for step := 1; step <= 2; step++ {
		s := m[step]
		if s == nil {
			t.Fatalf("step %d has no metrics", step)
		}
		if d, ok := s["engine_probe_diff_max"]; !ok || d > 1e-3 {
			t.Errorf("step %d: engine_probe_diff_max %v (present %v); want ≤ 1e-3 (f32 weights)", step, d, ok)
		}
		if s["reward_mean"] == 0 && s["accuracy"] == 0 || s["updates"] == 0 {
			t.Errorf("step %d: reward_mean %g, accuracy %g, updates %g: nothing trained on", step, s["reward_mean"], s["accuracy"], s["updates"])
		}
	}
	if m[1]["engine_failovers"] != 0 || m[1]["engines_down"] != 0 {
		t.Errorf("step 1: failovers %g, down %g; want none", m[1]["engine_failovers"], m[1]["engines_down"])
	}
	if m[2]["engines_down"] != 1 || m[2]["engine_failovers"] < 1 {
		t.Errorf("step 2: failovers %g, down %g; want the killed server's requests moved (≥ 1) and it out of the rotation (1)",
			m[2]["engine_failovers"], m[2]["engines_down"])
	}
	// The engines' state after each push, as the log shows it: both up after step 1; after step
	// 2 the killed one down with its requests moved, the other up; each answered requests.
	a, bURL := "serve "+strings.TrimSuffix(urlA, "/v1"), "serve "+strings.TrimSuffix(urlB, "/v1")
	pushed := map[int]string{}
	for _, l := range lines {
		for step := 1; step <= 2; step++ {
			if rest, ok := strings.CutPrefix(l, fmt.Sprintf("step %d  engines after the push: ", step)); ok {
				pushed[step] = rest
			}
		}
	}
	answered := regexp.MustCompile(`up, \d+ in flight, [1-9]\d* done, `)
	if p := pushed[1]; !strings.Contains(p, a+" up,") || !strings.Contains(p, bURL+" up,") || len(answered.FindAllString(p, -1)) != 2 {
		t.Errorf("engines after step 1's push: %q; want both up, each with requests done", p)
	}
	moved := regexp.MustCompile(regexp.QuoteMeta(bURL) + ` DOWN \(.*\), 0 in flight, \d+ done, .* tok/s, [1-9]\d* failovers?`)
	if p := pushed[2]; !strings.Contains(p, a+" up,") || !moved.MatchString(p) {
		t.Errorf("engines after step 2's push: %q; want %s up and %s DOWN with its failovers", p, a, bURL)
	}
	for _, l := range lines {
		if strings.Contains(l, "ALARM stale_weights") && !strings.Contains(l, "left the rotation") {
			t.Errorf("a stale-weights alarm with f32 weights: %s", l)
		}
	}

	// One engine of this project, its weights sent over HTTP into a folder of its own, and the
	// local engine, same seed.
	up := filepath.Join(dir, "uploads")
	_, urlC := startServe(t, bin, env, "--upload-dir", up)
	one := append(engineRun(filepath.Join(dir, "one.db"), "one", "serve "+urlC), "--set", "rollout.remote.push=http")
	runs := map[string][]string{"remote": one, "local": engineRun(filepath.Join(dir, "local.db"), "local")}
	got := map[string]map[string]string{}
	for name, args := range runs {
		c := exec.Command(bin, args...)
		c.Env = env
		if o, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s run: %v\n%s", name, err, o)
		}
		got[name] = trajectoryTexts(t, args[2], 2)
	}
	if len(got["local"]) != 128 {
		t.Fatalf("the local run stored %d trajectories over 2 steps; want 128", len(got["local"]))
	}
	differ := 0
	for k, v := range got["local"] {
		if got["remote"][k] != v {
			differ++
			if differ <= 2 {
				t.Errorf("%s: remote %q; local %q", k, got["remote"][k], v)
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d trajectories differ between one serve engine and the local engine", differ, len(got["local"]))
	}
	// The engine loaded the last push from its upload folder, which holds that version alone.
	versions, err := os.ReadDir(up)
	if err != nil || len(versions) != 1 || !strings.HasSuffix(versions[0].Name(), "-step2") {
		t.Fatalf("the upload folder holds %v (%v); want step 2's weights alone", versions, err)
	}
	if _, err := os.Stat(filepath.Join(up, versions[0].Name(), "model.safetensors")); err != nil {
		t.Errorf("the uploaded weights: %v", err)
	}
}

// trajectoryTexts maps each stored training trajectory of the one run in db, steps 1…steps, by
// step/task/sample to its sampled text and reward.
func trajectoryTexts(t *testing.T, db string, steps int) map[string]string {
	t.Helper()
	st, r := storedRun(t, db)
	defer st.Close()
	out := map[string]string{}
	for step := 1; step <= steps; step++ {
		recs, err := st.Trajectories(r.ID, step)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			e := record.Trajectory(rec)
			var b strings.Builder
			for _, turn := range e.Turns {
				b.WriteString(turn.Assistant + "|")
			}
			fmt.Fprintf(&b, "reward %.4f", e.Reward.Total)
			out[fmt.Sprintf("%d/%s/%d", step, rec.TaskID, rec.Sample)] = b.String()
		}
	}
	return out
}
