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
