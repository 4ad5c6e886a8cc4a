package ledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"agentrl/recipes"
)

func TestKnownShapeParams(t *testing.T) {
	tests := []struct {
		name string
		want int64
		hub  float64 // the size the model card states, in billions
	}{
		{"qwen3-0.6b", 596_049_920, 0.596},
		{"qwen3-1.7b", 1_720_574_976, 1.72},
		{"qwen3-4b", 4_022_468_096, 4.02},
		{"qwen3-8b", 8_190_735_360, 8.19},
	}
	for _, tt := range tests {
		s, err := KnownShape(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Params()
		if got != tt.want {
			t.Errorf("%s: %d parameters; want %d", tt.name, got, tt.want)
		}
		if b := float64(got) / 1e9; b < tt.hub-0.005 || b > tt.hub+0.005 {
			t.Errorf("%s: %.3fB; the model card says %.2fB", tt.name, b, tt.hub)
		}
	}
	// The hub's 2.03B for Qwen3-1.7B counts the lm_head copy its safetensors store beside the
	// tied embedding: 1.72B + vocab × hidden.
	s, _ := KnownShape("qwen3-1.7b")
	if withCopy := s.Params() + int64(s.Vocab*s.Hidden); withCopy != 2_031_739_904 {
		t.Errorf("1.7B with the stored lm_head copy: %d; want 2031739904 (≈ 2.03B)", withCopy)
	}
	if _, err := KnownShape("QWEN3-4B"); err != nil {
		t.Errorf("shape names should be case-insensitive: %v", err)
	}
	if _, err := KnownShape("llama-7b"); err == nil || !strings.Contains(err.Error(), "known shapes: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b") {
		t.Errorf("got %v; want the known shapes listed", err)
	}
}

// TestKnownShapeLayers: NAME:LAYERS is the named shape's width at fewer layers — its parameters
// are the full shape's less the layers left out (hand-computed from the per-layer count), and its
// name keeps the suffix —, and a layer count out of range names the range.
func TestKnownShapeLayers(t *testing.T) {
	full, _ := KnownShape("qwen3-4b")
	one, _ := KnownShape("qwen3-4b:1")
	perLayer := full.Params() - one.Params() // 35 layers
	if perLayer%35 != 0 {
		t.Fatalf("36 layers less 1 layer: %d parameters, not a multiple of 35 layers", perLayer)
	}
	// per layer: q, k, v, o (2560×4096, 2×2560×1024, 4096×2560), MLP 3×2560×9728, norms 2×2560 + 2×128
	if want := int64(2560*4096 + 2*2560*1024 + 4096*2560 + 3*2560*9728 + 2*2560 + 2*128); perLayer/35 != want {
		t.Errorf("a 4B layer: %d parameters; want %d", perLayer/35, want)
	}
	for _, tc := range []struct {
		name, err string
		layers    int
	}{
		{"qwen3-4b:8", "", 8},
		{"Qwen3-0.6B:28", "", 28},
		{"qwen3-4b:0", "not a layer count from 1 to 36", 0},
		{"qwen3-4b:37", "not a layer count from 1 to 36", 0},
		{"qwen3-4b:x", "not a layer count from 1 to 36", 0},
		{"llama:4", "unknown shape", 0},
	} {
		s, err := KnownShape(tc.name)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || s.Layers != tc.layers || s.Name != strings.ToLower(tc.name) {
			t.Errorf("%s: %d layers, name %q, %v", tc.name, s.Layers, s.Name, err)
		}
	}
}

// safetensorsElements sums the element counts of a safetensors file's tensors (its header only).
func safetensorsElements(t *testing.T, path string) (total int64, names map[string]bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data[:8])
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	names = map[string]bool{}
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var info struct{ Shape []int64 }
		if err := json.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		size := int64(1)
		for _, d := range info.Shape {
			size *= d
		}
		total += size
		names[name] = true
	}
	return total, names
}

