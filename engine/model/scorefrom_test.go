package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"agentrl/engine/compiles"
)

// TestLogProbsFromMatchesScore: a response's log-probs after its prompt are Score's, whether the
// whole padded sequence is projected (a small vocabulary, or a response too long to save an
// eighth) or only the positions that predict the response (a vocabulary of CompactHeadVocab
// words: the compact program runs, as the compile counter shows), and 0 before the prompt's end.
func TestLogProbsFromMatchesScore(t *testing.T) {
	b := goBackend(t)
	for _, vocab := range []int{64, CompactHeadVocab} {
		cfg := &Config{Family: Qwen3, VocabSize: vocab, HiddenSize: 16, IntermediateSize: 24, NumLayers: 2,
			NumHeads: 4, NumKVHeads: 2, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true}
		m, err := New(b, RandomParams(cfg, 4, 0.2), Options{LogitsChunk: 8})
		if err != nil {
			t.Fatal(err)
		}
		counter := compiles.NewCounter()
		m.CountCompiles(counter, "reference")
		rng := rand.New(rand.NewPCG(1, uint64(vocab)))
		for _, c := range []struct{ n, from int }{{40, 30}, {40, 5}, {40, 39}, {40, 0}, {100, 60}, {2, 1}, {3, 3}} {
			seq := make([]int32, c.n)
			for i := range seq {
				seq[i] = int32(rng.IntN(vocab))
			}
			got, err := m.LogProbsFrom(seq, c.from)
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.Score([][]int32{seq})
			if err != nil {
				t.Fatal(err)
			}
			for j := range seq {
				want := float32(0)
				if j >= max(c.from, 1) {
					want = s.NextLogProbs[0][j-1]
				}
				if math.Abs(float64(got[j]-want)) > 1e-5 {
					t.Fatalf("vocabulary %d, %d tokens from %d: token %d log-prob %v; Score gives %v", vocab, c.n, c.from, j, got[j], want)
				}
			}
		}
		// Score's programs: one per length bucket (16, 64, 128); with the large vocabulary also
		// the compact ones, one per bucket and rounded response length (64: 8, 16, 40; 128: 48;
		// 16: 2).
		want := map[bool]int{false: 3, true: 8}[vocab >= CompactHeadVocab]
		if got := counter.Snapshot().Programs; got != want {
			t.Errorf("vocabulary %d: %d programs compiled (%s); want %d", vocab, got, counter.Snapshot(), want)
		}
		m.Close()
	}
}

func TestCompactPositions(t *testing.T) {
	for _, c := range []struct{ count, total, want int }{
		{1280, 2048, 1280}, {1281, 2048, 1536}, {0, 2048, 256}, {200, 512, 256}, {416, 512, 448}, {3, 16, 4}, {1, 4, 1}, {9, 8, 9},
	} {
		if got := CompactPositions(c.count, c.total); got != c.want {
			t.Errorf("CompactPositions(%d, %d) = %d; want %d", c.count, c.total, got, c.want)
		}
	}
}
