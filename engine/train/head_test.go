package train

import (
	"math"
	"slices"
	"testing"
)

func TestHeadIndex(t *testing.T) {
	for _, c := range []struct {
		name     string
		mask     []float32
		rows, t  int
		idx, inv []int32
	}{
		{"two rows, one eighth", []float32{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, 2, 8,
			[]int32{1, 14}, []int32{2, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 2}},
		{"rounded up to two eighths", []float32{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 1, 16,
			[]int32{0, 1, 2, 0}, []int32{0, 1, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
		{"no loss position still projects one eighth", make([]float32, 16), 1, 16,
			[]int32{0, 0}, []int32{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
		{"no saving: every position", []float32{1, 1, 1, 1, 1, 1, 1, 1}, 1, 8, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			idx, inv := headIndex(c.mask, c.rows, c.t)
			if !slices.Equal(idx, c.idx) || !slices.Equal(inv, c.inv) {
				t.Errorf("headIndex = %v, %v; want %v, %v", idx, inv, c.idx, c.inv)
			}
		})
	}
}

// TestCompactHeadSameLoss: projecting only the loss's positions gives the loss, metrics and
// gradients of projecting every position, for the loss's variants (KL, entropy, seq-mean,
// checkpointing, a value head).
func TestCompactHeadSameLoss(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"kl and entropy", Config{KLCoef: 0.05, EntropyCoef: 0.01}},
		{"seq-mean", Config{Aggregation: SeqMean, EntropyCoef: 0.02}},
		{"checkpointing", Config{GradientCheckpointing: true, KLCoef: 0.1}},
		{"one chunk", Config{LogitsChunk: 1024, KLCoef: 0.1}},
		{"value head", Config{ValueCoef: 0.5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			eval := func(head string) (float64, [][]float32, int) {
				cfg := c.cfg
				cfg.HeadPositions = head
				if cfg.LogitsChunk == 0 {
					cfg.LogitsChunk = 2
				}
				tr, err := New(tinyModel(t, 11), cfg)
				if err != nil {
					t.Fatal(err)
				}
				b := gradBatch(t, tr, tinyModel(t, 12))
				if cfg.ValueCoef > 0 {
					for k := range b.Returns {
						b.Returns[k] = float32(k%5) * 0.2
					}
					b.HasReturns = true
				}
				loss, grads := newLossEval(t, tr, b).eval(t, tr.params())
				return loss, grads, headArgs(b, tr.compactHead())[1].t.Shape().Dim(0)
			}
			fullLoss, fullGrads, n := eval(HeadAll)
			if n != 1 {
				t.Fatalf("HeadAll passed %d inverse entries; want the 1-entry placeholder", n)
			}
			loss, grads, n := eval(HeadLoss)
			if n != 48 {
				t.Fatalf("HeadLoss passed %d inverse entries; want 48 (3 rows × 16): the batch was not compacted", n)
			}
			if math.Abs(loss-fullLoss) > 1e-6*math.Max(1, math.Abs(fullLoss)) {
				t.Errorf("loss %.9f; every position gives %.9f", loss, fullLoss)
			}
			for i := range grads {
				for j := range grads[i] {
					if d := math.Abs(float64(grads[i][j] - fullGrads[i][j])); d > 1e-6+1e-5*math.Abs(float64(fullGrads[i][j])) {
						t.Fatalf("parameter %d entry %d: gradient %.9g; every position gives %.9g", i, j, grads[i][j], fullGrads[i][j])
					}
				}
			}
		})
	}
}
