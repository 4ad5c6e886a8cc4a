package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"agentrl/engine/device"
	"agentrl/engine/doctor"
)

// gpuCheckBinary builds the binary the script is given (BIN=...).
func gpuCheckBinary(t *testing.T) string {
	t.Helper()
	return testBinary(t)
}

// runGPUCheck runs scripts/gpu-check.sh with env added to this process's environment and returns
// its exit code and output.
func runGPUCheck(t *testing.T, timeout time.Duration, env ...string) (int, string) {
	t.Helper()
	return runGPUScript(t, "scripts/gpu-check.sh", timeout, env...)
}

// scriptReport is the report.json a GPU script that exited with code wrote into out (the test
// fails, with the script's output, where it did not exit 0 or wrote no report).
func scriptReport(t *testing.T, name string, code int, log, out string) *doctor.GPUReport {
	t.Helper()
	if code != 0 {
		t.Fatalf("%s exited %d; want 0\n%s", name, code, log)
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r doctor.GPUReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("report.json: %v\n%s", err, data)
	}
	return &r
}

// runGPUScript runs script (gpu-check.sh, gpu-bench.sh) as runGPUCheck does.
func runGPUScript(t *testing.T, script string, timeout time.Duration, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	case err != nil:
		t.Fatalf("%s: %v\n%s", script, err, out.String())
	}
	return 0, out.String()
}

