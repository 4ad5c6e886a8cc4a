package ledger

import (
	"path/filepath"
	"strings"
	"testing"

	"agentrl/recipes"
)

// tinyOptions are hand-sizable settings for tiny(): 10-token sequences, 3 slots, micro-batch 1.
func tinyOptions() Settings {
	return Settings{ComputeBytes: 2, SeqLen: 10, KVSlots: 3, MicroBatch: 1, Offload: OffloadDevice,
		MasterOffload: OffloadDevice, OptimizerBits: 32, Reference: true}
}

// What each phase holds under each option, in bytes, for tiny() (1464 parameters in 24 tensors:
// the embedding of 256, per layer q 64, k 32, v 32, o 64, gate, up and down 128 each, two norms of
// 8 and q/k norms of 4, and the final norm of 8). Activations, KV cache, sampler and runtime are
// the sizer's own (TestHandComputedComponents) and left out of the maps.
func TestOptionsHandComputed(t *testing.T) {
	const (
		params = 1464
		bf16   = 2 * params // inference or reference copy: 2928
		master = 4 * params // 5856
		f32m   = 8 * params // m and v in float32: 11712
		// 8-bit: every tensor here is ≤ 256 values, so one block of 256 bytes + a 4-byte scale per
		// tensor and moment: 24 tensors × 2 moments × 260 = 12480.
		bit8 = 24 * 2 * 260
		// LoRA rank 2 on q_proj and v_proj: per layer A_q 2·8 + B_q 8·2 + A_v 2·8 + B_v 4·2 = 56,
		// two layers: 112 trained parameters in 8 tensors.
		lora, loraT = 112, 8
	)
	type holds map[string]int64
	tests := []struct {
		name                 string
		set                  func(*Settings)
		rollout, ref, train  holds
		rolloutHost, refHost holds
		hostBytes            int64
	}{
		{"full fine-tune, everything on the device but the reference", func(*Settings) {},
			holds{InferenceWeights: bf16, MasterWeights: master, OptimizerMoments: f32m},
			holds{ReferenceWeights: bf16, MasterWeights: master, OptimizerMoments: f32m},
			holds{MasterWeights: master, Gradients: master, OptimizerMoments: f32m},
			holds{ReferenceWeights: bf16}, holds{}, bf16},
		{"master weights and moments on the host", func(s *Settings) { s.Offload, s.MasterOffload = OffloadHost, OffloadHost },
			holds{InferenceWeights: bf16},
			holds{ReferenceWeights: bf16},
			holds{MasterWeights: master, Gradients: master, OptimizerMoments: f32m},
			holds{ReferenceWeights: bf16, MasterWeights: master, OptimizerMoments: f32m},
			holds{MasterWeights: master, OptimizerMoments: f32m}, bf16 + master + f32m},
		{"8-bit moments", func(s *Settings) { s.OptimizerBits = 8 },
			holds{InferenceWeights: bf16, MasterWeights: master, OptimizerMoments: bit8},
			holds{ReferenceWeights: bf16, MasterWeights: master, OptimizerMoments: bit8},
			holds{MasterWeights: master, Gradients: master, OptimizerMoments: bit8},
			holds{ReferenceWeights: bf16}, holds{}, bf16},
		{"no reference", func(s *Settings) { s.Reference = false },
			holds{InferenceWeights: bf16, MasterWeights: master, OptimizerMoments: f32m},
			holds{},
			holds{MasterWeights: master, Gradients: master, OptimizerMoments: f32m},
			holds{}, holds{}, 0},
		{"LoRA: base shared, adapters trained, the reference is the base", func(s *Settings) { s.LoRARank, s.LoRATargets = 2, "q,v_proj" },
			holds{BaseWeights: bf16, InferenceWeights: 2 * lora, MasterWeights: 4 * lora, OptimizerMoments: 8 * lora},
			holds{BaseWeights: bf16, MasterWeights: 4 * lora, OptimizerMoments: 8 * lora},
			holds{BaseWeights: bf16, MasterWeights: 4 * lora, Gradients: 4 * lora, OptimizerMoments: 8 * lora},
			holds{}, holds{}, 0},
		{"LoRA with 8-bit moments", func(s *Settings) { s.LoRARank, s.LoRATargets, s.OptimizerBits = 2, "q_proj,v_proj", 8 },
			holds{BaseWeights: bf16, InferenceWeights: 2 * lora, MasterWeights: 4 * lora, OptimizerMoments: loraT * 2 * 260},
			holds{BaseWeights: bf16, MasterWeights: 4 * lora, OptimizerMoments: loraT * 2 * 260},
			holds{BaseWeights: bf16, MasterWeights: 4 * lora, Gradients: 4 * lora, OptimizerMoments: loraT * 2 * 260},
			holds{}, holds{}, 0},
	}
	sh := tiny()
	for _, tt := range tests {
		st := tinyOptions()
		tt.set(&st)
		p, err := Compute(sh, st, 0)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		check := func(phase string, got map[string]int64, want holds, skip ...string) {
			for _, n := range componentOrder() {
				if strings.Contains(strings.Join(skip, ","), n) {
					continue
				}
				if got[n] != want[n] {
					t.Errorf("%s: %s holds %s = %d; want %d", tt.name, phase, n, got[n], want[n])
				}
			}
		}
		sized := []string{KVCache, Activations, SamplerWorkspace, Runtime}
		check("rollout", p.Rollout.Holds, tt.rollout, sized...)
		check("reference", p.Reference.Holds, tt.ref, sized...)
		check("train", p.Train.Holds, tt.train, sized...)
		check("rollout host", p.Rollout.Host, tt.rolloutHost)
		check("reference host", p.Reference.Host, tt.refHost)
		if p.HostBytes != tt.hostBytes {
			t.Errorf("%s: host bytes %d; want %d", tt.name, p.HostBytes, tt.hostBytes)
		}
		// The reference forward: one 10-token sequence, one layer's temporaries per token and
		// three float32 chunks of 10 × 32 logits; LoRA adds x·A (rank 2 × 2 targets) per token
		// for the 3 layers a micro-batch keeps without checkpointing: 10 · 3 · 4 · 2 = 240 bytes.
		z := newSizer(sh, st)
		path, _ := z.attention() // fused: bf16, Attention unset
		if st.Reference && p.Reference.Holds[Activations] != 10*(z.layerBytes(path, 10)+2*8*2)+3*10*32*4 {
			t.Errorf("%s: reference activations %d", tt.name, p.Reference.Holds[Activations])
		}
		if extra := p.Train.Holds[Activations] - z.activations(1); st.LoRARank > 0 && extra != 240 || st.LoRARank == 0 && extra != 0 {
			t.Errorf("%s: LoRA activations %d; want 240 with adapters, else 0", tt.name, extra)
		}
	}
}

