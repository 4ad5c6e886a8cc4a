package store

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"agentrl/store/safetensors"
)

// liveHeap is the Go heap's live bytes after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestSaveCheckpointStreams writes a checkpoint of a 96 MiB random tensor (an embedding, bigger
// than a store transaction) and then 24 random 4 MiB ones (192 MiB in all), each made only when
// SaveCheckpointFrom asks for it and given in reverse name order. Each time it asks, the test
// collects garbage and reads the live heap (runtime.MemStats.HeapAlloc after runtime.GC) above its
// size before the save: what the store keeps between tensors. Once the big tensor is behind it,
// that must stay within one small tensor (the last one given, still in the store's hands) and the
// chunks waiting for their transaction (at most 64 MiB and a chunk, copied out of their tensor so
// that the big one's buffer is not kept alive by its last chunks): the store holds neither the
// tensors it was given nor the checkpoint. (bbolt's copy of the waiting chunks while it commits
// them, another 64 MiB at most, is inside a flush and not sampled here; garbage between
// collections is not live and not counted.) The checkpoint reads back the same, its manifest in
// name order.
func TestSaveCheckpointStreams(t *testing.T) {
	s, _ := openTemp(t)
	const n, small, big = 25, 4 << 20, 96 << 20
	sums := map[string][32]byte{}
	base := liveHeap()
	var afterBig uint64 // the most live bytes at a boundary once the big tensor is no longer the last given
	i := n
	src := func() (*safetensors.Tensor, error) {
		if h := liveHeap(); h > base && i < n-1 {
			afterBig = max(afterBig, h-base)
		}
		if i == 0 {
			return nil, nil
		}
		i--
		size := small
		if i == n-1 {
			size = big
		}
		rng := rand.New(rand.NewChaCha8([32]byte{byte(i), byte(i >> 8)}))
		d := make([]byte, size)
		for j := 0; j < size; j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				d[j+k] = byte(v >> (8 * k))
			}
		}
		name := fmt.Sprintf("layer.%02d", i)
		sums[name] = sha256.Sum256(d)
		return &safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: []int{size / 4}, Data: d}, nil
	}
	if err := s.SaveCheckpointFrom(Manifest{Run: "r", Step: 1}, src, nil, map[string][]byte{"config.json": []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	const total = big + (n-1)*small
	const bound = small + txBytes + ChunkSize + 1<<20 // one small tensor, the waiting chunks, 1 MiB for the rest
	t.Logf("a %d MiB checkpoint streamed holding at most %.1f MiB live between tensors after its 96 MiB one (bound %d MiB)",
		total>>20, float64(afterBig)/(1<<20), bound>>20)
	if afterBig > bound {
		t.Errorf("streaming a %d MiB checkpoint held %d live bytes between tensors; want at most %d", total>>20, afterBig, bound)
	}
	cp, err := s.LoadCheckpoint("r", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Weights) != n || len(cp.Manifest.Tensors) != n {
		t.Fatalf("%d tensors read back; want %d", len(cp.Weights), n)
	}
	for j, ref := range cp.Manifest.Tensors {
		if want := fmt.Sprintf("layer.%02d", j); ref.Name != want {
			t.Fatalf("manifest tensor %d is %s; want %s (name order)", j, ref.Name, want)
		}
	}
	for _, w := range cp.Weights {
		if sha256.Sum256(w.Data) != sums[w.Name] {
			t.Errorf("%s reads back different", w.Name)
		}
	}
}
