package residency

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/train"
	"agentrl/store/safetensors"
)

// TestCheckpointTensorsRoundTrip: the AdamW moments and ppo's value head a checkpoint stores
// (MomentTensors, ValueHeadTensors) load into another trainer as they were (RestoreMoments,
// RestoreValueHead), the update count with them; a checkpoint without moments leaves the
// trainer's, and one that lacks a moment of a trained tensor is refused by name.
func TestCheckpointTensorsRoundTrip(t *testing.T) {
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &model.Config{Family: model.Qwen3, VocabSize: 64, HiddenSize: 32, IntermediateSize: 64, NumLayers: 1,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositions: 128}
	trainer := func() *train.Trainer {
		m, err := model.New(b, model.RandomParams(cfg, 7, 0.05), model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.New(m, train.Config{ValueCoef: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	src, dst := trainer(), trainer()
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(dims []int) *tensors.Tensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = rng.Float32()
		}
		return tensors.FromFlatDataAndDimensions(vals, dims...)
	}
	var m, v []*tensors.Tensor
	for _, s := range src.TrainedSpecs() {
		m, v = append(m, noise(s.Dims)), append(v, noise(s.Dims))
	}
	if err := src.SetMoments(m, v, 5); err != nil {
		t.Fatal(err)
	}
	head, err := ValueHeadTensors(src, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(head) != 6 { // weight and bias, each with two moments
		t.Fatalf("%d value-head tensors; want 6", len(head))
	}
	var saved []*safetensors.Tensor
	next := MomentTensors(src, true, head)
	for {
		st, err := next()
		if err != nil {
			t.Fatal(err)
		}
		if st == nil {
			break
		}
		saved = append(saved, st)
	}
	if want := 2*len(src.TrainedSpecs()) + len(head); len(saved) != want {
		t.Fatalf("%d tensors saved; want %d", len(saved), want)
	}
	if err := RestoreMoments(dst, saved, 5, "test"); err != nil {
		t.Fatal(err)
	}
	if err := RestoreValueHead(dst, saved, "test"); err != nil {
		t.Fatal(err)
	}
	flat := func(ts []*tensors.Tensor) [][]float32 {
		var out [][]float32
		for _, x := range ts {
			d, err := tensors.CopyFlatData[float32](x)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
	gm, gv, step := dst.Moments()
	wm, wv, _ := src.Moments()
	if step != 5 || !slices.EqualFunc(flat(gm), flat(wm), slices.Equal) || !slices.EqualFunc(flat(gv), flat(wv), slices.Equal) {
		t.Errorf("moments restored at update %d differ from those saved (update 5)", step)
	}
	_, gh, ghm, _ := dst.ValueHead()
	_, wh, whm, _ := src.ValueHead()
	if !slices.EqualFunc(flat(gh), flat(wh), slices.Equal) || !slices.EqualFunc(flat(ghm), flat(whm), slices.Equal) {
		t.Error("the value head restored differs from the one saved")
	}

	if err := RestoreMoments(dst, head, 9, "test"); err != nil { // the value head alone: no moments saved
		t.Fatal(err)
	}
	if _, _, step := dst.Moments(); step != 5 {
		t.Errorf("a checkpoint without moments set the update count to %d", step)
	}
	if err := RestoreMoments(dst, saved[:1], 5, "checkpoint r/1"); err == nil || !strings.Contains(err.Error(), "checkpoint r/1: optimizer moment v.") {
		t.Errorf("a missing moment: %v; want it named", err)
	}
}
