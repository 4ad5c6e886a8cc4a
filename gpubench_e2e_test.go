package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"agentrl/engine/device"
)

// TestGPUBenchOnCPU runs every step of scripts/gpu-bench.sh on the CPU at tiny sizes
// (GPU_BENCH_BACKEND=go, the built-in model for both the small and the large model, batches 2 and
// 4, one step of the seed's recipe of 2 trajectories with the script's data and PRM, a 2 × 64
// update) and checks the report: the rollout rows in
// the order they ran with the second start among them, each naming its model and its programs;
// the recipe step with its phases and compiles; the update; parity; and the second start's goal
// row. What only a GPU shows — the compilation cache loading programs, generate and PyTorch on the
// GPU — is the GPU lease's.
func TestGPUBenchOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs every step of the GPU benchmarks (under a minute)")
	}
	bin, tmp := testBinary(t), t.TempDir()
	out, cache := filepath.Join(tmp, "report"), filepath.Join(tmp, "cache")
	code, log := runGPUScript(t, "scripts/gpu-bench.sh", 8*time.Minute, "BIN="+bin, "OUT="+out, "GPU_BENCH_CACHE="+cache, "GPU_BENCH_BACKEND=go",
		"GPU_BENCH_SMALL=testdata/builtin", "GPU_BENCH_LARGE=testdata/builtin", "GPU_BENCH_FULL_DEPTH_S=100000", // a folder is never cut
		"GPU_BENCH_BATCHES=2 4", "GPU_BENCH_PROMPT_LEN=8", "GPU_BENCH_NEW=8",
		// the seed's recipe (the script's default) as the GPU step runs it — the repository's data
		// samples, the random folder as the PRM — at the CPU's sizes, as scripts/seed-cpu.sh cuts them
		"GPU_BENCH_STEP_SET=model.dtype=f32 rollout.tasks_per_step=1 rollout.group_size=2 rollout.max_turns=1 rollout.max_new_tokens=16 "+
			"rollout.max_total_tokens=1024 eval.max_new_tokens=16 eval.max_total_tokens=1024 eval.n_samples=2 eval.ks=1,2 eval.validation_tasks=2 "+
			"eval.validation_samples=2 early_stop.metric=pass@2 env.timeout=10s env.sandbox.workers=2 prm.max_new_tokens=16 prm.model="+filepath.Join(out, "model")+
			" data.train=testdata/data/dapo-slime.jsonl data.eval=aime24=testdata/data/aime2024",
		"GPU_BENCH_STEP_VRAM=8GiB", "GPU_BENCH_TRAIN_SEQS=2", "GPU_BENCH_TRAIN_LEN=64", "GPU_BENCH_TRAIN_MICRO=2", "GPU_BENCH_BUDGET_S=300",
		"GOMLX_SIMD_AVX512=false", "GOMLX_SIMD_AVX2=false") // the portable kernels, as TestGPUCheckOnCPU
	r := scriptReport(t, "gpu-bench", code, log, out)
	var names []string
	torch := false // the PyTorch update runs where a python with torch is found (CI installs one)
	for _, s := range r.Steps {
		if s.ExitCode != 0 {
			t.Errorf("step %s exited %d: %s", s.Name, s.ExitCode, s.LogTail)
		}
		if s.Name == "torch-train" {
			torch = true
			continue
		}
		names = append(names, s.Name)
	}
	if tr := r.Train; torch && (tr == nil || tr.Ratio <= 0 || tr.RefTokensPerS <= 0) {
		t.Errorf("train row %+v; want PyTorch eager's tokens/s and the ratio beside it", tr)
	}
	want := []string{"doctor", "rollout-small-2", "rollout-small-again-2", "rollout-small-4", "rollout-large-2", "rollout-large-4",
		"random-model", "run-plan", "run", "train", "parity"}
	if !slices.Equal(names, want) {
		t.Errorf("steps %v; want, in this order, %v (and torch-train after train where torch is found)", names, want)
	}
	if !r.OK || r.Backend != device.Go || len(r.Missing) > 0 || len(r.Parity) != 6 {
		t.Errorf("ok %v, backend %q, missing %v, %d parity rows; want ok on go, nothing missing, 3 fixtures × 2 dtypes", r.OK, r.Backend, r.Missing, len(r.Parity))
	}
	var rows []string
	for _, x := range r.Rollout {
		rows = append(rows, x.Tag+"-"+map[int]string{2: "2", 4: "4"}[x.Batch])
		if x.Model != "testdata/builtin" || x.TokensPerSec <= 0 || x.RooflineShare <= 0 || x.Programs == 0 || x.Reference == "" {
			t.Errorf("rollout row %+v; want the model, tokens/s, the roofline share, the programs and the reference", x)
		}
		if x.CacheHits+x.CacheMisses != 0 {
			t.Errorf("rollout row %+v: cache hits or misses on the Go backend, which has no cache", x)
		}
	}
	if !slices.Equal(rows, []string{"small-2", "small-again-2", "small-4", "large-2", "large-4"}) {
		t.Errorf("rollout rows %v; want them in the order they ran", rows)
	}
	u := r.Run
	if u == nil || u.Status != "finished" || u.Steps != 1 || u.Compiled.Programs == 0 || u.Predicted <= 0 {
		t.Fatalf("run row %+v; want one finished step with its compiles and the ledger's prediction", u)
	}
	var phases []string
	for _, p := range u.Phases {
		phases = append(phases, p.Phase)
	}
	for _, p := range []string{"rollout", "prm", "reference", "train", "sync"} { // the seed's: its PRM phase too
		if !slices.Contains(phases, p) {
			t.Errorf("run phases %v lack %s", phases, p)
		}
	}
	if tr := r.Train; tr == nil || tr.Model != "testdata/builtin" || tr.Sequences != 2 || tr.Length != 64 || tr.TokensPerSec <= 0 {
		t.Errorf("train row %+v; want the built-in model's 2 × 64 update", tr)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	for _, w := range []string{"| bench rollout, testdata/builtin, batch 2, second start | ✓ |", "| goal: a second start compiles in < 10 s, testdata/builtin | ✓ |",
		"| recipe run, 1 steps | ✓ |"} {
		if err != nil || !strings.Contains(string(md), w) {
			t.Errorf("report.md (%v) lacks %q:\n%s", err, w, md)
		}
	}
	if strings.Contains(log, "layers (") {
		t.Errorf("the script cut a model folder's depth:\n%s", log)
	}
}
