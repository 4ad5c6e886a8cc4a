package train

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/model"
)

// BenchmarkUpdate measures one training step of the built-in recipe's shape on the Go backend:
// the built-in model, 64 sequences of 256 tokens (96 prompt, 160 policy), micro-batches of 8 and
// an AdamW update per micro-batch, as the CPU recipe runs it. Sub-benchmarks vary how many
// positions are projected onto the vocabulary at once (LogitsChunk): the controller's 32, the
// automatic bound (DefaultLogitChunkTokens ÷ rows) and the whole sequence. It reports trained
// tokens/s; compare the sub-benchmarks of one run with each other. Build with GOEXPERIMENT=simd
// (make bench does), as the binary is: without it the matrix kernels are the portable ones and
// take most of the time. Measured so on the 2-core EPYC, nothing else running: 1508, 1299 and
// 1170 tokens/s (chunk 32, auto, whole) — the controller's 32 is the fastest here; a CPU profile
// puts ~21 % of the step in transposes, ~15 % in the matmul kernels, the rest in element-wise
// ops and reductions.
func BenchmarkUpdate(b *testing.B) {
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		b.Fatal(err)
	}
	const n, length, prompt = 64, 256, 96
	for _, chunk := range []int{32, 0, length} {
		name := fmt.Sprintf("chunk=%d", chunk)
		if chunk == 0 {
			name = "chunk=auto"
		}
		b.Run(name, func(b *testing.B) {
			m, err := model.Load(backend, filepath.Join("..", "..", "testdata", "builtin"), model.Options{})
			if err != nil {
				b.Fatal(err)
			}
			tr, err := New(m, Config{LR: 1e-5, GradClip: 1, WeightDecay: 0.01, EntropyCoef: 0.01, MicroBatch: 8, GradAccumulation: 1, LogitsChunk: chunk})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			seqs := make([]Sequence, n)
			for i := range seqs {
				toks := make([]int32, length)
				lps := make([]float32, length-prompt)
				for j := range toks {
					toks[j] = int32(rng.IntN(m.Config.VocabSize))
				}
				for j := range lps {
					lps[j] = -float32(rng.Float64() * 3)
				}
				seqs[i] = toSequence(toks, prompt, lps, rng.NormFloat64())
			}
			if _, err := tr.Update(seqs, 1e-5); err != nil { // compile outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := tr.Update(seqs, 1e-5); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*(length-prompt)*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
