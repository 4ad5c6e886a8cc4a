package residency

import (
	"math"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/device"
	"agentrl/engine/model"
)

// TestInferenceModel: the model a generate-only command decodes with holds its weights in the
// compute dtype (bfloat16 here, as on a GPU) and gives the same logits, bit for bit, as the
// loaded model converting its float32 weights in every step; keep false frees the float32
// weights, keep true leaves them usable (in host memory).
func TestInferenceModel(t *testing.T) {
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &model.Config{Family: model.Qwen3, VocabSize: 64, HiddenSize: 32, IntermediateSize: 64, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositions: 128}
	seq := []int32{3, 17, 42, 5, 9, 63, 0, 11}
	for _, keep := range []bool{false, true} {
		m, err := model.New(b, model.RandomParams(cfg, 7, 0.05), model.Options{Compute: dtypes.BFloat16})
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.Logits(seq)
		if err != nil {
			t.Fatal(err)
		}
		gm, done, err := InferenceModel(m, keep)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range gm.Params.Values {
			if v.DType() != dtypes.BFloat16 {
				t.Fatalf("keep %v: inference weight %s is %s; want bfloat16", keep, gm.Params.Specs[i].Name, v.DType())
			}
		}
		got, err := gm.Logits(seq)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			for j := range want[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("keep %v: logit [%d][%d] = %v; the loaded model gives %v", keep, i, j, got[i][j], want[i][j])
				}
			}
		}
		for i, v := range m.Params.Values {
			if v.Ok() != keep {
				t.Errorf("keep %v: the loaded model's weight %s usable: %v", keep, m.Params.Specs[i].Name, v.Ok())
				break
			}
		}
		if keep { // still usable
			again, err := m.Logits(seq)
			if err != nil || math.Float32bits(again[0][0]) != math.Float32bits(want[0][0]) {
				t.Errorf("keep true: the loaded model after the copy: %v, %v", again[0][0], err)
			}
		}
		done()
		m.Close()
	}
}
