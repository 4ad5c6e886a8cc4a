package train

import (
	"errors"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/core/tensors"
)

// flat copies every trained parameter and moment to the host, in order.
func flat(t *testing.T, tr *Trainer) [][]float32 {
	t.Helper()
	m, v := tr.moments()
	var out [][]float32
	for _, x := range append(append(tr.params(), m...), v...) {
		vals, err := tensors.CopyFlatData[float32](x)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	return out
}

// TestUpdateUntilDiscards stops an update of four micro-batches part-way, with an AdamW update
// per micro-batch and with the gradients accumulated into one update: the stop function sees
// every micro-batch, ErrStopped comes back, and restoring the snapshot taken before gives the
// exact weights, moments and update count of before; the full update then matches a trainer
// that was never stopped.
func TestUpdateUntilDiscards(t *testing.T) {
	seqs := make([]Sequence, 8)
	for i := range seqs {
		tok := []int32{1, 2, int32(3 + i%5), 4, 5, int32(6 + i%7)}
		lps := []float32{-2, -2, -2}
		seqs[i] = toSequence(tok, 3, lps, float64(i%3)-1)
	}
	for _, tc := range []struct {
		name      string
		accum     int
		stopAt    int // stop before this micro-batch
		wantAsked []int
	}{
		{name: "update per micro-batch", accum: 1, stopAt: 2, wantAsked: []int{0, 1, 2}},
		{name: "accumulated", accum: 0, stopAt: 3, wantAsked: []int{0, 1, 2, 3}},
		{name: "stopped before the first", accum: 1, stopAt: 0, wantAsked: []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{LR: 1e-2, ClipLow: 0.2, ClipHigh: 0.2, MicroBatch: 2, GradAccumulation: tc.accum}
			tr, err := New(tinyModel(t, 3), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			before := flat(t, tr)
			snap, err := tr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var asked []int
			_, err = tr.UpdateUntil(seqs, 1e-2, func(done, total int) bool {
				if total != 4 {
					t.Errorf("total %d micro-batches; want 4", total)
				}
				asked = append(asked, done)
				return done == tc.stopAt
			})
			if !errors.Is(err, ErrStopped) || !slices.Equal(asked, tc.wantAsked) {
				t.Fatalf("err %v, asked at %v; want ErrStopped, asked at %v", err, asked, tc.wantAsked)
			}
			if err := tr.Restore(snap); err != nil {
				t.Fatal(err)
			}
			after := flat(t, tr)
			for i := range before {
				if !slices.Equal(before[i], after[i]) {
					t.Fatalf("tensor %d differs after the restore", i)
				}
			}
			if tr.step != 0 {
				t.Errorf("update count %d after the restore; want 0", tr.step)
			}
			if _, err := tr.Update(seqs, 1e-2); err != nil {
				t.Fatal(err)
			}
			ref, err := New(tinyModel(t, 3), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			if _, err := ref.Update(seqs, 1e-2); err != nil {
				t.Fatal(err)
			}
			got, want := flat(t, tr), flat(t, ref)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("tensor %d after the full update differs from a trainer never stopped", i)
				}
			}
		})
	}
}
