package train

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"
)

// Three steps of updates, with the master weights and AdamW moments sent to host memory and back
// between them (as the engine does around every rollout), train bit-identical weights to three
// steps without; and 8-bit moments (int8 storage in MomentShape) train close to float32.
func TestOffloadExact(t *testing.T) {
	run := func(offload bool, bits int) ([][]float32, *Trainer) {
		m := tinyModel(t, 3)
		tr, err := New(m, Config{LR: 1e-2, MicroBatch: 2, OptimizerBits: bits})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for step := 0; step < 3; step++ {
			var seqs []Sequence
			for i := 0; i < 4; i++ {
				seq, lps := sample(t, m, rng, []int32{1, 2}, 6)
				seqs = append(seqs, toSequence(seq, 2, lps, float64(i%2)*2-1))
			}
			if offload {
				for _, f := range []func() error{tr.OffloadMaster, tr.OffloadMoments} {
					if err := f(); err != nil {
						t.Fatal(err)
					}
				}
				if master, moments := tr.OnDevice(); master != 0 || moments != 0 {
					t.Fatalf("after offloading: %d bytes of master weights and %d of moments still on the device", master, moments)
				}
				for _, f := range []func() error{tr.RestoreMaster, tr.RestoreMoments} {
					if err := f(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := tr.Update(seqs, 1e-2); err != nil {
				t.Fatal(err)
			}
		}
		var out [][]float32
		for _, v := range m.Params.Values {
			out = append(out, tensors.MustCopyFlatData[float32](v))
		}
		return out, tr
	}
	plain, tr := run(false, 32)
	tr.Close()
	moved, tr := run(true, 32)
	tr.Close()
	for i := range plain {
		for j := range plain[i] {
			if plain[i][j] != moved[i][j] {
				t.Fatalf("parameter %d[%d]: %v with offloading, %v without; want bit-identical", i, j, moved[i][j], plain[i][j])
			}
		}
	}
	q8, tr := run(true, 8)
	defer tr.Close()
	if m, _, _ := tr.Moments(); m[0].DType() != dtypes.Int8 {
		t.Fatalf("8-bit moments stored as %s", m[0].DType())
	}
	var diff float64
	for i := range plain {
		for j := range plain[i] {
			diff = max(diff, float64(abs32(q8[i][j]-plain[i][j])))
		}
	}
	step := 3 * 1e-2 // AdamW moves a weight by about lr per update
	if diff > 0.25*step {
		t.Errorf("8-bit moments: worst weight differs from float32's by %.3g after 3 updates; want ≤ %.3g", diff, 0.25*step)
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// A parameter tensor freed under the trainer (as an update that fails or is stopped leaves the
// ones it was given) is not counted, and reading the footprint does not panic: the engine reads it
// for the ledger after every step, the failed one too.
func TestFootprintSkipsFreedTensors(t *testing.T) {
	m := tinyModel(t, 3)
	tr, err := New(m, Config{LR: 1e-2, MicroBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.graphOptimizer = true // the host optimizer keeps the moments in host memory
	rng := rand.New(rand.NewPCG(5, 6))
	var seqs []Sequence
	for i := 0; i < 2; i++ {
		seq, lps := sample(t, m, rng, []int32{1, 2}, 6)
		seqs = append(seqs, toSequence(seq, 2, lps, float64(i%2)*2-1))
	}
	if _, err := tr.Update(seqs, 1e-2); err != nil { // everything on the device, as after a step
		t.Fatal(err)
	}
	whole := tr.Footprint()
	if whole.MasterWeights == 0 || whole.OptimizerMoments == 0 {
		t.Fatalf("footprint %+v; want master weights and moments on the device", whole)
	}
	first := m.Params.Values[tr.train[0]]
	size := int64(first.Memory())
	first.MustFinalizeAll()
	after := tr.Footprint()
	if after.MasterWeights != whole.MasterWeights-size || after.OptimizerMoments != whole.OptimizerMoments {
		t.Errorf("footprint after freeing a %d-byte parameter: %+v; want %+v less those bytes of master weights", size, after, whole)
	}
	if master, _ := tr.OnDevice(); master != after.MasterWeights {
		t.Errorf("OnDevice master %d; want the footprint's %d", master, after.MasterWeights)
	}
}