func TestMomentBytes(t *testing.T) {
	z := sizer{st: Settings{OptimizerBits: 8}}
	for _, tt := range []struct{ n, want int64 }{
		{1, 260}, {256, 260}, {257, 520}, {2560, 2600}, {2560 * 9728, 97280 * 260},
	} {
		if got := z.momentBytes(tt.n); got != tt.want {
			t.Errorf("8-bit moment of %d values: %d bytes; want %d", tt.n, got, tt.want)
		}
	}
	z.st.OptimizerBits = 32
	if got := z.momentBytes(1000); got != 4000 {
		t.Errorf("float32 moment of 1000 values: %d; want 4000", got)
	}
	// The per-tensor list adds up to the parameter count, for both families.
	for _, sh := range []Shape{tiny(), KnownShapes()["qwen3-4b"], {Name: "q2", Family: "qwen2", Layers: 24, Hidden: 896,
		Intermediate: 4864, Heads: 14, KVHeads: 2, HeadDim: 64, Vocab: 151936, Tied: true}} {
		var sum int64
		for _, n := range sh.tensorSizes() {
			sum += n
		}
		if sum != sh.Params() {
			t.Errorf("%s: tensor sizes add up to %d; Params() is %d", sh.Name, sum, sh.Params())
		}
	}
}

