package doctor

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"agentrl/engine/bench"
	"agentrl/engine/compiles"
	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/torchref"
	"agentrl/engine/train"
	"agentrl/store/safetensors"
)

// stepFiles are the outputs of a self-check whose every step went well.
func stepFiles(t *testing.T) map[string]any {
	t.Helper()
	ro := func(tps float64) bench.RolloutResult {
		return bench.RolloutResult{BenchResult: &rollout.BenchResult{TokensPerSec: tps, StepMillis: 5, BytesPerSec: 1e12, CompileTime: 3 * time.Second},
			Bandwidth: 3.35e12, Torch: &torchref.GenerateResult{Torch: "2.9.0", Device: "NVIDIA H100", TokensPerSec: tps / 2},
			Versus: bench.Versus{ReferenceTokensPerSec: tps / 2, Ratio: 2}}
	}
	return map[string]any{
		DoctorFile: Report{Backend: device.CUDA, GPU: h100(), CanRun: true, GPUReady: true},
		ParityFile: ParityReport{Backend: device.CUDA, Rows: []ParityRow{
			{Fixture: "qwen3-tiny", DType: "float32", Cases: 3, MaxLogProbErr: 1e-6, ArgmaxAgree: 1, ScoreGreedy: 3, Generate: 3, Tolerance: TolF32, OK: true},
			{Fixture: "qwen3-tiny", DType: "bfloat16", Cases: 3, MaxLogProbErr: 0.01, ArgmaxAgree: 0.97, ScoreGreedy: 2, Generate: 3, Tolerance: TolBF16, OK: true}}},
		"rollout-1.json":  ro(100),
		"rollout-64.json": ro(5000),
		TrainFile: bench.TrainResult{BenchResult: &train.BenchResult{Config: train.BenchConfig{Sequences: 8, Length: 1024}, TokensPerSec: 20000, MicroStepMs: 400},
			Backend: device.CUDA, PeakShare: 0.4},
		TorchTrainFile: torchref.Result{Torch: "2.9.0", Device: "NVIDIA H100", Train: &torchref.TrainResult{TokensPerSec: 10000}},
		PlanFile:       json.RawMessage(`{"fits":true,"kv_slots":64,"micro_batch":6,"total":102000000000,"budget":103079215104,"shape":"qwen3-4b"}`),
		RunPlanFile:    json.RawMessage(`{"fits":true,"kv_slots":64,"micro_batch":8,"total":20000000000,"budget":80000000000,"phases":{"rollout":15000000000,"train":20000000000},"shape":"model"}`),
		RunPeakFile:    Peak{Available: true, Baseline: 1 << 30, PeakUsed: 21 << 30, Total: 80 << 30, Samples: 100},
		RunEventsFile: strings.Join([]string{
			`{"type":"run_start","backend":"cuda"}`,
			`{"type":"ledger","components":{"master weights":100,"AdamW moments (host)":200,"KV cache":50}}`,
			`{"type":"phase","step":1,"phase":"rollout","seconds":2}`,
			`{"type":"phase","step":1,"phase":"sync","seconds":0.25}`,
			`{"type":"metrics","step":1,"metrics":{"switch_to_train_s":1.5,"switch_to_rollout_s":0.5}}`,
			`{"type":"phase","step":2,"phase":"sync","seconds":0.2}`,
			`{"type":"metrics","step":2,"metrics":{"switch_to_train_s":1.25,"switch_to_rollout_s":0.4}}`,
			`not an event`,
			`{"type":"run_end","status":"finished"}`,
		}, "\n"),
	}
}

