package train

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"agentrl/engine/compiles"
	"agentrl/engine/model"
)

// BenchConfig is one training update to measure: Sequences sequences of Length tokens whose
// first Prompt tokens are the prompt (not trained), in micro-batches of MicroBatch (0, or more
// than Sequences: one micro-batch of them all). LogitsChunk is the trainer's (the controller
// uses 32; 0 is the trainer's default bound).
type BenchConfig struct {
	Sequences  int `json:"sequences"`
	Length     int `json:"length"`
	Prompt     int `json:"prompt"`
	MicroBatch int `json:"micro_batch"`
	// Updates timed after the first (which compiles the graphs and is not timed); default 2.
	Updates     int    `json:"updates"`
	LogitsChunk int    `json:"logits_chunk"`
	Seed        uint64 `json:"seed"`
	// Compiles counts the trainer's programs (nil: not counted).
	Compiles *compiles.Counter `json:"-"`
	// Peak, when set, starts a peak-memory measurement and returns the function that stops it
	// (bytes above the start, and what was measured; see device.StartPeak): one more update runs
	// under it, after the timed ones.
	Peak func() (stop func() (int64, string)) `json:"-"`
}

// BenchResult is what one Bench measured.
type BenchResult struct {
	Config BenchConfig `json:"config"`
	// TrainedTokens is the number of policy tokens one update trains on: Length − Prompt per
	// sequence (Length − 1 when Prompt is 0: the first token is never trained).
	TrainedTokens int     `json:"trained_tokens"`
	TokensPerSec  float64 `json:"tokens_per_s"`
	UpdateSeconds float64 `json:"update_s"`      // one whole update, the best of the timed ones
	MicroStepMs   float64 `json:"micro_step_ms"` // one micro-batch's forward + backward (+ its share of AdamW)
	CompileTime   float64 `json:"compile_s"`     // the first update, graphs compiled
	// FLOPs is the update's arithmetic (forward + backward ≈ 3 × 2 × parameters × tokens, plus
	// attention), for the share of the machine's peak.
	FLOPs       float64 `json:"flops"`
	FLOPsPerSec float64 `json:"flops_per_s"` // FLOPs ÷ UpdateSeconds
	// PeakBytes is the memory one update added at its peak (with BenchConfig.Peak),
	// PeakBytesSource what was measured.
	PeakBytes       int64  `json:"peak_bytes,omitempty"`
	PeakBytesSource string `json:"peak_bytes_source,omitempty"`
}

// Bench measures the policy-gradient update of the CPU recipe's shape on m: random tokens, the
// clipped surrogate with an entropy bonus, AdamW with weight decay and a global-norm clip (the
// ReTool recipes' trainer settings), an AdamW update per micro-batch (grad_accumulation 1). A
// micro-batch larger than the batch is cut to the batch, so no padded rows are timed.
func Bench(m *model.Model, c BenchConfig) (*BenchResult, error) {
	if c.Updates <= 0 {
		c.Updates = 2
	}
	if c.Sequences <= 0 || c.Length <= c.Prompt+1 || c.Prompt < 0 {
		return nil, fmt.Errorf("train bench: want sequences > 0 and length > prompt + 1; got %d × %d (prompt %d)", c.Sequences, c.Length, c.Prompt)
	}
	if c.MicroBatch <= 0 || c.MicroBatch > c.Sequences {
		c.MicroBatch = c.Sequences
	}
	tr, err := New(m, Config{LR: 1e-5, GradClip: 1, WeightDecay: 0.01, EntropyCoef: 0.01, MicroBatch: c.MicroBatch,
		GradAccumulation: 1, LogitsChunk: c.LogitsChunk, Compiles: c.Compiles})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	seqs := benchSequences(m.Config.VocabSize, c)
	t0 := time.Now()
	if _, err := tr.Update(seqs, 1e-5); err != nil {
		return nil, err
	}
	// Token 0 is never trained (nothing predicts it), so a prompt of 0 trains as one of 1.
	res := &BenchResult{Config: c, CompileTime: time.Since(t0).Seconds(), TrainedTokens: c.Sequences * (c.Length - max(c.Prompt, 1))}
	best := time.Duration(1<<63 - 1)
	for range c.Updates {
		t := time.Now()
		if _, err := tr.Update(seqs, 1e-5); err != nil {
			return nil, err
		}
		best = min(best, time.Since(t))
	}
	if c.Peak != nil {
		stop := c.Peak()
		_, err := tr.Update(seqs, 1e-5)
		res.PeakBytes, res.PeakBytesSource = stop()
		if err != nil {
			return nil, err
		}
	}
	passes := (c.Sequences + c.MicroBatch - 1) / c.MicroBatch
	res.UpdateSeconds = best.Seconds()
	res.TokensPerSec = float64(res.TrainedTokens) / res.UpdateSeconds
	res.MicroStepMs = 1000 * res.UpdateSeconds / float64(passes)
	res.FLOPs = updateFLOPs(m.Config, c.Sequences, c.Length)
	res.FLOPsPerSec = res.FLOPs / res.UpdateSeconds
	return res, nil
}

