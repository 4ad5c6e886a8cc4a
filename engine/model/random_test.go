package model

import (
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/core/tensors"
)

// TestRandomParamsParallel: the weights are the same on one core as on four (each block of a
// tensor has its own stream), norms are ones, every matrix is drawn with the asked deviation
// (sample std within 2 % of 0.02 over ≥ 8 k values, mean within 4 standard errors of 0), blocks of
// one tensor and equal-shaped tensors differ, and another seed gives other weights.
func TestRandomParamsParallel(t *testing.T) {
	c := &Config{Family: Qwen3, VocabSize: 2048, HiddenSize: 640, IntermediateSize: 1024, NumLayers: 2, NumHeads: 4,
		NumKVHeads: 2, HeadDim: 160, TieWordEmbeddings: true, RMSNormEps: 1e-6, RopeTheta: 1e6}
	draw := func(procs int, seed uint64) map[string][]float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		p := RandomParamsParallel(c, seed, 0.02)
		out := map[string][]float32{}
		for i, s := range p.Specs {
			out[s.Name] = tensors.MustCopyFlatData[float32](p.Values[i])
		}
		return out
	}
	one, four, other := draw(1, 1), draw(4, 1), draw(4, 2)
	for name, v := range one {
		if !slices.Equal(v, four[name]) {
			t.Errorf("%s differs between one core and four", name)
		}
		if isNormName(name) {
			if slices.ContainsFunc(v, func(x float32) bool { return x != 1 }) {
				t.Errorf("%s: a norm weight is not 1", name)
			}
			continue
		}
		var sum, sq float64
		for _, x := range v {
			sum += float64(x)
			sq += float64(x) * float64(x)
		}
		n := float64(len(v))
		mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		if math.Abs(std-0.02) > 0.02*0.02 || math.Abs(mean) > 4*0.02/math.Sqrt(n) {
			t.Errorf("%s: mean %.2e, std %.5f over %d values; want 0 and 0.02", name, mean, std, len(v))
		}
		if slices.Equal(v, other[name]) {
			t.Errorf("%s: seed 2 gives seed 1's weights", name)
		}
	}
	emb := one[nameEmbed] // 2048 × 640 = 1.3 M values: two blocks
	if slices.Equal(emb[:1000], emb[randomBlock:randomBlock+1000]) {
		t.Error("the embedding's second block repeats its first")
	}
	if slices.Equal(one[layerName(0, sQ)], one[layerName(1, sQ)]) {
		t.Error("layer 1's q projection repeats layer 0's")
	}
}