// Auto moves the moments first and the master weights only when that is still not enough.
func TestMasterOffloadAuto(t *testing.T) {
	sh, _ := KnownShape("qwen3-4b")
	st := realistic()
	st.MasterOffload = OffloadAuto
	everything, _ := Compute(sh, st, 0)
	z := newSizer(sh, st)
	all := everything.Rollout.Bytes // 256 slots with both on the device
	tests := []struct {
		name                string
		budget              int64
		momentsOff, master  bool
		offload, masterMode string
	}{
		{"unlimited", 0, false, false, OffloadAuto, OffloadAuto},
		{"everything fits", all, false, false, OffloadAuto, OffloadAuto},
		{"moments are enough", all - z.moments(), true, false, OffloadAuto, OffloadAuto},
		{"both needed", all - z.moments() - 1, true, true, OffloadAuto, OffloadAuto},
		{"moments pinned on the device", all - z.master(), false, true, OffloadDevice, OffloadAuto},
		{"master pinned on the device", all - z.moments() - 1, true, false, OffloadAuto, OffloadDevice},
		{"host asked for", 0, true, true, OffloadHost, OffloadHost},
	}
	for _, tt := range tests {
		s := st
		s.Offload, s.MasterOffload = tt.offload, tt.masterMode
		p, err := Compute(sh, s, tt.budget)
		if err != nil {
			t.Fatal(err)
		}
		if p.MomentsOnHost != tt.momentsOff || p.MasterOnHost != tt.master {
			t.Errorf("%s: moments on host %v, master on host %v; want %v, %v", tt.name, p.MomentsOnHost, p.MasterOnHost, tt.momentsOff, tt.master)
		}
		if _, in := p.Rollout.Holds[MasterWeights]; in == tt.master {
			t.Errorf("%s: rollout holds the master weights: %v", tt.name, in)
		}
		if p.Train.Holds[MasterWeights] != z.master() {
			t.Errorf("%s: the update must hold the master weights on the device", tt.name)
		}
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, tt := range []struct {
		set  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.MasterOffload = "cpu" }, `master offload "cpu" is not one of auto, device, host`},
		{func(s *Settings) { s.OptimizerBits = 16 }, "optimizer bits 16 is not 32 or 8"},
		{func(s *Settings) { s.LoRARank = -1 }, "lora rank -1 is negative"},
		{func(s *Settings) { s.LoRARank, s.LoRATargets = 4, "q,lm_head" }, `lora target "lm_head" is not one of q_proj`},
	} {
		st := tinyOptions()
		tt.set(&st)
		if _, err := Compute(tiny(), st, 0); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v; want an error containing %q", err, tt.want)
		}
	}
}

