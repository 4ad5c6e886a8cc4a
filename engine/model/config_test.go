package model

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseConfigFormats(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want Config
	}{
		{
			name: "transformers-5 qwen3 with rope_parameters",
			json: `{"model_type":"qwen3","vocab_size":512,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
				"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"rms_norm_eps":1e-6,"tie_word_embeddings":true,
				"rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"},"dtype":"float32","eos_token_id":null}`,
			want: Config{Family: Qwen3, VocabSize: 512, HiddenSize: 64, IntermediateSize: 128, NumLayers: 2, NumHeads: 4,
				NumKVHeads: 2, HeadDim: 16, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, DType: "float32"},
		},
		{
			name: "hub format qwen2: top-level rope_theta, torch_dtype, no head_dim, eos list",
			json: `{"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","vocab_size":151936,"hidden_size":896,
				"intermediate_size":4864,"num_hidden_layers":24,"num_attention_heads":14,"num_key_value_heads":2,
				"rms_norm_eps":1e-6,"rope_theta":1000000.0,"tie_word_embeddings":true,"torch_dtype":"bfloat16",
				"eos_token_id":[151645,151643],"bos_token_id":151643,"max_position_embeddings":32768}`,
			want: Config{Family: Qwen2, VocabSize: 151936, HiddenSize: 896, IntermediateSize: 4864, NumLayers: 24,
				NumHeads: 14, NumKVHeads: 2, HeadDim: 64, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true,
				AttentionBias: true, DType: "bfloat16", EOSTokenIDs: []int32{151645, 151643}, MaxPositions: 32768},
		},
		{
			name: "architecture only, untied, single eos",
			json: `{"architectures":["Qwen3ForCausalLM"],"vocab_size":100,"hidden_size":32,"intermediate_size":64,
				"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,"rope_theta":10000,
				"tie_word_embeddings":false,"eos_token_id":7}`,
			want: Config{Family: Qwen3, VocabSize: 100, HiddenSize: 32, IntermediateSize: 64, NumLayers: 1, NumHeads: 2,
				NumKVHeads: 1, HeadDim: 32, RMSNormEps: 1e-6, RopeTheta: 10000, DType: "float32", EOSTokenIDs: []int32{7}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			got.BOSTokenID = nil
			g, w := *got, tc.want
			if g.Family != w.Family || g.VocabSize != w.VocabSize || g.HiddenSize != w.HiddenSize ||
				g.IntermediateSize != w.IntermediateSize || g.NumLayers != w.NumLayers || g.NumHeads != w.NumHeads ||
				g.NumKVHeads != w.NumKVHeads || g.HeadDim != w.HeadDim || g.RMSNormEps != w.RMSNormEps ||
				g.RopeTheta != w.RopeTheta || g.TieWordEmbeddings != w.TieWordEmbeddings ||
				g.AttentionBias != w.AttentionBias || g.DType != w.DType || !slices.Equal(g.EOSTokenIDs, w.EOSTokenIDs) ||
				g.MaxPositions != w.MaxPositions {
				t.Errorf("got %+v\nwant %+v", g, w)
			}
			// JSON() → ParseConfig is a round trip.
			js, err := got.JSON()
			if err != nil {
				t.Fatal(err)
			}
			again, err := ParseConfig(js)
			if err != nil {
				t.Fatalf("re-parsing %s: %v", js, err)
			}
			again.BOSTokenID = nil
			if again.NumParams() != got.NumParams() || again.HeadDim != got.HeadDim || again.Family != got.Family {
				t.Errorf("round trip changed the config: %+v vs %+v", again, got)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	base := `"vocab_size":10,"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1`
	for _, tc := range []struct{ name, json, want string }{
		{"not json", `{`, "invalid config.json"},
		{"llama", `{"model_type":"llama",` + base + `}`, `model_type "llama" is not supported`},
		{"rope scaling", `{"model_type":"qwen3",` + base + `,"rope_scaling":{"rope_type":"yarn","factor":4}}`, `rope type "yarn"`},
		{"zero layers", `{"model_type":"qwen3","vocab_size":10,"hidden_size":8,"intermediate_size":8,"num_hidden_layers":0,"num_attention_heads":2}`, "num_hidden_layers is 0"},
		{"heads not multiple", `{"model_type":"qwen3","vocab_size":10,"hidden_size":12,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":3,"num_key_value_heads":2,"head_dim":4}`, "not a multiple"},
		{"gelu", `{"model_type":"qwen3",` + base + `,"hidden_act":"gelu"}`, `hidden_act "gelu"`},
		{"bad eos", `{"model_type":"qwen3",` + base + `,"eos_token_id":"x"}`, "eos_token_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestReadConfigMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadConfig(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) {
		t.Fatalf("got %v; want an error naming %s", err, filepath.Join(dir, "config.json"))
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadConfig(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("got %v; want an error naming the file", err)
	}
}

// TestParamCountsMatchFixtures: the fixtures' safetensors hold exactly the tensors ParamShapes lists.
func TestParamShapesMatchFixtureTensors(t *testing.T) {
	for _, name := range fixtureModels {
		cfg, err := ReadConfig(fixtureDir(name))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, s := range ParamShapes(cfg) {
			want[s.Name] = true
		}
		p, err := LoadParams(fixtureDir(name), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Values) != len(want) {
			t.Errorf("%s: %d params; want %d", name, len(p.Values), len(want))
		}
	}
}
