package model

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"
)

func loraTestConfig() *Config {
	return &Config{Family: Qwen3, VocabSize: 32, HiddenSize: 16, IntermediateSize: 24, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true}
}

// TestLoRAStartsAsBase: with B = 0 the adapters add exactly zero, so a fresh LoRA model's logits
// equal the base model's to the bit; once B is not zero they differ, and the base-only view
// (Params.Base, the reference model) still computes the base.
func TestLoRAStartsAsBase(t *testing.T) {
	b := goBackend(t)
	cfg := loraTestConfig()
	base, err := New(b, RandomParams(cfg, 3, 0.2), Options{})
	if err != nil {
		t.Fatal(err)
	}
	lp, err := WithLoRA(RandomParams(cfg, 3, 0.2), LoRA{Rank: 4, Alpha: 8, Targets: LoRATargets()}, 9, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := New(b, lp, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := New(b, lp.Base(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq := []int32{1, 4, 9, 16, 25, 3, 7, 2}
	want, err := base.Logits(seq)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, m *Model, equal bool) {
		t.Helper()
		got, err := m.Logits(seq)
		if err != nil {
			t.Fatal(err)
		}
		same := true
		for i := range want {
			for j := range want[i] {
				same = same && got[i][j] == want[i][j]
			}
		}
		if same != equal {
			t.Errorf("%s: logits equal to the base's: %v; want %v", name, same, equal)
		}
	}
	check("LoRA model, B = 0", lm, true)
	rng := rand.New(rand.NewPCG(1, 2))
	for i, s := range lp.Specs {
		if strings.HasSuffix(s.Name, ".lora_B.weight") {
			v := make([]float32, s.Size())
			for j := range v {
				v[j] = float32(rng.NormFloat64() * 0.1)
			}
			lp.Values[i] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
		}
	}
	check("LoRA model, B ≠ 0", lm, false)
	check("the base view (reference)", ref, true)
}

// TestLoRAShapes: the adapters follow the base parameters, A [r, in] and B [out, r] per targeted
// projection, PEFT-named; only they are trainable.
func TestLoRAShapes(t *testing.T) {
	cfg := loraTestConfig()
	cfg.LoRA = LoRA{Rank: 4, Alpha: 8, Targets: []string{"down_proj", "q_proj"}}
	specs := ParamShapes(cfg)
	nBase := len(specs) - 2*2*cfg.NumLayers
	want := []ParamSpec{
		{"model.layers.0.self_attn.q_proj.lora_A.weight", []int{4, 16}},
		{"model.layers.0.self_attn.q_proj.lora_B.weight", []int{32, 4}},
		{"model.layers.0.mlp.down_proj.lora_A.weight", []int{4, 24}},
		{"model.layers.0.mlp.down_proj.lora_B.weight", []int{16, 4}},
	}
	for i, w := range want {
		got := specs[nBase+i]
		if got.Name != w.Name || len(got.Dims) != 2 || got.Dims[0] != w.Dims[0] || got.Dims[1] != w.Dims[1] {
			t.Errorf("spec %d: got %s %v; want %s %v", nBase+i, got.Name, got.Dims, w.Name, w.Dims)
		}
	}
	p := newParams(cfg)
	idx := p.TrainableIndices()
	if len(idx) != 8 || idx[0] != nBase {
		t.Errorf("trainable indices %v; want the 8 adapters from %d", idx, nBase)
	}
}

func TestLoRAValidate(t *testing.T) {
	all := LoRATargets()
	for _, tc := range []struct {
		l    LoRA
		want string // "" = valid
	}{
		{LoRA{}, ""},
		{LoRA{Rank: 8, Alpha: 16, Targets: all}, ""},
		{LoRA{Rank: -1}, "rank -1"},
		{LoRA{Rank: 8, Alpha: 0, Targets: all}, "alpha 0"},
		{LoRA{Rank: 8, Alpha: 16}, "no targets"},
		{LoRA{Rank: 8, Alpha: 16, Targets: []string{"qkv_proj"}}, `"qkv_proj" is not a projection`},
		{LoRA{Rank: 8, Alpha: 16, Targets: []string{"q_proj", "q_proj"}}, `"q_proj" is listed twice`},
	} {
		err := tc.l.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: got %v; want no error", tc.l, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: got %v; want an error containing %q", tc.l, err, tc.want)
		}
	}
}

// TestLoRASetAdapters: a checkpoint's adapters (Tensors, as saved) load into a fresh LoRA model
// of the same base, which then computes the same logits; other LoRA settings are refused by name.
func TestLoRASetAdapters(t *testing.T) {
	b := goBackend(t)
	cfg := loraTestConfig()
	l := LoRA{Rank: 2, Alpha: 4, Targets: []string{"k_proj", "gate_proj"}}
	saved, err := WithLoRA(RandomParams(cfg, 5, 0.2), l, 1, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range saved.Specs {
		if IsAdapter(s.Name) {
			v := make([]float32, s.Size())
			for j := range v {
				v[j] = float32(j%7-3) * 0.05
			}
			saved.Values[i] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
		}
	}
	ts, err := saved.Tensors("F32")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := WithLoRA(RandomParams(cfg, 5, 0.2), l, 2, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.SetAdapters(ts, "checkpoint r/3"); err != nil {
		t.Fatal(err)
	}
	seq := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	var logits [2][][]float32
	for k, p := range []*Params{saved, fresh} {
		m, err := New(b, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if logits[k], err = m.Logits(seq); err != nil {
			t.Fatal(err)
		}
	}
	for i := range logits[0] {
		for j := range logits[0][i] {
			if logits[0][i][j] != logits[1][i][j] {
				t.Fatalf("position %d, token %d: logit %v after loading the adapters; want %v", i, j, logits[1][i][j], logits[0][i][j])
			}
		}
	}
	other, err := WithLoRA(RandomParams(cfg, 5, 0.2), LoRA{Rank: 2, Alpha: 4, Targets: []string{"q_proj"}}, 2, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	err = other.SetAdapters(ts, "checkpoint r/3")
	if err == nil || !strings.Contains(err.Error(), "checkpoint r/3 has no LoRA adapter model.layers.0.self_attn.q_proj.lora_A.weight") {
		t.Errorf("adapters of other targets: got %v; want an error naming the checkpoint and the missing adapter", err)
	}
}
