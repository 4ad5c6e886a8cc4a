package sft

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"agentrl/engine/model"
	"agentrl/engine/train"
)

// BenchResult is what Bench measured: one SFT step of c.Sequences sequences of c.Length tokens
// (the first c.Prompt outside the loss), its gradients accumulated over micro-batches of
// c.MicroBatch into one AdamW update, as sft --data runs it (the policy loss at ratio 1 with the
// old log-probs taken in the graph, train.Config.OnPolicy: forward and backward passes only).
type BenchResult struct {
	Config        BenchConfig `json:"config"`
	TrainedTokens int         `json:"trained_tokens"`
	Tokens        int         `json:"tokens"`       // every token a step reads
	TokensPerSec  float64     `json:"tokens_per_s"` // trained tokens ÷ the best step's seconds
	StepSeconds   float64     `json:"step_s"`       // the best timed step
	CompileTime   float64     `json:"compile_s"`    // the first step, graphs compiled
}

// BenchConfig is the step Bench times: train.BenchConfig's sequences and micro-batches, with the
// options sft --data takes for long conversations.
type BenchConfig struct {
	train.BenchConfig
	GradientCheckpointing bool `json:"gradient_checkpointing,omitempty"`
	OptimizerBits         int  `json:"optimizer_bits,omitempty"`
}

// Bench times the SFT step of sft --data on m on random tokens: an untimed step that compiles,
// then the best of c.Updates (default 2).
func Bench(m *model.Model, c BenchConfig) (*BenchResult, error) {
	if c.Updates <= 0 {
		c.Updates = 2
	}
	if c.Sequences <= 0 || c.Length <= c.Prompt+1 || c.Prompt < 0 {
		return nil, fmt.Errorf("sft bench: want sequences > 0 and length > prompt + 1; got %d × %d (prompt %d)", c.Sequences, c.Length, c.Prompt)
	}
	if c.MicroBatch <= 0 || c.MicroBatch > c.Sequences {
		c.MicroBatch = c.Sequences
	}
	tr, err := train.New(m, train.Config{LR: 1e-5, GradClip: 1, WeightDecay: 0.01, LogitsChunk: c.LogitsChunk,
		MicroBatch: c.MicroBatch, GradAccumulation: (c.Sequences + c.MicroBatch - 1) / c.MicroBatch, Compiles: c.Compiles, OnPolicy: true,
		GradientCheckpointing: c.GradientCheckpointing, OptimizerBits: c.OptimizerBits})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	rng := rand.New(rand.NewPCG(c.Seed, 3))
	seqs := make([]train.Sequence, c.Sequences)
	for i := range seqs {
		s := train.Sequence{Tokens: make([]int32, c.Length), LossMask: make([]bool, c.Length)}
		for j := range s.Tokens {
			s.Tokens[j] = int32(rng.IntN(m.Config.VocabSize))
			s.LossMask[j] = j >= max(c.Prompt, 1)
		}
		seqs[i] = s
	}
	step := func() (time.Duration, error) {
		b := make([]train.Sequence, len(seqs))
		for i, s := range seqs {
			b[i] = train.Sequence{Tokens: s.Tokens, LossMask: s.LossMask}
		}
		t0 := time.Now()
		_, err := sftStep(tr, b, 1e-5)
		return time.Since(t0), err
	}
	t0 := time.Now()
	if _, err := step(); err != nil {
		return nil, err
	}
	res := &BenchResult{Config: c, CompileTime: time.Since(t0).Seconds(), TrainedTokens: c.Sequences * (c.Length - max(c.Prompt, 1)), Tokens: c.Sequences * c.Length}
	best := time.Duration(1<<63 - 1)
	for range c.Updates {
		d, err := step()
		if err != nil {
			return nil, err
		}
		best = min(best, d)
	}
	res.StepSeconds = best.Seconds()
	res.TokensPerSec = float64(res.TrainedTokens) / res.StepSeconds
	return res, nil
}

// Write prints the result for a person.
func (r *BenchResult) Write(w io.Writer) {
	c := r.Config
	opts := ""
	if c.GradientCheckpointing {
		opts += ", gradient checkpointing"
	}
	if c.OptimizerBits == 8 {
		opts += ", 8-bit moments"
	}
	fmt.Fprintf(w, "SFT step of %d × %d tokens (prompt %d, %d trained), micro-batch %d%s, one AdamW update: %.2fs, %.1f trained tokens/s (first step %.1fs)\n",
		c.Sequences, c.Length, c.Prompt, r.TrainedTokens, c.MicroBatch, opts, r.StepSeconds, r.TokensPerSec, r.CompileTime)
}
