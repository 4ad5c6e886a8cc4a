package model

import (
	"os"
	"strconv"
	"testing"

	"github.com/gomlx/compute/dtypes"
)

// BenchmarkForward measures teacher-forced scoring throughput (forward + chunked log-probs) in
// tokens/s on the tiny qwen3 fixture, batch 8 × 64 on the Go backend by default;
// AGENTRL_BENCH_BATCH and AGENTRL_BENCH_SEQ change the shape, AGENTRL_BENCH_BF16=1 computes in
// bfloat16.
func BenchmarkForward(b *testing.B) {
	batch, seq := envInt("AGENTRL_BENCH_BATCH", 8), envInt("AGENTRL_BENCH_SEQ", 64)
	dt := dtypes.Float32
	if os.Getenv("AGENTRL_BENCH_BF16") == "1" {
		dt = dtypes.BFloat16
	}
	m, err := Load(goBackend(b), fixtureDir("qwen3-tiny"), Options{Compute: dt})
	if err != nil {
		b.Fatal(err)
	}
	seqs := make([][]int32, batch)
	for i := range seqs {
		seqs[i] = make([]int32, seq)
		for j := range seqs[i] {
			seqs[i][j] = int32((i*31 + j*7) % m.Config.VocabSize)
		}
	}
	if _, err := m.Score(seqs); err != nil { // compile outside the timing
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Score(seqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch*seq*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkResponseLogProbs measures a response's log-probs after its prompt as the reference
// phase takes them: Score over the padded sequence ("score") against LogProbsFrom ("from", the
// compact projection at a vocabulary of CompactHeadVocab words or more), on the model folder
// AGENTRL_BENCH_MODEL (the tiny qwen3 fixture by default), for a sequence of AGENTRL_BENCH_SEQ
// tokens (default 300) whose first AGENTRL_BENCH_PROMPT (default 100) are the prompt.
func BenchmarkResponseLogProbs(b *testing.B) {
	dir := os.Getenv("AGENTRL_BENCH_MODEL")
	if dir == "" {
		dir = fixtureDir("qwen3-tiny")
	}
	m, err := Load(goBackend(b), dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	seq := make([]int32, envInt("AGENTRL_BENCH_SEQ", 300))
	for j := range seq {
		seq[j] = int32((j*7 + 3) % m.Config.VocabSize)
	}
	prompt := envInt("AGENTRL_BENCH_PROMPT", 100)
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"score", func() error { _, err := m.Score([][]int32{seq}); return err }},
		{"from", func() error { _, err := m.LogProbsFrom(seq, prompt); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.fn(); err != nil { // compile outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.fn(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(seq)-prompt)*float64(b.N)/b.Elapsed().Seconds(), "response_tokens/s")
		})
	}
}
