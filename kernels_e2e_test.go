package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/device"
)

// TestKernelsChoiceEndToEnd builds the binary and runs `kernels --json --fresh` on the tiny
// fixture with a cache folder of its own: every kernel set this build and CPU have is measured in
// a process of its own, the chosen set has the lowest score (each phase's time over the fastest
// set's, summed), and a second call answers from the cache without measuring.
func TestKernelsChoiceEndToEnd(t *testing.T) {
	dir := t.TempDir()
	bin := testBinary(t)
	cache := filepath.Join(dir, "cache")
	var env []string
	drop := append(device.KernelEnvNames(), device.EnvKernels, "XDG_CACHE_HOME")
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(drop, k) {
			env = append(env, kv)
		}
	}
	env = append(env, "XDG_CACHE_HOME="+cache)
	type report struct {
		device.KernelChoice
		Active device.KernelSet `json:"active"`
	}
	kernels := func(args ...string) (report, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"kernels", "--json", "--model", "testdata/fixtures/qwen3-tiny", "--slots", "4", "--micro-batch", "2"}, args...)...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kernels %v: %v\n%s", args, err, errb.String())
		}
		var r report
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("kernels --json printed %q: %v", out.String(), err)
		}
		return r, errb.String()
	}

	first, progress := kernels("--fresh")
	sets := device.KernelSets()
	if len(sets) == 1 {
		if first.Set != device.Portable || !strings.HasPrefix(first.Reason, "portable kernels: ") || progress != "" {
			t.Errorf("one set: %+v, stderr %q; want portable, unmeasured", first, progress)
		}
		return
	}
	if len(first.Timings) != len(sets) {
		t.Fatalf("timings %+v; want one per set of %v (reason: %s)", first.Timings, sets, first.Reason)
	}
	score := func(k device.KernelTiming) float64 {
		bd, bt := k.DecodeMs, k.TrainMs
		for _, o := range first.Timings {
			bd, bt = min(bd, o.DecodeMs), min(bt, o.TrainMs)
		}
		return k.DecodeMs/bd + k.TrainMs/bt
	}
	var chosen device.KernelTiming
	for i, k := range first.Timings {
		if k.Set != sets[i] || k.DecodeMs <= 0 || k.TrainMs <= 0 {
			t.Errorf("timing %d: %+v; want %s, measured", i, k, sets[i])
		}
		if k.Set == first.Set {
			chosen = k
		}
		if !strings.Contains(progress, "measuring the "+string(k.Set)+" kernels on this CPU") {
			t.Errorf("no progress line for %s on stderr:\n%s", k.Set, progress)
		}
	}
	for _, k := range first.Timings {
		if score(k) < score(chosen) {
			t.Errorf("chose %s (score %.3f) over %s (score %.3f): %s", chosen.Set, score(chosen), k.Set, score(k), first.Reason)
		}
	}
	if !strings.Contains(first.Reason, "measured fastest on this CPU") {
		t.Errorf("reason %q", first.Reason)
	}

	again, progress := kernels()
	if again.Set != first.Set || len(again.Timings) != len(first.Timings) || progress != "" ||
		!strings.Contains(again.Reason, "cached in "+filepath.Join(cache, "agentrl-tui", "kernels.json")) {
		t.Errorf("second call: %+v, stderr %q; want %s from the cache, nothing measured", again, progress, first.Set)
	}
}