// benchSequences are c.Sequences random sequences of c.Length tokens over a vocabulary of vocab,
// trained after the first c.Prompt, with random old log-probs and one random advantage each.
func benchSequences(vocab int, c BenchConfig) []Sequence {
	rng := rand.New(rand.NewPCG(c.Seed, 2))
	seqs := make([]Sequence, c.Sequences)
	for i := range seqs {
		s := Sequence{Tokens: make([]int32, c.Length), LossMask: make([]bool, c.Length),
			OldLogProbs: make([]float32, c.Length), Advantages: make([]float32, c.Length)}
		adv := float32(rng.NormFloat64())
		for j := range s.Tokens {
			s.Tokens[j] = int32(rng.IntN(vocab))
			if j >= c.Prompt {
				s.LossMask[j], s.OldLogProbs[j], s.Advantages[j] = true, -float32(rng.Float64()*3), adv
			}
		}
		seqs[i] = s
	}
	return seqs
}

// updateFLOPs counts one update's multiply-adds as 2 FLOPs: forward and backward (≈ 3 forwards)
// of the matrix products over every token, attention's two products over the causal half.
func updateFLOPs(cfg *model.Config, seqs, length int) float64 {
	h, kv, hd := cfg.HiddenSize, cfg.NumKVHeads*cfg.HeadDim, cfg.NumHeads*cfg.HeadDim
	perTokenLayer := float64(h*hd + 2*h*kv + hd*h + 3*h*cfg.IntermediateSize)
	perToken := float64(cfg.NumLayers)*perTokenLayer + float64(h*cfg.VocabSize)
	attn := float64(cfg.NumLayers) * float64(2*hd) * float64(length) / 2 // q·k and p·v over half the context on average
	return 3 * 2 * float64(seqs*length) * (perToken + attn)
}

// Write prints the result for a person.
func (r *BenchResult) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "update of %d × %d tokens (prompt %d, %d trained), micro-batch %d: %.2fs, %.1f tokens/s\n",
		c.Sequences, c.Length, c.Prompt, r.TrainedTokens, c.MicroBatch, r.UpdateSeconds, r.TokensPerSec)
	fmt.Fprintf(w, "micro-step %.1f ms, compile + first update %.1fs, %.2f GFLOP per update (%.2f GFLOP/s)\n",
		r.MicroStepMs, r.CompileTime, r.FLOPs/1e9, r.FLOPsPerSec/1e9)
	if r.PeakBytesSource != "" {
		fmt.Fprintf(w, "peak memory of one update: %.1f MiB (%s)\n", float64(r.PeakBytes)/(1<<20), r.PeakBytesSource)
	}
}
