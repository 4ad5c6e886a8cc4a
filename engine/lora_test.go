package engine

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/residency"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// loraCheckpoint stores a checkpoint of a LoRA model whose B are random (as after training),
// the way the controller saves one, and returns the model and the store.
func loraCheckpoint(t *testing.T, l model.LoRA) (*model.Model, *store.Store) {
	t.Helper()
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &model.Config{Family: model.Qwen3, VocabSize: 40, HiddenSize: 16, IntermediateSize: 24, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 10000, MaxPositions: 64, DType: "float32"}
	p, err := model.WithLoRA(model.RandomParams(cfg, 4, 0.2), l, 6, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for i, s := range p.Specs {
		if strings.HasSuffix(s.Name, ".lora_B.weight") {
			v := make([]float32, s.Size())
			for j := range v {
				v[j] = float32(rng.NormFloat64() * 0.3)
			}
			p.Values[i] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
		}
	}
	m, err := model.New(b, p, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := p.Tensors(safetensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	ac, err := residency.AdapterConfig(l, "/models/tiny")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cp := &store.Checkpoint{Manifest: store.Manifest{Run: "r", Step: 3}, Weights: ts,
		FileData: map[string][]byte{"config.json": cfgJSON, store.AdapterConfigFile: ac}}
	if err := st.SaveCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	return m, st
}

// TestLoRAMergedExport: `export` of a LoRA checkpoint writes a plain HuggingFace folder whose
// logits equal the adapter model's (float32 rounding apart), without adapters or their config.
func TestLoRAMergedExport(t *testing.T) {
	for _, l := range []model.LoRA{
		{Rank: 4, Alpha: 16, Targets: model.LoRATargets()},
		{Rank: 2, Alpha: 3, Targets: []string{"v_proj", "up_proj"}},
	} {
		m, st := loraCheckpoint(t, l)
		dir := filepath.Join(t.TempDir(), "merged")
		if err := st.Export("r", 3, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, store.AdapterConfigFile)); err == nil {
			t.Errorf("rank %d: the merged folder has %s", l.Rank, store.AdapterConfigFile)
		}
		f, err := safetensors.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range f.Names() {
			if model.IsAdapter(name) {
				t.Errorf("rank %d: the merged folder holds adapter %s", l.Rank, name)
			}
		}
		merged, err := model.Load(m.Backend, dir, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		seq := []int32{1, 7, 3, 22, 39, 5, 5, 11, 2}
		want, err := m.Logits(seq)
		if err != nil {
			t.Fatal(err)
		}
		got, err := merged.Logits(seq)
		if err != nil {
			t.Fatal(err)
		}
		var worst, scale float64
		for i := range want {
			for j := range want[i] {
				worst = math.Max(worst, math.Abs(float64(got[i][j]-want[i][j])))
				scale = math.Max(scale, math.Abs(float64(want[i][j])))
			}
		}
		if worst > 1e-5*max(scale, 1) {
			t.Errorf("rank %d: merged logits differ from the adapter model's by %.3g (logits up to %.3g)", l.Rank, worst, scale)
		}
	}
}

// TestLoRAPEFTExport: `export --peft` writes adapter_config.json with the keys PEFT reads and
// adapter_model.safetensors with PEFT's key names and shapes (lora_A [r, in], lora_B [out, r]).
func TestLoRAPEFTExport(t *testing.T) {
	l := model.LoRA{Rank: 4, Alpha: 16, Targets: []string{"q_proj", "down_proj"}}
	_, st := loraCheckpoint(t, l)
	dir := filepath.Join(t.TempDir(), "peft")
	if err := st.ExportPEFT("r", 3, dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4.0, "lora_alpha": 16.0,
		"lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": false, "base_model_name_or_path": "/models/tiny",
		"target_modules": []any{"q_proj", "down_proj"}} {
		if got, _ := json.Marshal(cfg[key]); string(got) != mustJSON(t, want) {
			t.Errorf("adapter_config.json %s: got %s; want %s", key, got, mustJSON(t, want))
		}
	}
	f, err := safetensors.ReadFile(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{}
	for i := 0; i < 2; i++ {
		for _, m := range []struct {
			name     string
			out, in_ int
		}{{"self_attn.q_proj", 32, 16}, {"mlp.down_proj", 16, 24}} {
			pre := "base_model.model.model.layers." + string(rune('0'+i)) + "." + m.name
			want[pre+".lora_A.weight"] = []int{4, m.in_}
			want[pre+".lora_B.weight"] = []int{m.out, 4}
		}
	}
	if got := f.Names(); len(got) != len(want) {
		t.Errorf("tensors %v; want %d of them", got, len(want))
	}
	for name, shape := range want {
		tt, ok := f.Tensors[name]
		if !ok || !slices.Equal(tt.Shape, shape) {
			t.Errorf("tensor %s: present %v, shape %v; want shape %v", name, ok, tt, shape)
		}
	}
	// A run without adapters has nothing to write as PEFT.
	if err := st.SaveCheckpoint(&store.Checkpoint{Manifest: store.Manifest{Run: "full", Step: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.ExportPEFT("full", 1, t.TempDir()); err == nil || !strings.Contains(err.Error(), "without --peft") {
		t.Errorf("PEFT export of a full fine-tune: got %v; want an error saying to export without --peft", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoRAResumeMatchesUninterrupted: a LoRA run stopped after step 1 and resumed from its
// checkpoint (base, adapters, their AdamW moments, adapter_config.json) trains step 2 exactly as
// the run that never stopped; the rollout and trainer agree (the adapters are synced) throughout.
func TestLoRAResumeMatchesUninterrupted(t *testing.T) {
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(tok)
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool-baseline.yaml"), recipes.Options{IgnoreEnv: true, Overrides: map[string]string{
		"run.max_steps": "2", "rollout.tasks_per_step": "2", "rollout.group_size": "2", "rollout.max_turns": "2",
		"rollout.max_new_tokens": "10", "rollout.max_total_tokens": "128", "eval.every": "1", "eval.at_start": "false",
		"eval.heldout_tasks": "2", "eval.n_samples": "2", "eval.ks": "1,2", "checkpoint.every": "1",
		"env.tasks.train_size": "8", "env.tasks.heldout_size": "4", "early_stop.patience": "10", "train.lr": "0.01",
		"eval.validation_tasks": "2", "eval.validation_samples": "2", "train.lora.rank": "4", "train.lora.targets": "q_proj,v_proj,up_proj",
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run := func(id string, resume *store.Checkpoint, stopAfter int) map[int]map[event.Metric]float64 {
		policy, reference, err := residency.LoRAModels(backend, model.RandomParams(cfg, 1, 0.02), dtypes.Float32, r)
		if err != nil {
			t.Fatal(err)
		}
		events := make(chan event.Event, 1024)
		c, err := New(Options{Recipe: r, RunID: id, Policy: policy, Reference: reference, Tokenizer: tok, Store: st, Events: events,
			Resume: resume, ModelFiles: map[string][]byte{"config.json": []byte("{}")}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The reference is the policy's own base: moving "the reference copy" off the device
		// for rollout must leave the base the policy decodes with where it is.
		var all int64
		for _, v := range policy.Params.Values {
			all += int64(v.Memory())
		}
		if on := residency.DeviceBytes(policy.Params.Values); on != all {
			t.Errorf("%s: %d of the policy's %d weight bytes on the device after New; want all", id, on, all)
		}
		return runStoppedAfter(t, c, events, stopAfter, nil)
	}
	straight := run("straight", nil, 0)
	run("interrupted", nil, 1)
	cp, err := st.LoadCheckpoint("interrupted", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cp.FileData[store.AdapterConfigFile]; !ok {
		t.Errorf("the checkpoint has no %s", store.AdapterConfigFile)
	}
	var adapters, moments int
	for _, w := range cp.Weights {
		if model.IsAdapter(w.Name) {
			adapters++
		}
	}
	for _, m := range cp.Moments {
		if !model.IsAdapter(strings.TrimPrefix(strings.TrimPrefix(m.Name, "m."), "v.")) {
			t.Errorf("moment %s of a frozen parameter", m.Name)
		}
		moments++
	}
	if adapters != 6 || moments != 12 {
		t.Errorf("checkpoint: %d adapters and %d moments; want 6 and 12", adapters, moments)
	}
	resumed := run("interrupted", cp, 0)
	if _, again := resumed[1]; again {
		t.Error("the resumed run repeated step 1")
	}
	for _, k := range []event.Metric{"loss", "reward_mean", "grad_norm", "logprob_diff_max", "sync_diff_max", "lr"} {
		if straight[2][k] != resumed[2][k] {
			t.Errorf("step 2 %s: uninterrupted %v, resumed %v", k, straight[2][k], resumed[2][k])
		}
	}
	for step, m := range straight {
		if m["logprob_diff_max"] > 1e-4 || m["sync_diff_max"] != 0 {
			t.Errorf("step %d: logprob_diff_max %v, sync_diff_max %v; want the rollout in sync with the trainer", step, m["logprob_diff_max"], m["sync_diff_max"])
		}
	}
	if straight[2]["grad_norm"] == 0 {
		t.Error("step 2 has no gradient")
	}
}
