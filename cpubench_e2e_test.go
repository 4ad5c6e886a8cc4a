package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUBenchScript runs scripts/cpu-bench.sh (the per-machine CPU record of issue #36) once at
// tiny sizes: every step runs, each bench's JSON holds a throughput, and report.md names the CPU,
// the kernel set chosen and a row per run. A CPU list the machine does not have, or a RUNS that
// is not a count, is refused with the variable named, before anything runs.
func TestCPUBenchScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the script's benches at tiny sizes (about 20 s)")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset (util-linux) on this machine")
	}
	bin, out := gpuCheckBinary(t), filepath.Join(t.TempDir(), "cpu-bench")
	run := func(env ...string) (string, error) {
		cmd := exec.Command("bash", "scripts/cpu-bench.sh")
		cmd.Env = append(os.Environ(), append([]string{"BIN=" + bin, "OUT=" + out, "RUNS=1",
			"TRAIN_ARGS=--sequences 2 --length 64 --prompt 16 --micro-batch 2 --updates 1",
			"ROLLOUT_ARGS=--slots 2 --sequences 2 --prompt-len 8 --new 8"}, env...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	log, err := run()
	if err != nil {
		t.Fatalf("cpu-bench: %v\n%s", err, log)
	}
	for _, name := range []string{"train-1", "rollout-1"} {
		data, err := os.ReadFile(filepath.Join(out, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			TokensPerSec float64 `json:"tokens_per_s"`
		}
		if err := json.Unmarshal(data, &r); err != nil || r.TokensPerSec <= 0 {
			t.Errorf("%s.json: %v, tokens/s %g; want a throughput\n%s", name, err, r.TokensPerSec, data)
		}
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# CPU bench: ", "pinned to 0,1", "Kernels chosen: **", "| train-1 | ", "| rollout-1 | "} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q:\n%s", want, report)
		}
	}

	for _, bad := range []struct{ env, want string }{
		{"CPUS=4095", "CPUS=4095 is not a CPU list this machine has"},
		{"RUNS=three", "RUNS=three is not a positive number of runs"},
	} {
		log, err = run(bad.env)
		if err == nil || !strings.Contains(log, bad.want) {
			t.Errorf("%s: %v; want a refusal naming the variable\n%s", bad.env, err, log)
		}
	}
}
