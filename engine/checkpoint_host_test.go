package engine

import (
	"context"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
)

// TestCheckpointHostPeak writes a checkpoint of a small model (4 layers, hidden 256, the built-in
// tokenizer's vocabulary: 37 MiB of float32 weights and AdamW moments) on the go backend and
// measures what writing it adds to the Go heap: device.PeakMeter's Go-heap source, which samples
// the heap's object bytes every 500 µs at GOGC=2 (live objects plus garbage not yet swept, so an
// upper bound of the live peak) above the heap after two collections before the save. That peak
// must stay within the ledger's host figure for writing a checkpoint of the same shape and
// settings (ledger.CheckpointCopy + StorePending: the largest tensor twice over, and the
// chunks waiting for their transaction, here the whole checkpoint as it is under 68 MiB), and be
// at least the largest tensor's bytes (else the meter saw nothing). What it does not measure:
// bbolt's memory-mapped file (page cache, outside the heap), the C heap, and on a GPU the host
// copies GoMLX keeps of the device tensors read (the ledger's DeviceReadCopies; the go backend's
// tensors share the host's). Nor what the default GOGC=100 lets garbage (each tensor's float32
// copy) pile up to before a collection: the figure is live bytes. Measured on the 2-core EPYC
// with the checkpoint streamed: peak 29.5 MiB against the ledger's 54.6 MiB (its 16 MiB of model
// files are an upper bound; the test's are a few bytes, and the zero moments of an untrained run
// are one chunk once stored). Built whole before it was written, the same checkpoint peaked at
// 51.4 MiB. store's TestSaveCheckpointStreams shows the bound on a checkpoint larger than the
// store's 64 MiB transaction.
func TestCheckpointHostPeak(t *testing.T) {
	var cfg *model.Config
	c, _, _ := storeController(t, "ckpt", "1", func(vocab int) *model.Config {
		cfg = &model.Config{Family: model.Qwen3, VocabSize: vocab, HiddenSize: 256, IntermediateSize: 768, NumLayers: 4,
			NumHeads: 4, NumKVHeads: 2, HeadDim: 64, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true}
		return cfg
	})
	policy, r := c.opts.Policy, c.recipe

	sh := ledger.Shape{Name: "test", Family: "qwen3", Layers: cfg.NumLayers, Hidden: cfg.HiddenSize, Intermediate: cfg.IntermediateSize,
		Heads: cfg.NumHeads, KVHeads: cfg.NumKVHeads, HeadDim: cfg.HeadDim, Vocab: cfg.VocabSize, Tied: true}
	p, err := ledger.Compute(sh, ledger.SettingsFor(r, "go"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, s := range policy.Params.Specs {
		n := int64(1)
		for _, d := range s.Dims {
			n *= int64(d)
		}
		held += n
	}
	if held != p.Params {
		t.Fatalf("the ledger counts %d parameters for this shape; the model holds %d", p.Params, held)
	}
	figure := p.Host.Components[ledger.CheckpointCopy] + p.Host.Components[ledger.StorePending]
	tensorBytes := p.Host.CheckpointBytes - ledger.CheckpointFileBytes
	largest := p.Host.Components[ledger.CheckpointCopy] / 2 // its float32 bytes

	meter := device.StartPeak(true, nil)
	err = c.save(context.Background(), 1, true)
	peak, source := meter.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("writing a %.1f MiB checkpoint: peak %.1f MiB (%s); ledger figure %.1f MiB", float64(tensorBytes)/(1<<20), float64(peak)/(1<<20), source, float64(figure)/(1<<20))
	if peak > figure {
		t.Errorf("writing the checkpoint peaked at %d bytes above the heap before it; the ledger allows %d", peak, figure)
	}
	if peak < largest {
		t.Errorf("writing the checkpoint peaked at only %d bytes, under its largest tensor's %d: the meter missed the checkpoint", peak, largest)
	}
}
