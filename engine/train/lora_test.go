package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/device"
	"agentrl/engine/model"
)

// loraPair builds the tiny model twice from one seed: plain, and with rank-2 adapters on every
// projection whose B is random (not zero), so that both adapter gradients are non-trivial.
func loraPair(t *testing.T, seed uint64) (plain, lora *model.Model) {
	t.Helper()
	plain = tinyModel(t, seed)
	p, err := model.WithLoRA(model.RandomParams(plain.Config, seed, 0.1), model.LoRA{Rank: 2, Alpha: 3, Targets: model.LoRATargets()}, 5, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for i, s := range p.Specs {
		if strings.HasSuffix(s.Name, ".lora_B.weight") {
			v := make([]float32, s.Size())
			for j := range v {
				v[j] = float32(rng.NormFloat64() * 0.2)
			}
			p.Values[i] = tensors.FromFlatDataAndDimensions(v, s.Dims...)
		}
	}
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	if lora, err = model.New(b, p, model.Options{}); err != nil {
		t.Fatal(err)
	}
	return plain, lora
}

func hostValues(t *testing.T, ts []*tensors.Tensor) [][]float32 {
	t.Helper()
	out := make([][]float32, len(ts))
	for i, x := range ts {
		out[i] = tensors.MustCopyFlatData[float32](x)
	}
	return out
}

// TestLoRAGradientIsProjected: the adapters' gradients are the full model's gradient at the
// merged weights W + s·B·A carried through the product: ∂L/∂A = s·Bᵀ·G and ∂L/∂B = s·G·Aᵀ,
// with G = ∂L/∂W of the plain model whose projections hold the merged weights.
func TestLoRAGradientIsProjected(t *testing.T) {
	plain, lora := loraPair(t, 31)
	scale := lora.Config.LoRA.Scale()
	lv := hostValues(t, lora.Params.Values)
	idx := map[string]int{}
	for i, s := range lora.Params.Specs {
		idx[s.Name] = i
	}
	// The plain model gets the merged weights.
	merged := make([]*tensors.Tensor, len(plain.Params.Specs))
	for i, s := range plain.Params.Specs {
		w := slices.Clone(lv[i])
		if a, ok := idx[model.LoRAName(s.Name, "A")]; ok {
			out, in, r := s.Dims[0], s.Dims[1], lora.Params.Specs[a].Dims[0]
			av, bv := lv[a], lv[idx[model.LoRAName(s.Name, "B")]]
			for o := 0; o < out; o++ {
				for k := 0; k < r; k++ {
					for j := 0; j < in; j++ {
						w[o*in+j] += float32(scale) * bv[o*r+k] * av[k*in+j]
					}
				}
			}
		}
		merged[i] = tensors.FromFlatDataAndDimensions(w, s.Dims...)
	}
	trP, err := New(plain, Config{KLCoef: 0.05, EntropyCoef: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	trL, err := New(lora, Config{KLCoef: 0.05, EntropyCoef: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	b := gradBatch(t, trP, tinyModel(t, 32))
	lossP, gP := lossAndGrad(t, trP, merged, b)
	lossL, gL := lossAndGrad(t, trL, lora.Params.Values, b)
	if math.Abs(lossP-lossL) > 1e-5 {
		t.Fatalf("loss %.7f with adapters, %.7f merged; want equal", lossL, lossP)
	}
	var worst, norm float64
	for i, s := range plain.Params.Specs {
		a, ok := idx[model.LoRAName(s.Name, "A")]
		if !ok {
			continue
		}
		bi := idx[model.LoRAName(s.Name, "B")]
		out, in, r := s.Dims[0], s.Dims[1], lora.Params.Specs[a].Dims[0]
		g, av, bv := gP[i], lv[a], lv[bi]
		for k := 0; k < r; k++ {
			for j := 0; j < in; j++ { // ∂L/∂A[k, j] = s·Σ_o B[o, k]·G[o, j]
				var want float64
				for o := 0; o < out; o++ {
					want += scale * float64(bv[o*r+k]) * float64(g[o*in+j])
				}
				worst = math.Max(worst, math.Abs(float64(gL[a][k*in+j])-want))
				norm = math.Max(norm, math.Abs(want))
			}
		}
		for o := 0; o < out; o++ {
			for k := 0; k < r; k++ { // ∂L/∂B[o, k] = s·Σ_j G[o, j]·A[k, j]
				var want float64
				for j := 0; j < in; j++ {
					want += scale * float64(g[o*in+j]) * float64(av[k*in+j])
				}
				worst = math.Max(worst, math.Abs(float64(gL[bi][o*r+k])-want))
				norm = math.Max(norm, math.Abs(want))
			}
		}
	}
	t.Logf("loss %.6f; largest adapter gradient %.3g, largest difference from the projection %.3g", lossL, norm, worst)
	if norm == 0 || worst > 1e-4*norm+1e-6 {
		t.Errorf("adapter gradients differ from the projected full gradient by up to %.3g (largest %.3g)", worst, norm)
	}
}

// TestLoRATrainsAdaptersOnly: SFT steps on a fixed batch lower its loss, change every B (from
// zero) and leave the base bit for bit; the optimizer holds moments for the adapters only.
func TestLoRATrainsAdaptersOnly(t *testing.T) {
	plain := tinyModel(t, 41)
	p, err := model.WithLoRA(model.RandomParams(plain.Config, 41, 0.1), model.LoRA{Rank: 4, Alpha: 8, Targets: model.LoRATargets()}, 2, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(plain.Backend, p, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(m, Config{LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	nAdapters := 2 * 7 * m.Config.NumLayers
	if mom, vel, _ := tr.Moments(); len(mom) != nAdapters || len(vel) != nAdapters || len(tr.TrainedSpecs()) != nAdapters {
		t.Fatalf("%d and %d moments for %d trained specs; want %d each", len(mom), len(vel), len(tr.TrainedSpecs()), nAdapters)
	}
	before := hostValues(t, m.Params.Values)
	seqs := func() []Sequence {
		var out []Sequence
		for i := 0; i < 4; i++ {
			tok := []int32{1, int32(2 + i), 3, 4, int32(5 + i), 6, 7, 8}
			mask := []bool{false, false, true, true, true, true, true, true}
			out = append(out, Sequence{Tokens: tok, LossMask: mask})
		}
		return out
	}
	var losses []float64
	for step := 0; step < 5; step++ {
		nll, err := tr.SFTStep(seqs(), 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, nll)
	}
	if !(losses[4] < losses[0]-0.05) {
		t.Errorf("SFT losses %v; want the last well below the first", losses)
	}
	after := hostValues(t, m.Params.Values)
	for i, s := range m.Params.Specs {
		same := slices.Equal(before[i], after[i])
		switch {
		case !model.IsAdapter(s.Name) && !same:
			t.Errorf("base parameter %s changed", s.Name)
		case strings.HasSuffix(s.Name, ".lora_B.weight") && same:
			t.Errorf("adapter %s did not change", s.Name)
		}
	}
}
