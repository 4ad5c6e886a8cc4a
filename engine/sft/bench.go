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
// c.MicroBatch into one AdamW update, as sft --data runs it (the log-probs pass that gives the
// surrogate its ratio of 1, then the forward and backward passes).
type BenchResult struct {
	Config        BenchConfig `json:"config"`
	TrainedTokens int         `json:"trained_tokens"`
	Tokens        int         `json:"tokens"`       // every token a step reads
	TokensPerSec  float64     `json:"tokens_per_s"` // trained tokens ÷ the best step's seconds
	StepSeconds   float64     `json:"step_s"`       // the best timed step
	LogProbsShare float64     `json:"logprobs_share"`
	CompileTime   float64     `json:"compile_s"` // the first step, graphs compiled
}

// BenchConfig is the step Bench times: train.BenchConfig's sequences and micro-batches, with the
// options sft --data takes for long conversations.
type BenchConfig struct {
	train.BenchConfig
	GradientCheckpointing bool `json:"gradient_checkpointing,omitempty"`
	OptimizerBits         int  `json:"optimizer_bits,omitempty"`
}

// Bench times the SFT step of sft --data on m on random tokens: an untimed step that compiles,
// then the best of c.Updates (default 2). LogProbsShare is the share of the step spent in the
// log-probs pass before the update (the price of training through the RL trainer's surrogate).
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
		MicroBatch: c.MicroBatch, GradAccumulation: (c.Sequences + c.MicroBatch - 1) / c.MicroBatch, Compiles: c.Compiles,
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
	step := func() (total, lp time.Duration, err error) {
		b := make([]train.Sequence, len(seqs))
		for i, s := range seqs {
			b[i] = train.Sequence{Tokens: s.Tokens, LossMask: s.LossMask}
		}
		t0 := time.Now()
		_, err = logProbs(tr, b, c.MicroBatch, func(i int, l []float32) {
			b[i].OldLogProbs = make([]float32, len(b[i].Tokens))
			copy(b[i].OldLogProbs[1:], l[:len(b[i].Tokens)-1])
			b[i].Advantages = make([]float32, len(b[i].Tokens))
			for j := range b[i].Advantages {
				b[i].Advantages[j] = 1
			}
		})
		if err != nil {
			return 0, 0, err
		}
		lp = time.Since(t0)
		_, err = tr.Update(b, 1e-5)
		return time.Since(t0), lp, err
	}
	t0 := time.Now()
	if _, _, err := step(); err != nil {
		return nil, err
	}
	res := &BenchResult{Config: c, CompileTime: time.Since(t0).Seconds(), TrainedTokens: c.Sequences * (c.Length - max(c.Prompt, 1)), Tokens: c.Sequences * c.Length}
	best, bestLP := time.Duration(1<<63-1), time.Duration(0)
	for range c.Updates {
		d, lp, err := step()
		if err != nil {
			return nil, err
		}
		if d < best {
			best, bestLP = d, lp
		}
	}
	res.StepSeconds = best.Seconds()
	res.TokensPerSec = float64(res.TrainedTokens) / res.StepSeconds
	res.LogProbsShare = bestLP.Seconds() / res.StepSeconds
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
	fmt.Fprintf(w, "SFT step of %d × %d tokens (prompt %d, %d trained), micro-batch %d%s, one AdamW update: %.2fs, %.1f trained tokens/s (%.0f%% of it the log-probs pass before the update; first step %.1fs)\n",
		c.Sequences, c.Length, c.Prompt, r.TrainedTokens, c.MicroBatch, opts, r.StepSeconds, r.TokensPerSec, 100*r.LogProbsShare, r.CompileTime)
}