func TestOptionsInTable(t *testing.T) {
	r := loadRecipe(t, map[string]string{"train.lora.rank": "8", "train.lora.targets": "q_proj,v_proj", "train.optimizer_bits": "8",
		"memory.master_offload": "host"})
	st := SettingsFor(r, "cuda")
	if st.LoRARank != 8 || st.LoRATargets != "q_proj,v_proj" || st.OptimizerBits != 8 || st.MasterOffload != "host" {
		t.Fatalf("settings %+v", st)
	}
	sh, _ := KnownShape("qwen3-4b")
	p, err := Compute(sh, st, 24<<30)
	if err != nil {
		t.Fatal(err)
	}
	tab := p.Table()
	for _, want := range []string{
		// rank 8 × (2560 + 4096) on q_proj + 8 × (2560 + 1024) on v_proj = 81,920 per layer, × 36 layers.
		"options: LoRA rank 8 on q_proj,v_proj (2.9M trained parameters; base shared by every phase); 8-bit AdamW moments (blocks of 256); master weights on the host during rollout (host)",
		"  base_weights            7.49 GiB     7.49 GiB     7.49 GiB  LoRA's frozen base, shared by every phase",
		"  master_weights              host         host     0.01 GiB  on the host during rollout and the reference forward",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if strings.Contains(tab, "reference_weights") {
		t.Errorf("a LoRA plan holds no reference copy:\n%s", tab)
	}
}

// The acceptance facts of the seed's recipes (issue #23): Qwen3-4B with 16,384-token trajectories
// fits 96 GiB with ≥ 32 KV slots (full fine-tune) and 48 GiB with ≥ 16 (LoRA); LoRA fits 24 GiB with
// ≥ 8 slots of 8,192 tokens.
func TestSeedRecipesFit(t *testing.T) {
	tests := []struct {
		recipe   string
		vram     string
		set      map[string]string
		minSlots int
	}{
		{"retool-qwen3-4b.yaml", "96GiB", nil, 32},
		{"retool-qwen3-4b-lora.yaml", "48GiB", nil, 16},
		{"retool-qwen3-4b-lora.yaml", "24GiB", map[string]string{"rollout.max_total_tokens": "8192"}, 8},
	}
	for _, tt := range tests {
		r, err := recipes.Load(filepath.Join("..", "..", "recipes", tt.recipe), recipes.Options{IgnoreEnv: true, Overrides: tt.set, NoDataFiles: true})
		if err != nil {
			t.Fatal(err)
		}
		p, err := PlanFor(Request{Recipe: r, ShapeName: "qwen3-4b", VRAM: tt.vram})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Fits || p.KVSlots < tt.minSlots {
			t.Errorf("%s at %s (%v): fits %v with %d slots of %d tokens; want ≥ %d slots: %s\n%s",
				tt.recipe, tt.vram, tt.set, p.Fits, p.KVSlots, p.Settings.SeqLen, tt.minSlots, p.Reason, p.Table())
		}
	}
}

// The seed's recipe with its model PRM (a separate Qwen3-4B-Instruct writing up to 4,096 tokens
// after reading a whole 16K trajectory) fits 96 GiB as its own phase, without costing rollout
// any of the ≥ 32 KV slots the seed recipe needs; the PRM as the reference shares its weights.
func TestSeedRecipePRMFits(t *testing.T) {
	for _, model := range []string{"models/Qwen3-4B-Instruct-2507", "reference"} {
		r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool-qwen3-4b.yaml"), recipes.Options{IgnoreEnv: true, NoDataFiles: true,
			Overrides: map[string]string{"prm.model": model}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := PlanFor(Request{Recipe: r, ShapeName: "qwen3-4b", VRAM: "96GiB"})
		if err != nil {
			t.Fatal(err)
		}
		if !p.Fits || p.KVSlots < 32 || p.PRMSlots < 16 || p.PRM.Holds[PRMKVCache] == 0 || p.Settings.PRM.SeqLen != 16384+1024+4096 {
			t.Errorf("prm.model %s: fits %v, %d slots, %d PRM slots of %d tokens: %s\n%s", model, p.Fits, p.KVSlots, p.PRMSlots, p.Settings.PRM.SeqLen, p.Reason, p.Table())
		}
		own := model != "reference"
		if _, ok := p.PRM.Holds[PRMWeights]; ok != own {
			t.Errorf("prm.model %s: the PRM phase holds weights of its own: %v; want %v", model, ok, own)
		}
		if _, ok := p.Rollout.Host[PRMWeights]; ok != own || !strings.Contains(p.Table(), "prm_kv_cache") {
			t.Errorf("prm.model %s: own PRM weights wait on the host in rollout: %v; want %v\n%s", model, ok, own, p.Table())
		}
	}
}