// The count formula agrees with real checkpoints of both families, tied and untied.
func TestParamsMatchFixtures(t *testing.T) {
	for _, dir := range []string{"qwen3-tiny", "qwen3-tiny-untied", "qwen2-tiny"} {
		path := filepath.Join("..", "..", "testdata", "fixtures", dir)
		s, err := ReadShape(path)
		if err != nil {
			t.Fatal(err)
		}
		want, names := safetensorsElements(t, filepath.Join(path, "model.safetensors"))
		if s.Tied && names["lm_head.weight"] {
			want -= int64(s.Vocab * s.Hidden) // a stored copy of the tied embedding
		}
		if got := s.Params(); got != want {
			t.Errorf("%s: Params() = %d; the safetensors hold %d", dir, got, want)
		}
	}
}

// tiny is a shape small enough to size by hand.
func tiny() Shape {
	return Shape{Name: "tiny", Family: "qwen3", Layers: 2, Hidden: 8, Intermediate: 16, Heads: 2, KVHeads: 1,
		HeadDim: 4, Vocab: 32, Tied: true}
}

func TestHandComputedComponents(t *testing.T) {
	sh := tiny()
	// embed 32·8 = 256; per layer: q 8·8 + k 8·4 + v 8·4 + o 8·8 = 192, MLP 3·8·16 = 384,
	// norms 2·8 = 16, q/k norms 2·4 = 8 → 600; two layers 1200; final norm 8: 1464.
	if got := sh.Params(); got != 1464 {
		t.Fatalf("Params = %d; want 1464", got)
	}
	// Per token per layer, bf16: (4·8 + 2·8 + 2·4 + 4·16 + 8 + 4) · 2 = 264 bytes, plus attention
	// probabilities 2 heads · 10 positions · (4+2) = 120: 384 bytes.
	// No checkpointing, T = 10: two layers 10·2·384 = 7680, in flight the larger of one layer
	// 10·384 = 3840 and two chunk buffers 2·10·32·4 = 2560, final norm 10·2·8·2 = 320, the saved
	// shifted logits 10·32·4 = 1280, the head's gradient for the hidden states in float32
	// 3·10·8·4 = 960: 14080.
	// Checkpointing: layer inputs 10·2·8·2 = 320, two layers 2·10·384 = 7680, final 320, head 960,
	// three chunk buffers 3840: 13120.
	// Fused attention keeps the softmax statistics instead of the probabilities, 2 heads · 4 = 8
	// bytes: 272 per token per layer; 10·2·272 + max(2720, 2560) + 320 + 1280 + 960 = 10720, and
	// with checkpointing 320 + 2·10·272 + 320 + 960 + 3840 = 10880.
	// Chunked attention in blocks of 4 keeps the packed q, k, v (+kv = 4 values, 8 bytes): 272 as
	// well, plus two blocks in flight of 2 heads · 4 queries · 10 keys at 8+2 bytes = 1600:
	// 10720 + 1600 = 12320.
	tests := []struct {
		name      string
		ckpt      bool
		attention string
		block     int
		want      map[string]int64
	}{
		{"no checkpointing", false, AttentionDense, 0, map[string]int64{
			InferenceWeights: 2928, ReferenceWeights: 2928, MasterWeights: 5856, Gradients: 5856,
			OptimizerMoments: 11712, Activations: 14080, Runtime: RuntimeReserve,
			KVCache: 2 * 2 * 1 * 4 * 10 * 3 * 2, // 2 · layers · kv heads · head_dim · len · slots · bytes = 960
		}},
		{"checkpointing", true, AttentionDense, 0, map[string]int64{Activations: 13120, KVCache: 960}},
		{"fused", false, "", 0, map[string]int64{Activations: 10720}}, // bf16: fused by default
		{"fused, checkpointing", true, AttentionFused, 0, map[string]int64{Activations: 10880}},
		{"chunked", false, AttentionChunked, 4, map[string]int64{Activations: 12320}},
	}
	for _, tt := range tests {
		st := Settings{ComputeBytes: 2, SeqLen: 10, KVSlots: 3, MicroBatch: 1, Offload: OffloadDevice,
			GradientCheckpointing: tt.ckpt, Reference: true, Attention: tt.attention, AttentionBlock: tt.block}
		p, err := Compute(sh, st, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range tt.want {
			if got := p.Components[name]; got != want {
				t.Errorf("%s: %s = %d; want %d", tt.name, name, got, want)
			}
		}
		// Phase totals are the sums of what each phase holds; the reference copy is on the device
		// only in the reference phase.
		wantTrain := p.Components[MasterWeights] + p.Components[Gradients] + p.Components[OptimizerMoments] +
			p.Train.Holds[Activations] + RuntimeReserve
		if p.Train.Bytes != wantTrain {
			t.Errorf("%s: train phase %d; want %d", tt.name, p.Train.Bytes, wantTrain)
		}
		wantRollout := p.Components[InferenceWeights] + p.Components[KVCache] +
			p.Components[MasterWeights] + p.Components[OptimizerMoments] + p.Components[SamplerWorkspace] + RuntimeReserve
		if p.Rollout.Bytes != wantRollout {
			t.Errorf("%s: rollout phase %d; want %d", tt.name, p.Rollout.Bytes, wantRollout)
		}
		wantRef := p.Components[ReferenceWeights] + p.Components[MasterWeights] + p.Components[OptimizerMoments] +
			p.Reference.Holds[Activations] + RuntimeReserve
		if p.Reference.Bytes != wantRef {
			t.Errorf("%s: reference phase %d; want %d", tt.name, p.Reference.Bytes, wantRef)
		}
		if p.Total != max(wantTrain, wantRollout, wantRef) {
			t.Errorf("%s: total %d; want the largest phase", tt.name, p.Total)
		}
	}
}

func realistic() Settings {
	return Settings{ComputeBytes: 2, SeqLen: 4096, MaxKVSlots: 256, MaxMicroBatch: 256, Offload: OffloadAuto,
		GradientCheckpointing: true, Reference: true}
}

func TestMoreBudgetNeverLess(t *testing.T) {
	for _, name := range []string{"qwen3-0.6b", "qwen3-4b"} {
		sh, _ := KnownShape(name)
		prev := &Plan{}
		for g := int64(4); g <= 320; g += 4 {
			budget := g << 30
			p, err := Compute(sh, realistic(), budget)
			if err != nil {
				t.Fatal(err)
			}
			if p.KVSlots < prev.KVSlots || p.MicroBatch < prev.MicroBatch || prev.Fits && !p.Fits {
				t.Errorf("%s at %d GiB: slots %d, micro %d, fits %v; at %d GiB less: %d, %d, %v",
					name, g, p.KVSlots, p.MicroBatch, p.Fits, g-4, prev.KVSlots, prev.MicroBatch, prev.Fits)
			}
			if p.Fits && p.Total > budget {
				t.Errorf("%s at %d GiB: fits but peak %d > budget", name, g, p.Total)
			}
			if p.Fits && p.KVSlots < 256 {
				// One more slot must not fit (the choice is the largest).
				more := realistic()
				more.KVSlots = p.KVSlots + 1
				if q, _ := Compute(sh, more, budget); q.Fits {
					t.Errorf("%s at %d GiB: chose %d slots but %d fit", name, g, p.KVSlots, p.KVSlots+1)
				}
			}
			prev = p
		}
		if !prev.Fits || prev.KVSlots != 256 {
			t.Errorf("%s at 320 GiB: %d slots (%s); want all 256", name, prev.KVSlots, prev.Reason)
		}
	}
}

func TestDoesNotFit(t *testing.T) {
	sh, _ := KnownShape("qwen3-4b")
	p, err := Compute(sh, realistic(), 24<<30)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fits || p.KVSlots != 0 || p.MicroBatch != 0 {
		t.Fatalf("4B in 24 GiB: fits %v, slots %d, micro %d; want neither phase to fit", p.Fits, p.KVSlots, p.MicroBatch)
	}
	// bf16 plans fused attention: no heads × S × 6 bytes per token and layer (32 × 4096 × 6 = 0.75 MiB),
	// so the reference forward (4096 tokens × one layer) is 3 GiB below the dense 28.75 GiB and the
	// checkpointed train phase (two layers' worth) 6 GiB below the dense 70.40 GiB.
	want := "the rollout phase needs 24.26 GiB at 1 KV slot but the budget is 24.00 GiB; its largest part is master_weights (14.98 GiB); " +
		"the reference phase needs 25.75 GiB at 1 sequence but the budget is 24.00 GiB; its largest part is master_weights (14.98 GiB); " +
		"the train phase needs 64.52 GiB at micro-batch 1 but the budget is 24.00 GiB; its largest part is optimizer_moments (29.97 GiB)"
	if p.Reason != want {
		t.Errorf("reason:\n%s\nwant:\n%s", p.Reason, want)
	}

	small, _ := KnownShape("qwen3-0.6b")
	fixed := realistic()
	fixed.KVSlots = 200
	p, err = Compute(small, fixed, 24<<30)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fits || p.KVSlots != 0 || !strings.Contains(p.Reason, "at 200 KV slots (fixed; at most 44 slots fit)") ||
		!strings.Contains(p.Reason, "largest part is kv_cache") {
		t.Errorf("fixed 200 slots in 24 GiB: fits %v, reason %q", p.Fits, p.Reason)
	}
	fixed = realistic()
	fixed.MicroBatch = 64
	p, _ = Compute(small, fixed, 24<<30)
	if p.Fits || p.MicroBatch != 0 || !strings.Contains(p.Reason, "at micro-batch 64 (fixed; at most 18 sequences fit)") || // 3 with dense attention
		!strings.Contains(p.Reason, "largest part is activations") {
		t.Errorf("fixed micro-batch 64 in 24 GiB: fits %v, reason %q", p.Fits, p.Reason)
	}
}

func TestOffload(t *testing.T) {
	sh, _ := KnownShape("qwen3-0.6b")
	moments := sh.Params() * 8
	tests := []struct {
		mode   string
		budget int64
		onHost bool
	}{
		{OffloadDevice, 24 << 30, false},
		{OffloadHost, 200 << 30, true},
		{OffloadAuto, 24 << 30, true},   // 256 slots do not fit: free the moments for slots
		{OffloadAuto, 200 << 30, false}, // everything fits with the moments resident
		{OffloadAuto, 0, false},         // unlimited
	}
	for _, tt := range tests {
		st := realistic()
		st.Offload = tt.mode
		p, err := Compute(sh, st, tt.budget)
		if err != nil {
			t.Fatal(err)
		}
		_, inRollout := p.Rollout.Holds[OptimizerMoments]
		if p.MomentsOnHost != tt.onHost || inRollout == tt.onHost {
			t.Errorf("%s at %d GiB: on host %v (in rollout %v); want on host %v", tt.mode, tt.budget>>30, p.MomentsOnHost, inRollout, tt.onHost)
		}
		// The reference copy waits on the host during rollout whatever the moments do.
		if ref := sh.Params() * 2; tt.onHost && p.HostBytes != moments+ref || !tt.onHost && p.HostBytes != ref {
			t.Errorf("%s: host bytes %d", tt.mode, p.HostBytes)
		}
		if p.Train.Holds[OptimizerMoments] != moments {
			t.Errorf("%s: the train phase must hold the moments on the device", tt.mode)
		}
	}
}

func TestJSONShape(t *testing.T) {
	sh, _ := KnownShape("qwen3-0.6b")
	p, err := Compute(sh, realistic(), 24<<30)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	js := buf.String()
	if !regexp.MustCompile(`^\{"fits":true,"kv_slots":\d+,"micro_batch":\d+,"components":\{[^}]*\},"total":\d+,`).MatchString(js) {
		t.Errorf("JSON does not start with fits, kv_slots, micro_batch, components, total:\n%s", js)
	}
	var got struct {
		Fits       *bool            `json:"fits"`
		KVSlots    *int             `json:"kv_slots"`
		MicroBatch *int             `json:"micro_batch"`
		Components map[string]int64 `json:"components"`
		Total      *int64           `json:"total"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Fits == nil || got.KVSlots == nil || got.MicroBatch == nil || got.Total == nil || *got.Total != p.Total {
		t.Errorf("decoded %+v", got)
	}
	var names []string
	for n := range got.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	var want []string
	for _, n := range componentOrder() {
		if n != PRMWeights && n != PRMKVCache && n != EvalKVCache { // only in a plan with a PRM or an eval phase
			want = append(want, n)
		}
	}
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("components %v; want %v", names, want)
	}
}

func TestTable(t *testing.T) {
	sh, _ := KnownShape("qwen3-4b")
	p, _ := Compute(sh, realistic(), 96<<30)
	tab := p.Table()
	for _, want := range []string{
		"memory plan: qwen3-4b (4.02B parameters, bf16 compute), sequences of 4096 tokens, budget 96.00 GiB",
		"                           rollout    reference        train",
		"  reference_weights           host     7.49 GiB         host  on the device only for the reference forward",
		"  optimizer_moments           host         host    29.97 GiB  on the host during rollout and the reference forward",
		"  kv_cache               72.00 GiB            -            -  128 slots × 4096 tokens",
		"host memory during rollout: 37.46 GiB",
		"options: moments on the host during rollout (auto); reference weights on the device only for the reference forward; gradient checkpointing",
		"fits: 128 KV slots (auto, at most 256), micro-batch 18 (auto, at most 256); peak 95.88 GiB in train", // 4 with dense attention
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	p, _ = Compute(sh, realistic(), 24<<30)
	if tab2 := p.Table(); !strings.Contains(tab2, "\ndoes not fit: the rollout phase needs 24.26 GiB") ||
		!strings.Contains(tab2, "1 slot × 4096 tokens") {
		t.Errorf("table of a plan that does not fit:\n%s", tab2)
	}
	for _, m := range regexp.MustCompile(`\d+\.\d+ GiB`).FindAllString(tab, -1) {
		if !regexp.MustCompile(`^\d+\.\d\d GiB$`).MatchString(m) {
			t.Errorf("%q is not GiB with two decimals", m)
		}
	}
}

func TestComputeRejectsBadInput(t *testing.T) {
	good := realistic()
	tests := []struct {
		name   string
		shape  Shape
		st     Settings
		budget int64
		want   string
	}{
		{"zero layers", Shape{Name: "x", Family: "qwen3", Hidden: 8, Intermediate: 8, Heads: 2, KVHeads: 1, HeadDim: 4, Vocab: 8},
			good, 0, "model shape x: layers is 0; want a positive number"},
		{"heads not a multiple", Shape{Name: "x", Family: "qwen3", Layers: 1, Hidden: 8, Intermediate: 8, Heads: 3, KVHeads: 2, HeadDim: 4, Vocab: 8},
			good, 0, "heads 3 is not a multiple of kv_heads 2"},
		{"unknown family", Shape{Name: "x", Family: "llama", Layers: 1, Hidden: 8, Intermediate: 8, Heads: 2, KVHeads: 1, HeadDim: 4, Vocab: 8},
			good, 0, `family "llama" is not one of qwen3, qwen2`},
		{"dtype bytes", tiny(), Settings{ComputeBytes: 3, SeqLen: 8, MaxKVSlots: 1, MaxMicroBatch: 1, Offload: "auto"}, 0,
			"compute bytes 3 is not 2 (bf16) or 4 (f32)"},
		{"offload", tiny(), Settings{ComputeBytes: 2, SeqLen: 8, MaxKVSlots: 1, MaxMicroBatch: 1, Offload: "cpu"}, 0,
			`offload "cpu" is not one of auto, device, host`},
		{"no length", tiny(), Settings{ComputeBytes: 2, MaxKVSlots: 1, MaxMicroBatch: 1, Offload: "auto"}, 0,
			"sequence length 0 is below 1"},
		{"negative budget", tiny(), good, -1, "memory budget -1 bytes is negative"},
	}
	for _, tt := range tests {
		_, err := Compute(tt.shape, tt.st, tt.budget)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestReadShape(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "config.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Qwen2 configs leave head_dim implicit: hidden / heads.
	q2 := write("q2", `{"model_type":"qwen2","hidden_size":896,"num_hidden_layers":24,"num_attention_heads":14,
		"num_key_value_heads":2,"intermediate_size":4864,"vocab_size":151936,"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`)
	s, err := ReadShape(q2)
	if err != nil {
		t.Fatal(err)
	}
	if s.HeadDim != 64 || s.ParamDType != "bfloat16" || !s.Tied || s.Name != "q2" {
		t.Errorf("got %+v", s)
	}
	// Qwen2.5-0.5B has 494,032,768 parameters.
	if got := s.Params(); got != 494_032_768 {
		t.Errorf("Qwen2.5-0.5B shape: %d parameters; want 494032768", got)
	}
	bad := write("bad", `{"model_type":"llama","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"vocab_size":8}`)
	if _, err := ReadShape(bad); err == nil || !strings.Contains(err.Error(), `family "llama" is not one of qwen3, qwen2`) {
		t.Errorf("got %v", err)
	}
	if _, err := ReadShape(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "none not found: give a model folder that holds config.json") {
		t.Errorf("got %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadShape(filepath.Join(dir, "empty")); err == nil || !strings.Contains(err.Error(), "the folder needs a HuggingFace config.json") {
		t.Errorf("got %v", err)
	}
	broken := write("broken", `{"model_type":`)
	if _, err := ReadShape(broken); err == nil || !strings.Contains(err.Error(), "invalid config.json") {
		t.Errorf("got %v", err)
	}
}

func loadRecipe(t *testing.T, overrides map[string]string) *recipes.Recipe {
	t.Helper()
	r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: overrides})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSettingsFor(t *testing.T) {
	r := loadRecipe(t, map[string]string{"train.grad_accumulation": "4"})
	st := SettingsFor(r, "cuda")
	want := Settings{ComputeBytes: 2, SeqLen: 512, MaxKVSlots: 64, MaxMicroBatch: 16, Offload: "auto", MasterOffload: "auto",
		OptimizerBits: 32, LoRATargets: "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", Reference: true,
		Attention: AttentionFused, SaveOptimizer: true, KeepBest: 1, KeepLast: 2, CheckpointsKept: 4}
	if st != want {
		t.Errorf("got %+v; want %+v", st, want)
	}
	if st := SettingsFor(loadRecipe(t, map[string]string{"model.attention": "dense"}), "cuda"); st.Attention != AttentionDense {
		t.Errorf("model.attention dense on cuda: attention %s; want the path asked", st.Attention)
	}
	if st := SettingsFor(r, "go"); st.ComputeBytes != 4 || st.Attention != AttentionChunked || !st.DeviceIsHost {
		t.Errorf("auto dtype on the go backend should be f32 with chunked attention at 512 tokens; got %d bytes, %s", st.ComputeBytes, st.Attention)
	}
	if st := SettingsFor(loadRecipe(t, map[string]string{"rollout.max_total_tokens": "256", "model.dtype": "f32"}), "cuda"); st.Attention != AttentionDense {
		t.Errorf("f32 on cuda at 256 tokens: attention %s; want dense (no fused op in f32, one block)", st.Attention)
	}
	base := loadRecipe(t, map[string]string{"algorithm.name": "ppo", "hinter.kind": "none", "prm.kind": "none",
		"reward.process": "0", "memory.kv_slots": "8", "train.micro_batch": "2", "model.dtype": "f32"})
	st = SettingsFor(base, "")
	if st.Reference || !st.ValueHead || st.KVSlots != 8 || st.MicroBatch != 2 || st.ComputeBytes != 4 {
		t.Errorf("ppo without KL: got %+v", st)
	}
}

func TestPlanFor(t *testing.T) {
	r := loadRecipe(t, nil)
	fixture := filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tiny")
	tests := []struct {
		name string
		req  Request
		want string // error substring; empty for success
	}{
		{"shape and budget", Request{Recipe: r, ShapeName: "qwen3-0.6b", VRAM: "24GiB"}, ""},
		{"built-in model", Request{Recipe: r, BuiltinModelDir: fixture, VRAM: "2GB"}, ""},
		{"detected memory", Request{Recipe: r, ModelDir: fixture, DetectedVRAM: 8 << 30}, ""},
		{"both shape and model", Request{Recipe: r, ShapeName: "qwen3-4b", ModelDir: fixture, VRAM: "24GiB"}, "give --shape qwen3-4b or --model"},
		{"no model", Request{Recipe: r, VRAM: "24GiB"}, "no model to plan for: give --model DIR or --shape NAME"},
		{"unknown shape", Request{Recipe: r, ShapeName: "qwen9", VRAM: "24GiB"}, `unknown shape "qwen9"`},
		{"auto without a reading", Request{Recipe: r, ShapeName: "qwen3-4b"}, "memory.vram is auto but no GPU memory reading is available; give a budget such as --vram 24GiB"},
		{"bad flag", Request{Recipe: r, ShapeName: "qwen3-4b", VRAM: "24G"}, `--vram: size "24G": unknown unit "G"`},
		{"no recipe", Request{ShapeName: "qwen3-4b"}, "no recipe given"},
	}
	for _, tt := range tests {
		p, err := PlanFor(tt.req)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v; want an error containing %q", tt.name, err, tt.want)
		case tt.want == "" && !p.Fits:
			t.Errorf("%s: does not fit: %s", tt.name, p.Reason)
		}
	}
}

// docs/memory.md's table: retool.yaml scaled to a realistic 4B run. UPDATE_GOLDEN=1 rewrites it.
func TestREADMEMatrix(t *testing.T) {
	r := loadRecipe(t, map[string]string{
		"rollout.tasks_per_step": "32", "rollout.group_size": "8", "rollout.max_new_tokens": "1024",
		"rollout.max_total_tokens": "4096", "train.gradient_checkpointing": "true", "model.dtype": "bf16",
	})
	var shapes []Shape
	for _, n := range []string{"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b"} {
		s, _ := KnownShape(n)
		shapes = append(shapes, s)
	}
	got, err := Matrix(shapes, []int64{24 << 30, 48 << 30, 96 << 30}, SettingsFor(r, "cuda"))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "readme_plan.md")
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if got != string(want) {
		t.Errorf("matrix changed (UPDATE_GOLDEN=1 to accept):\n%s\nwant:\n%s", got, want)
	}
}

// TestEvalOnly: an evaluation-only run's plan (agentrl-tui eval builds no trainer) holds the
// inference weights, the KV cache, the sampler and the runtime reserve alone, sized by hand on
// the tiny shape; a 4B model that cannot train in 24 GiB can be evaluated there, with the KV
// slots the budget leaves; LoRA and a reference in the recipe change nothing (a LoRA checkpoint
// is evaluated merged).
func TestEvalOnly(t *testing.T) {
	st := Settings{ComputeBytes: 2, SeqLen: 10, KVSlots: 3, MicroBatch: 1, Offload: OffloadDevice, Reference: true,
		Attention: AttentionDense, EvalOnly: true}
	p, err := Compute(tiny(), st, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{MasterWeights, Gradients, OptimizerMoments, Activations, ReferenceWeights, BaseWeights} {
		if b, ok := p.Components[name]; ok {
			t.Errorf("eval-only component %s = %d; want none", name, b)
		}
	}
	if p.Components[InferenceWeights] != 2928 || p.Components[KVCache] != 960 {
		t.Errorf("inference weights %d, KV cache %d; want 2928 and 960 (as a training plan's)", p.Components[InferenceWeights], p.Components[KVCache])
	}
	wantRollout := p.Components[InferenceWeights] + p.Components[KVCache] + p.Components[SamplerWorkspace] + RuntimeReserve
	if p.Rollout.Bytes != wantRollout || p.Total != wantRollout || p.Train.Bytes != 0 || p.Reference.Bytes != 0 || p.MicroBatch != 0 {
		t.Errorf("rollout %d, total %d, train %d, reference %d, micro-batch %d; want rollout = total = %d and nothing else",
			p.Rollout.Bytes, p.Total, p.Train.Bytes, p.Reference.Bytes, p.MicroBatch, wantRollout)
	}

	sh, _ := KnownShape("qwen3-4b")
	train, err := Compute(sh, realistic(), 24<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, lora := range []int{0, 16} {
		ev := realistic()
		ev.EvalOnly, ev.LoRARank = true, lora
		p, err := Compute(sh, ev, 24<<30)
		if err != nil {
			t.Fatal(err)
		}
		if train.Fits || !p.Fits || p.KVSlots < 1 || p.MicroBatch != 0 || p.Total > 24<<30 || p.MomentsOnHost || p.MasterOnHost {
			t.Errorf("4B in 24 GiB, LoRA rank %d: training fits %v; eval-only fits %v with %d slots, micro-batch %d, peak %d, offload %v/%v (%s); want only eval to fit, with slots and no trainer",
				lora, train.Fits, p.Fits, p.KVSlots, p.MicroBatch, p.Total, p.MomentsOnHost, p.MasterOnHost, p.Reason)
		}
		// The host loads one model, read as float32 (a LoRA checkpoint merged): no reference copy
		// beside it, as a training run loads.
		if want := sh.Params()*4 + HostReserve; p.Host.Load != want || train.Host.Load != 2*sh.Params()*4+HostReserve {
			t.Errorf("LoRA rank %d: host load %d for the evaluation, %d for training; want %d (one float32 model) and twice its weights",
				lora, p.Host.Load, train.Host.Load, want)
		}
		// The slots are the most that fit: one more would not.
		one := ev
		one.KVSlots = p.KVSlots + 1
		if p.KVSlots < ev.MaxKVSlots {
			if q, _ := Compute(sh, one, 24<<30); q.Fits {
				t.Errorf("LoRA rank %d: %d slots fit too; the plan chose %d", lora, one.KVSlots, p.KVSlots)
			}
		}
	}

	// The table and JSON show the one phase, no micro-batch and no checkpoints.
	ev := realistic()
	ev.EvalOnly = true
	p, _ = Compute(sh, ev, 24<<30)
	table := p.Table()
	for _, want := range []string{"evaluation only: no trainer", "disk: no checkpoints"} {
		if !strings.Contains(table, want) {
			t.Errorf("eval-only table lacks %q:\n%s", want, table)
		}
	}
	for _, not := range []string{" train ", "micro-batch", "activations", "master_weights", "checkpoint.keep"} {
		if strings.Contains(table, not) {
			t.Errorf("eval-only table shows %q:\n%s", not, table)
		}
	}
	if phases := p.phaseBytes(); len(phases) != 1 || phases["rollout"] != p.Total {
		t.Errorf("eval-only phases %v; want rollout alone at the total %d", phases, p.Total)
	}

	r := loadRecipe(t, nil)
	for _, evalOnly := range []bool{false, true} {
		p, err := PlanFor(Request{Recipe: r, ShapeName: "qwen3-4b", VRAM: "24GiB", EvalOnly: evalOnly})
		if err != nil {
			t.Fatal(err)
		}
		if p.Fits != evalOnly {
			t.Errorf("PlanFor qwen3-4b in 24 GiB, eval-only %v: fits %v (%s)", evalOnly, p.Fits, p.Reason)
		}
	}
}
