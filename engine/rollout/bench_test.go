package rollout

import (
	"context"
	"testing"
)

// BenchmarkGenerateTiny measures generation on the tiny qwen3 fixture on the CPU: 32 sequences of
// 16 prompt tokens and 48 new tokens through 8 slots. Reported: tokens/s, ms/step, occupancy.
func BenchmarkGenerateTiny(b *testing.B) {
	m, _ := loadFixture(b, "qwen3-tiny")
	for i := 0; i < b.N; i++ {
		r, err := Bench(context.Background(), m, BenchConfig{
			Sequences: 32, PromptLen: 16, NewTokens: 48,
			Gen: Config{Slots: 8, MaxLen: 128, Buckets: []int{32, 64, 128}},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.TokensPerSec, "tokens/s")
		b.ReportMetric(r.StepMillis, "ms/step")
		b.ReportMetric(100*r.Occupancy, "%occupancy")
	}
}