// TestGPUCheckOnCPU runs every step of the GPU self-check on the CPU at tiny sizes
// (GPU_CHECK_BACKEND=go, the built-in model's shape, batches 1 and 4, a 2 × 64 update, a 3-step
// run of 2 trajectories, one step each of synchronous and partial rollouts) and checks the report's fields, so that the script is known to work up to
// the point where a GPU is needed.
func TestGPUCheckOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs every step of the self-check (about a minute)")
	}
	bin, out := gpuCheckBinary(t), filepath.Join(t.TempDir(), "report")
	env := []string{"BIN=" + bin, "OUT=" + out, "GPU_CHECK_BACKEND=go", "GPU_CHECK_LIKE=testdata/builtin", "GPU_CHECK_BATCHES=1 4",
		"GPU_CHECK_PROMPT_LEN=8", "GPU_CHECK_NEW=8", "GPU_CHECK_TRAIN_SEQS=2", "GPU_CHECK_TRAIN_LEN=64", "GPU_CHECK_TRAIN_MICRO=2",
		"GPU_CHECK_RUN_VRAM=8GiB", "GPU_CHECK_BUDGET_S=300",
		"GPU_CHECK_RUN_SET=rollout.tasks_per_step=1 rollout.group_size=2 rollout.max_new_tokens=16 rollout.max_turns=1 rollout.max_total_tokens=128",
		"GPU_CHECK_PARTIAL_STEPS=1",
		"GPU_CHECK_PARTIAL_SET=rollout.tasks_per_step=1 rollout.group_size=2 rollout.max_new_tokens=16 rollout.max_turns=2 rollout.max_total_tokens=128 env.long_tail.share=0",
		// the portable kernels: no kernel measurement in between, and bf16 computed right on every
		// CPU (the AVX2 ones got it wrong before patch 12 of third_party/compute; doctor and the bf16
		// parity rows would say so)
		"GOMLX_SIMD_AVX512=false", "GOMLX_SIMD_AVX2=false"}
	code, log := runGPUCheck(t, 8*time.Minute, env...)
	r := scriptReport(t, "gpu-check", code, log, out)
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name)
		if s.ExitCode != 0 {
			t.Errorf("step %s exited %d: %s", s.Name, s.ExitCode, s.LogTail)
		}
	}
	for _, want := range []string{"doctor", "plan", "parity", "op-parity-go", "random-model", "run-plan", "run", "partial", "rollout-1", "rollout-4", "train"} {
		if !slices.Contains(names, want) {
			t.Errorf("no step %s in %v", want, names)
		}
	}
	if !r.OK || r.Backend != device.Go || r.Doctor == nil || len(r.Missing) > 0 {
		t.Errorf("ok %v, backend %q, doctor %v, missing %v; want ok on go with doctor's report and nothing missing", r.OK, r.Backend, r.Doctor != nil, r.Missing)
	}
	if len(r.Parity) != 6 {
		t.Errorf("%d parity rows; want 3 fixtures × 2 dtypes", len(r.Parity))
	}
	for _, p := range r.Parity {
		if !p.OK || p.Cases == 0 || (p.DType == "float32" && (p.MaxLogProbErr > doctor.TolF32 || p.Generate != p.Cases || p.ScoreGreedy != p.Cases)) {
			t.Errorf("parity %+v; want every float32 case within %g and greedy equal", p, doctor.TolF32)
		}
	}
	if len(r.OpParity) != 1 || r.OpParity[0].Backend != device.Go || len(r.OpParity[0].Rows) == 0 {
		t.Errorf("op parity %+v; want the Go backend's rows", r.OpParity)
	}
	for _, op := range r.OpParity {
		for _, o := range op.Rows {
			if o.Error != "" || o.Ulps > 16 {
				t.Errorf("op parity row %+v; want every op within 16 ulps of float64 on the Go backend", o)
			}
		}
	}
	if len(r.Rollout) != 2 || r.Rollout[0].Batch != 1 || r.Rollout[1].Batch != 4 {
		t.Errorf("rollout rows %+v; want batches 1 and 4", r.Rollout)
	}
	for _, x := range r.Rollout {
		if x.TokensPerSec <= 0 || x.Bandwidth <= 0 || x.RooflineShare <= 0 || x.Reference == "" {
			t.Errorf("rollout row %+v; want tokens/s, the bandwidth, its share and the reference", x)
		}
	}
	if tr := r.Train; tr == nil || tr.Sequences != 2 || tr.Length != 64 || tr.TokensPerSec <= 0 || tr.Reference == "" {
		t.Errorf("train row %+v; want 2 × 64 with tokens/s and the reference", tr)
	}
	if u := r.Run; u == nil || u.Status != "finished" || u.Steps != 3 || len(u.SwitchToTrain) != 3 || len(u.SwitchToRollout) != 3 ||
		len(u.Sync) != 3 || u.Predicted <= 0 || u.EngineLedger <= 0 {
		t.Errorf("run row %+v; want 3 finished steps with switch and sync times and the ledger's prediction", u)
	}
	if p := r.Partial; p == nil || p.Sync.Tokens <= 0 || p.Partial.Tokens <= 0 || p.Ratio <= 0 || p.Bound < 1 {
		t.Errorf("partial row %+v; want trained tokens of both runs, their ratio and the bound", p)
	}
	if p := r.Plan; p == nil || p.Shape != "qwen3-4b" || p.Budget != 96<<30 {
		t.Errorf("plan row %+v; want qwen3-4b at 96 GiB", p)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "| HF parity qwen3-tiny float32 | ✓ |") || !strings.Contains(log, ", batch 4 | ✓ |") {
		t.Errorf("report.md (%v) or the script's output lacks the table:\n%s", err, md)
	}
}

// TestGPUCheckWithoutGPU runs the self-check as make gpu-check does on a machine without a GPU:
// it stops within seconds with doctor's explanation and exit code 2.
func TestGPUCheckWithoutGPU(t *testing.T) {
	mon := device.NewMonitor()
	ok, _ := mon.Available()
	mon.Close()
	if ok {
		t.Skip("NVML sees a GPU here: make gpu-check would run in full")
	}
	bin, out := gpuCheckBinary(t), filepath.Join(t.TempDir(), "report")
	t0 := time.Now()
	code, log := runGPUCheck(t, 2*time.Minute, "BIN="+bin, "OUT="+out, "PJRT_PLUGIN_LIBRARY_PATH=")
	if code != 2 {
		t.Fatalf("gpu-check exited %d; want 2\n%s", code, log)
	}
	if took := time.Since(t0); took > 30*time.Second {
		t.Errorf("gpu-check took %s to say no; want seconds", took)
	}
	for _, want := range []string{"FAIL  gpu", "NOT READY for the GPU path", "nothing else ran"} {
		if !strings.Contains(log, want) {
			t.Errorf("the output lacks %q:\n%s", want, log)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "steps", "parity.json")); err == nil {
		t.Errorf("a step ran after doctor said no")
	}
}