func writeSteps(t *testing.T, files map[string]any, status string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		var data []byte
		if s, ok := v.(string); ok {
			data = []byte(s)
		} else {
			var err error
			if data, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, StatusFile), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBuildReport(t *testing.T) {
	allGood := "doctor\t0\t2.0\nplan\t0\t1.0\nparity\t0\t30.5\nrun\t0\t120\n"
	for _, tc := range []struct {
		name    string
		edit    func(files map[string]any)
		status  string
		logs    map[string]string
		wantOK  bool
		check   func(t *testing.T, r *GPUReport)
		wantMD  []string
		wantErr bool
	}{
		{
			name: "every step went well", status: allGood, wantOK: true,
			check: func(t *testing.T, r *GPUReport) {
				if r.Backend != device.CUDA || !strings.Contains(r.Device, "H100") || len(r.Missing) > 0 {
					t.Errorf("backend %q, device %q, missing %v", r.Backend, r.Device, r.Missing)
				}
				if len(r.Rollout) != 2 || r.Rollout[0].Batch != 1 || r.Rollout[1].Batch != 64 || r.Rollout[1].Ratio != 2 {
					t.Errorf("rollout %+v; want batches 1 and 64, ratio 2", r.Rollout)
				}
				if x := r.Rollout[0]; x.RooflineShare < 0.29 || x.RooflineShare > 0.3 || !strings.Contains(x.Reference, "HF generate") {
					t.Errorf("rollout row %+v; want a 0.3 roofline share against HF generate", x)
				}
				if tr := r.Train; tr == nil || tr.Ratio != 2 || tr.Sequences != 8 || !strings.Contains(tr.Reference, "PyTorch 2.9.0") {
					t.Errorf("train %+v; want 8 sequences at twice PyTorch", tr)
				}
				u := r.Run
				if u == nil || u.Steps != 2 || u.Status != "finished" || len(u.SwitchToTrain) != 2 || u.SwitchToTrain[1] != 1.25 ||
					len(u.Sync) != 2 || u.NVMLPeak != 21<<30 || u.Predicted != 20000000000 || u.EngineLedger != 150 || len(u.StepSeconds) != 2 {
					t.Errorf("run %+v", u)
				}
				if r.Plan == nil || !r.Plan.Fits || r.Plan.Shape != "qwen3-4b" {
					t.Errorf("plan %+v", r.Plan)
				}
			},
			wantMD: []string{"| HF parity qwen3-tiny float32 | ✓ |", "| bench rollout, batch 64 | ✓ | 5000 tokens/s", "engine ÷ reference 2.00",
				"| recipe run, 2 steps | ✓ | finished on cuda; switch to train 1.50, 1.25 s", "NVML peak 21.00 GiB (20.00 GiB over", "ledger predicts 18.63 GiB",
				"| plan qwen3-4b at 96.00 GiB | ✓ | fits: 64 KV slots", "| parity | 0 | 30.5 |"},
		},
		{
			name: "a step failed", status: allGood + "train\t1\t12.0\n", logs: map[string]string{"train.log": "bench train: out of memory"},
			edit: func(f map[string]any) { delete(f, TrainFile); delete(f, TorchTrainFile) },
			check: func(t *testing.T, r *GPUReport) {
				if s := r.Steps[len(r.Steps)-1]; s.Name != "train" || s.ExitCode != 1 || !strings.Contains(s.LogTail, "out of memory") {
					t.Errorf("last step %+v; want train's failure with its log", s)
				}
				if r.Train != nil || !strings.Contains(strings.Join(r.Missing, " "), TrainFile) {
					t.Errorf("train %+v, missing %v; want no train row and train.json missing", r.Train, r.Missing)
				}
			},
			wantMD: []string{"NOT ALL GOOD", "| train | 1 | 12.0 |", "Missing outputs: train.json"},
		},
		{
			// bench-partial.sh's text, then its JSON line; the bound is worked out by hand:
			// 100 s of steps, 60 of them rollout, so a free rollout gives at most 100 / 40 = 2.5x.
			name: "partial rollouts", status: allGood + "partial\t0\t240\n", wantOK: true,
			edit: func(f map[string]any) {
				f[PartialFile] = "sync 4000 trained tokens ...\nratio 1.60x\n" +
					`{"sync": {"tokens": 4000, "seconds": 100, "rollout_s": 60, "tokens_per_s": 40, "occupancy": 0.5, "tail_s": 9},` +
					` "partial": {"tokens": 4096, "seconds": 64, "rollout_s": 24, "tokens_per_s": 64, "occupancy": 0.9, "tail_s": 1}, "ratio": 1.6}` + "\n"
			},
			check: func(t *testing.T, r *GPUReport) {
				p := r.Partial
				if p == nil || p.Ratio != 1.6 || p.Bound != 2.5 || p.Sync.TokensPerS != 40 || p.Partial.Occupancy != 0.9 || len(r.Missing) > 0 {
					t.Errorf("partial %+v, missing %v", p, r.Missing)
				}
			},
			wantMD: []string{"| partial rollouts, long-tail workload | ✓ | 1.60× trained tokens/s (goal 1.5×; no rollout schedule can pass 2.50× here): synchronous 40.0 tokens/s, occupancy 0.50, tail 9.00 s, rollout 60 of 100 s; partial 64.0 tokens/s"},
		},
		{
			name: "partial rollouts left out", status: allGood, wantOK: true,
			check: func(t *testing.T, r *GPUReport) {
				if r.Partial != nil || len(r.Missing) > 0 {
					t.Errorf("partial %+v, missing %v; want neither without the step", r.Partial, r.Missing)
				}
			},
		},
		{
			name: "a parity row off", status: allGood,
			edit: func(f map[string]any) {
				p := f[ParityFile].(ParityReport)
				p.Rows = append(p.Rows, ParityRow{Fixture: "qwen2-tiny", DType: "float32", Error: "model.safetensors: not found"})
				f[ParityFile] = p
			},
			wantMD: []string{"| HF parity qwen2-tiny float32 | ✗ | error: model.safetensors: not found |"},
		},
		{
			name: "a torch step that did not run", status: allGood, logs: map[string]string{"torch-train.log": "no python with torch found"},
			edit:   func(f map[string]any) { delete(f, TorchTrainFile) },
			wantOK: true,
			check: func(t *testing.T, r *GPUReport) {
				if r.Train == nil || r.Train.Ratio != 0 || !strings.Contains(r.Train.Reference, "no python with torch") || len(r.Missing) > 0 {
					t.Errorf("train %+v, missing %v; want no ratio, why, and nothing counted missing", r.Train, r.Missing)
				}
			},
		},
		{
			// scripts/hf-load-check.py's lines as written, one within tolerance and one that did not
			// load; and a float32 parity variant whose row holds where the plain run's did not.
			name:   "hf-load and parity variants",
			status: allGood + "hf-load-builtin\t0\t9.0\nhf-load-random\t2\t4.0\nparity-notf32\t0\t41.5\n",
			edit: func(f map[string]any) {
				f["hf-load-builtin.json"] = `{"model": "x/export-builtin", "shards": 3, "device": "cpu", "dtype": "float32", "tol": 0.001, "torch": "2.11.0", "transformers": "4.57.1", "load_s": 0.4, "class": "Qwen3ForCausalLM", "n": 15, "max_err": 2.5e-06, "ok": true}` + "\n"
				f["hf-load-random.json"] = `{"model": "x/export-random", "shards": 0, "device": "cpu", "dtype": "float32", "tol": 0.001, "ok": false, "error": "OSError: no file named model.safetensors"}` + "\n"
				f["parity-notf32.json"] = ParityReport{Backend: "cuda", Rows: []ParityRow{{Fixture: "qwen3-tiny", DType: "float32", OK: true, MaxLogProbErr: 3e-6, Tolerance: 1e-4, ArgmaxAgree: 1}}}
			},
			check: func(t *testing.T, r *GPUReport) {
				if len(r.HFLoad) != 2 || r.HFLoad[0].Name != "builtin" || !r.HFLoad[0].OK || r.HFLoad[0].Shards != 3 || r.HFLoad[1].OK {
					t.Errorf("hf load %+v", r.HFLoad)
				}
				if v := r.ParityVariants; len(v) != 1 || v[0].Name != "notf32" || v[0].Seconds != 41.5 || len(v[0].Rows) != 1 {
					t.Errorf("parity variants %+v", v)
				}
			},
			wantMD: []string{"| export loads in HF transformers, builtin | ✓ | 3 bf16 shards as Qwen3ForCausalLM (transformers 4.57.1, torch 2.11.0, cpu float32): log-prob error 2.5e-06",
				"| export loads in HF transformers, random | ✗ | 0 shards: OSError: no file named model.safetensors |",
				"| HF parity qwen3-tiny float32, notf32 (diagnostic) | ✓ | log-prob error 3e-06 (tolerance 1e-04), argmax 100%; the step took 42 s |"},
		},
		{
			name:   "op parity on two backends",
			status: allGood + "op-parity-go\t0\t0.1\nop-parity-cuda\t1\t3.0\n", wantOK: true, // a failed diagnostic step does not decide ok
			edit: func(f map[string]any) {
				f["op-parity-go.json"] = OpParityReport{Backend: "go", Rows: []OpRow{{Op: "exp", Shape: "[[4096]]", MaxRel: 7.3e-8, Ulps: 0.6, Worst: "element 1"}}}
				f["op-parity-cuda.json"] = OpParityReport{Backend: "cuda", Rows: []OpRow{{Op: "exp", Shape: "[[4096]]", MaxRel: 2.4e-7, Ulps: 2, Worst: "element 9"}, {Op: "sin", Error: "no kernel"}}}
			},
			check: func(t *testing.T, r *GPUReport) {
				if len(r.OpParity) != 2 || r.OpParity[0].Backend != "go" || len(r.OpParity[1].Rows) != 2 {
					t.Errorf("op parity %+v", r.OpParity)
				}
			},
			wantMD: []string{"| float32 exp on go against float64 (diagnostic) | ✓ | 7.3e-08 relative, 0.6 ulps (element 1) |",
				"| float32 exp on cuda against float64 (diagnostic) | ✓ | 2.4e-07 relative, 2.0 ulps (element 9) |",
				"| float32 sin on cuda against float64 (diagnostic) | ✗ | error: no kernel |"},
		},
		{
			// scripts/gpu-bench.sh's layout: rollouts tagged by model (a second start among them,
			// its programs loaded from the compilation cache), the update and the recipe step at
			// the large shape; each goal of issue #49 gets a row, held or not.
			name:   "gpu-bench: tagged rollouts, second start, phases, goals",
			status: "doctor\t0\t1\nrollout-small-64\t0\t60\nrollout-small-again-64\t0\t12\nrollout-large-64\t0\t90\nrun\t0\t80\ntrain\t0\t50\nparity\t0\t30\n",
			edit: func(f map[string]any) {
				delete(f, "rollout-1.json")
				delete(f, "rollout-64.json")
				tagged := func(model string, tps, ratio float64, programs, hits, misses int, compile time.Duration) bench.RolloutResult {
					return bench.RolloutResult{Model: model, BenchResult: &rollout.BenchResult{TokensPerSec: tps, StepMillis: 5, BytesPerSec: 1e12, CompileTime: compile},
						Bandwidth: 4.8e12, Compiles: compiles.Snapshot{Programs: programs, Seconds: compile.Seconds(), CacheHits: hits, CacheMisses: misses},
						Versus: bench.Versus{ReferenceTokensPerSec: tps / ratio, Ratio: ratio}}
				}
				f["rollout-small-64.json"] = tagged("qwen3-0.6b", 9000, 3.5, 5, 0, 5, 40*time.Second)
				again := tagged("qwen3-0.6b", 9100, 0, 5, 5, 0, 2500*time.Millisecond)
				again.Versus = bench.Versus{ReferenceSkipped: "--torch-python is empty"}
				f["rollout-small-again-64.json"] = again
				large := tagged("qwen3-4b:8", 3000, 2.5, 5, 0, 5, 70*time.Second)
				large.CompileCache = &device.CompileCacheStats{Dir: "c", Misses: 5, Failures: 5, LastFailure: "storing the executable: PJRT_Executable_Serialize: UNIMPLEMENTED\nmore"}
				f["rollout-large-64.json"] = large
				tr := f[TrainFile].(bench.TrainResult)
				tr.Model = "qwen3-4b:8"
				f[TrainFile] = tr
				f[RunEventsFile] = strings.Join([]string{
					`{"type":"run_start","backend":"cuda","model":"out/model"}`,
					`{"type":"phase","step":0,"phase":"eval","seconds":9}`,
					`{"type":"phase","step":1,"phase":"rollout","seconds":20}`,
					`{"type":"phase","step":1,"phase":"reference","seconds":3}`,
					`{"type":"phase","step":1,"phase":"train","seconds":15}`,
					`{"type":"phase","step":1,"phase":"sync","seconds":0.5}`,
					`{"type":"metrics","step":1,"metrics":{"switch_to_train_s":1},"compiles":{"decode":{"programs":4,"seconds":1,"cache_hits":4},"train":{"programs":1,"seconds":30,"cache_misses":1}}}`,
					`{"type":"run_end","status":"finished"}`,
				}, "\n")
			},
			wantOK: true,
			check: func(t *testing.T, r *GPUReport) {
				var tags []string
				for _, x := range r.Rollout {
					tags = append(tags, x.Tag)
				}
				if !slices.Equal(tags, []string{"small", "small-again", "large"}) || r.Rollout[1].CacheHits != 5 || r.Rollout[1].Model != "qwen3-0.6b" {
					t.Errorf("rollout rows %+v; want small, small-again (5 cache hits), large in the order they ran", r.Rollout)
				}
				u := r.Run
				want := []PhaseSeconds{{"rollout", 20}, {"reference", 3}, {"train", 15}, {"sync", 0.5}}
				if u == nil || !slices.Equal(u.Phases, want) || u.Compiled != (event.Compiled{Programs: 5, Seconds: 31, CacheHits: 4, CacheMisses: 1}) || u.Model != "out/model" {
					t.Errorf("run %+v; want phases %v (the evaluation before step 1 left out), 5 programs in 31 s, 4 loaded", u, want)
				}
			},
			wantMD: []string{
				"| bench rollout, qwen3-0.6b, batch 64 | ✓ | 9000 tokens/s",
				"| bench rollout, qwen3-0.6b, batch 64, second start | ✓ | 9100 tokens/s, 5.00 ms/step, 21% of the 4800 GB/s roofline; --torch-python is empty; compiled 5 programs in 2.5 s (cache: 5 loaded, 0 compiled) |",
				"| bench train, qwen3-4b:8, 8 × 1024 |",
				"model out/model; switch to train 1.00 s",
				"(rollout 20.0 s, reference 3.0 s, train 15.0 s, sync 0.5 s); compiled 5 programs in 31.0 s (cache: 4 loaded, 1 compiled)",
				"| goal: decode at batch 64 ≥ 3× HF generate, qwen3-0.6b | ✓ | 3.50× |",
				"| goal: decode at batch 64 ≥ 3× HF generate, qwen3-4b:8 | ✗ | 2.50× |",
				"| bench rollout, qwen3-4b:8, batch 64 | ✗ | 3000 tokens/s", "compiled 5 programs in 70.0 s (cache: 0 loaded, 5 compiled); 5 compilation cache failures, the last: storing the executable: PJRT_Executable_Serialize: UNIMPLEMENTED |",
				"| goal: a second start compiles in < 10 s, qwen3-0.6b | ✓ | compiled 5 programs in 2.5 s (cache: 5 loaded, 0 compiled), batch 64 |",
				"| goal: an update ≥ 1.0× PyTorch eager, qwen3-4b:8 | ✓ | 2.00× |",
			},
		},
		{name: "no status file", status: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := stepFiles(t)
			if tc.edit != nil {
				tc.edit(files)
			}
			dir := writeSteps(t, files, tc.status)
			for name, text := range tc.logs {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.wantErr {
				os.Remove(filepath.Join(dir, StatusFile))
			}
			r, err := BuildReport(dir)
			if (err != nil) != tc.wantErr {
				t.Fatalf("BuildReport: %v; want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if r.OK != tc.wantOK {
				t.Errorf("OK = %v; want %v", r.OK, tc.wantOK)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			md := r.Markdown()
			for _, want := range tc.wantMD {
				if !strings.Contains(md, want) {
					t.Errorf("markdown lacks %q:\n%s", want, md)
				}
			}
			if _, err := json.Marshal(r); err != nil {
				t.Error(err)
			}
		})
	}
}

// fakeNVML answers Read with used, rising by step each call.
type fakeNVML struct {
	ok         bool
	used, step uint64
}

func (f *fakeNVML) Available() (bool, string) {
	return f.ok, map[bool]string{false: "NVML unavailable"}[f.ok]
}
func (f *fakeNVML) Read() (device.Reading, bool) {
	if !f.ok {
		return device.Reading{}, false
	}
	f.used += f.step
	return device.Reading{UsedBytes: f.used, TotalBytes: 1 << 40}, true
}

func TestWatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nvml     *fakeNVML
		script   string
		wantCode int
		wantPeak bool
	}{
		{name: "GPU", nvml: &fakeNVML{ok: true, used: 1 << 30, step: 1 << 20}, script: "sleep 0.3", wantPeak: true},
		{name: "no GPU", nvml: &fakeNVML{}, script: "sleep 0.1"},
		{name: "the command fails", nvml: &fakeNVML{ok: true, step: 1}, script: "exit 3", wantCode: 3, wantPeak: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Watch(exec.Command("sh", "-c", tc.script), tc.nvml, 20*time.Millisecond)
			var ee *exec.ExitError
			if tc.wantCode != 0 && !errors.As(err, &ee) {
				t.Errorf("err = %v; want the exit error", err)
			} else if tc.wantCode == 0 && err != nil {
				t.Errorf("err = %v", err)
			}
			if p.ExitCode != tc.wantCode || p.Available != tc.nvml.ok {
				t.Errorf("peak %+v; want exit code %d, available %v", p, tc.wantCode, tc.nvml.ok)
			}
			if tc.wantPeak && (p.Samples == 0 || p.PeakUsed <= p.Baseline) {
				t.Errorf("peak %+v; want samples above the baseline", p)
			}
			if !tc.wantPeak && (p.Samples != 0 || p.PeakUsed != 0 || p.Reason == "") {
				t.Errorf("peak %+v; want no samples and the reason", p)
			}
		})
	}
}

