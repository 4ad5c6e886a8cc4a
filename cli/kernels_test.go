package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/bench"
	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
)

// cleanKernelEnv gives the test a cache of its own and no kernel choice in the environment.
func cleanKernelEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	for _, k := range append(device.KernelEnvNames(), device.EnvKernels) {
		t.Setenv(k, "") // ChooseKernels reads "" as unset
	}
	t.Setenv("GOMLX_BACKEND", "go:ops_sequential")
	return filepath.Join(dir, "agentrl-tui", "kernels.json")
}

// TestKernelsJSONInProcess: a test binary cannot start itself with other kernels, so `kernels`
// measures only the set it runs, says that the others were not measured and why, and keeps
// nothing in the cache.
func TestKernelsJSONInProcess(t *testing.T) {
	cache := cleanKernelEnv(t)
	var out, errb bytes.Buffer
	err := Run([]string{"kernels", "--json", "--fresh", "--model", fixture("qwen3-tiny"), "--slots", "2", "--micro-batch", "2"},
		Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var r kernelsReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("kernels --json printed %q: %v", out.String(), err)
	}
	active := device.ActiveKernels(os.Getenv)
	if r.Set != active || r.Active != active || !strings.Contains(r.Work, "decode 2 slots × 512, train micro-batch 2") {
		t.Errorf("report %+v; want the active set %s for the tiny model's work", r, active)
	}
	if len(device.KernelSets()) == 1 {
		if !strings.Contains(r.Reason, "portable kernels:") {
			t.Errorf("single set: reason %q", r.Reason)
		}
		return
	}
	if len(r.Timings) != 1 || r.Timings[0].Set != active || r.Timings[0].DecodeMs <= 0 || r.Timings[0].TrainMs <= 0 || r.Scores[active] != 2 {
		t.Errorf("timings %+v, scores %v; want the active set's, measured in place", r.Timings, r.Scores)
	}
	if !strings.Contains(r.Reason, "not measured: ") || !strings.Contains(r.Reason, device.ErrNoReexec.Error()) {
		t.Errorf("reason %q does not say which sets were not measured and why", r.Reason)
	}
	if !strings.Contains(errb.String(), "measuring the "+string(active)+" kernels") {
		t.Errorf("no progress line on stderr: %q", errb.String())
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("a partial measurement was cached in %s", cache)
	}
}

// TestKernelChoiceWithoutRestart: a model command whose cached choice is another set than the
// process runs would restart; a test binary cannot, so it runs its own set and says so, naming
// the choice. With the choice equal to its own set it just says the choice.
func TestKernelChoiceWithoutRestart(t *testing.T) {
	sets := device.KernelSets()
	if len(sets) == 1 {
		t.Skip("one kernel set in this build: nothing to choose")
	}
	cleanKernelEnv(t)
	w := kernelWork{dir: fixture("qwen3-tiny"), slots: cpuSlots, maxLen: cpuMaxLen, micro: cpuMicro, dtype: dtypes.Float32}
	active := device.ActiveKernels(os.Getenv)
	for _, fastest := range []device.KernelSet{sets[len(sets)-1], active} {
		device.ChooseKernels(device.KernelOptions{Shape: w.key(), Fresh: true, Probe: func(k device.KernelSet) (device.KernelTiming, error) {
			if k == fastest {
				return device.KernelTiming{DecodeMs: 1, TrainMs: 10}, nil
			}
			return device.KernelTiming{DecodeMs: 3, TrainMs: 30}, nil
		}})
		var out, errb bytes.Buffer
		err := Run([]string{"generate", "--model", fixture("qwen3-tiny"), "--ids", "1,2,3", "--max-new", "2", "--backend", "go"},
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("generate: %v\n%s", err, errb.String())
		}
		want := string(fastest) + " kernels, measured fastest on this CPU"
		if fastest != active {
			want = string(active) + " kernels, this process's own, not the chosen ones: " + device.ErrNoReexec.Error() + "; chosen: " + want
		}
		if !strings.Contains(errb.String(), want) {
			t.Errorf("chosen %s: stderr lacks %q:\n%s", fastest, want, errb.String())
		}
	}
}

// TestKernelsEnv: --env prints the chosen set's variables as shell assignments, the reason as a
// comment; the user's own GOMLX_SIMD_* win.
func TestKernelsEnv(t *testing.T) {
	cleanKernelEnv(t)
	t.Setenv("GOMLX_SIMD_AVX512", "false")
	t.Setenv("GOMLX_SIMD_AVX2", "false")
	out, err := runCmd(t, "kernels", "--env", "--model", fixture("qwen3-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# portable kernels, as GOMLX_SIMD_AVX512=false GOMLX_SIMD_AVX2=false in the environment says\n"
	if !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "\nexport GOMLX_SIMD_AVX512=false GOMLX_SIMD_AVX512_GEMM=false GOMLX_SIMD_AVX2=false\n") {
		t.Errorf("kernels --env printed\n%s\nwant %q, then the export line", out, want)
	}
}

// TestKernelProxy: a big model's kernels are measured on two of its layers (same matrices) and a
// cut vocabulary, a small one's on itself. Weights per layer worked out by hand from the configs.
func TestKernelProxy(t *testing.T) {
	builtin, err := model.ReadConfig(filepath.Join("..", model.BuiltinSourceDir))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := ledger.KnownShape("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	big := bench.ConfigFromShape(sh)
	for _, tc := range []struct {
		name       string
		cfg        *model.Config
		wantParams int64
		wantLayers int // 0: measured as it is
	}{
		// 4 × (128·128·2 + 128·64·2 + 3·128·256)
		{"built-in", builtin, 4 * (32768 + 16384 + 98304), 0},
		// 28 × (1024·2048·2 + 1024·1024·2 + 3·1024·3072)
		{"qwen3-0.6b", big, 28 * (4194304 + 2097152 + 9437184), 2},
	} {
		if got := layerParams(tc.cfg); got != tc.wantParams {
			t.Errorf("%s: layerParams = %d; want %d", tc.name, got, tc.wantParams)
		}
		cut := proxyConfig(tc.cfg)
		switch {
		case tc.wantLayers == 0 && cut != nil:
			t.Errorf("%s: measured on a proxy of %d layers; want the model itself", tc.name, cut.NumLayers)
		case tc.wantLayers > 0 && (cut == nil || cut.NumLayers != tc.wantLayers || cut.HiddenSize != tc.cfg.HiddenSize ||
			cut.IntermediateSize != tc.cfg.IntermediateSize || cut.VocabSize != proxyVocab):
			t.Errorf("%s: proxy %+v; want %d layers of the same widths and %d words", tc.name, cut, tc.wantLayers, proxyVocab)
		case tc.cfg.NumLayers != 28 && tc.wantLayers > 0:
			t.Errorf("%s: the model's own config was changed", tc.name)
		}
	}
}
