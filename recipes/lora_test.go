package recipes

import (
	"reflect"
	"testing"
)

// TestLoRAFields: train.lora's errors name the field, the value and what would fix it; --set
// overrides reach every key.
func TestLoRAFields(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		set        map[string]string
		want       string
	}{
		{"negative rank", "train:\n  lora:\n    rank: -4\n", nil,
			"bad.yaml:3: train.lora.rank: -4 is out of range; want at least 0"},
		{"no targets", "train:\n  lora:\n    rank: 8\n    targets: []\n", nil,
			"bad.yaml:4: train.lora.targets: is empty but train.lora.rank is 8; list projections such as [q_proj, v_proj], or set the rank to 0"},
		{"target twice", "train:\n  lora:\n    rank: 8\n    targets: [q_proj, v_proj, q_proj]\n", nil,
			`bad.yaml:4: train.lora.targets: lists "q_proj" twice`},
		{"unknown target from --set", "", map[string]string{"train.lora.rank": "8", "train.lora.targets": "q_proj,qkv_proj"},
			`bad.yaml: train.lora.targets (from override): "qkv_proj" is not a projection; want some of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj`},
		{"off with bad targets is fine", "train:\n  lora:\n    rank: 0\n    targets: []\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := loadInline(t, tc.yaml, Options{IgnoreEnv: true, Overrides: tc.set})
			if got != tc.want {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
	r, errText := loadInline(t, "", Options{IgnoreEnv: true, Overrides: map[string]string{"train.lora.rank": "16", "train.lora.alpha": "32"}})
	if errText != "" {
		t.Fatal(errText)
	}
	want := LoRA{Rank: 16, Alpha: 32, Targets: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}
	if !reflect.DeepEqual(r.Train.LoRA, want) {
		t.Errorf("--set rank and alpha: got %+v; want %+v (the default targets: every projection)", r.Train.LoRA, want)
	}
}