func TestWriteRandomModel(t *testing.T) {
	tiny := filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tiny")
	builtin := filepath.Join("..", "..", "testdata", "builtin")
	qwenTok := filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer")
	for _, tc := range []struct {
		name    string
		o       RandomModel
		wantErr string
		files   []string
	}{
		{name: "the shape and tokenizer of a folder", o: RandomModel{Like: builtin}, files: []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}},
		{name: "a folder's shape, another tokenizer", o: RandomModel{Like: tiny, Tokenizer: filepath.Join(builtin, "tokenizer.json"), DType: safetensors.F32},
			files: []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}},
		{name: "the tokenizer is larger than the vocabulary", o: RandomModel{Like: tiny, Tokenizer: qwenTok}, wantErr: "more than the model's vocabulary"},
		{name: "shape and folder", o: RandomModel{Shape: "qwen3-0.6b", Like: tiny}, wantErr: "exactly one"},
		{name: "unknown shape", o: RandomModel{Shape: "qwen9-1t", Tokenizer: qwenTok}, wantErr: "unknown shape"},
		{name: "a shape without a tokenizer", o: RandomModel{Shape: "qwen3-0.6b"}, wantErr: "give a tokenizer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Out = filepath.Join(t.TempDir(), "model")
			err := WriteRandomModel(tc.o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				if _, err := os.Stat(filepath.Join(tc.o.Out, f)); err != nil {
					t.Error(err)
				}
			}
			c, err := model.ReadConfig(tc.o.Out)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := model.ReadConfig(tc.o.Like)
			if c.HiddenSize != want.HiddenSize || c.VocabSize != want.VocabSize || len(c.EOSTokenIDs) == 0 {
				t.Errorf("config %+v; want the shape of %s and end-of-sequence ids", c, tc.o.Like)
			}
			if _, err := model.LoadParams(tc.o.Out, c); err != nil {
				t.Errorf("the weights do not load: %v", err)
			}
		})
	}
}
