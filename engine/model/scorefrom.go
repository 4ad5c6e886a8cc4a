package model

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"
)

// CompactHeadVocab is the smallest vocabulary for which only the positions a caller reads are
// projected onto it (LogProbsFrom here, the trainer's loss in engine/train). Every released
// tokenizer is larger (Qwen3's 151,936 words, Llama 3's 128,256, Mistral's 32,768): there the
// projection is a large part of a forward (26 % of Qwen3-0.6B's, 72 % of a 4-layer model of its
// width), and prompts and padding are positions nobody reads. Below it (the built-in model's 392
// words) the saving is too small to be worth more compiled programs, so the built-in model keeps
// its programs and results.
const CompactHeadVocab = 32768

// headFractions is how finely a compact projection's length is rounded: up to a multiple of an
// eighth of the padded positions, so a shape compiles at most seven compact programs.
const headFractions = 8

// CompactPositions is how many positions a compact projection of count positions out of total
// projects: count rounded up to a multiple of an eighth of total (at least one eighth), so that a
// shape compiles at most seven compact programs besides its full one. At total or more, projecting
// every position is as cheap.
func CompactPositions(count, total int) int {
	q := max((total+headFractions-1)/headFractions, 1)
	return max((count+q-1)/q, 1) * q
}

// LogProbsFrom returns, for one sequence, out[j] = log p(seq[j] | seq[:j]) for every j from
// from on (from at least 1: nothing predicts token 0), 0 before: the log-probs of a response
// after its prompt, as Score gives them (Score's NextLogProbs[0][j−1]). With a vocabulary of
// CompactHeadVocab words or more only the positions that predict those tokens are projected onto
// it (their count rounded up to an eighth of the padded length), not the prompt's or the
// padding's.
func (m *Model) LogProbsFrom(seq []int32, from int) ([]float32, error) {
	from = max(from, 1)
	out := make([]float32, len(seq))
	if from >= len(seq) {
		return out, m.checkIDs([][]int32{seq})
	}
	l := Bucket(len(seq))
	n := CompactPositions(len(seq)-from, l)
	if m.Config.VocabSize < CompactHeadVocab || n >= l {
		s, err := m.Score([][]int32{seq})
		if err != nil {
			return nil, err
		}
		copy(out[from:], s.NextLogProbs[0][from-1:])
		return out, nil
	}
	if err := m.checkIDs([][]int32{seq}); err != nil {
		return nil, err
	}
	ids, pos := padded([][]int32{seq}, l)
	targets := make([]int32, l)
	copy(targets, ids[1:])
	idx := make([]int32, n) // the positions from−1 … len−2 predict tokens from … len−1; the rest pad
	for k := range idx {
		idx[k] = int32(min(from-1+k, len(seq)-2))
	}
	res, err := m.call(m.scoreAtExec,
		tensors.FromFlatDataAndDimensions(ids, 1, l),
		tensors.FromFlatDataAndDimensions(pos, 1, l),
		tensors.FromFlatDataAndDimensions(targets, 1, l),
		tensors.FromFlatDataAndDimensions(idx, n))
	if err != nil {
		return nil, err
	}
	lp := tensors.MustCopyFlatData[float32](res[0])
	res[0].FinalizeAll()
	copy(out[from:], lp[:len(seq)-from])
	return out, nil
}

// scoreAt is the graph of LogProbsFrom's compact path: the log-probs of targets at the positions
// idx [n] of one sequence, [n].
func (m *Model) scoreAt(in []*Node) []*Node {
	np := len(m.Params.Specs)
	net := m.NewNet(m.opts.Compute, in[:np])
	ids, pos, targets, idx := in[np], in[np+1], in[np+2], in[np+3]
	hidden := net.Forward(ids, pos) // [1, l, H]
	lp, _ := net.TokenLogProbs(AtPositions(hidden, idx), AtPositions(targets, idx), m.opts.LogitsChunk)
	return []*Node{Reshape(lp, idx.Shape().Dim(0))}
}

// AtPositions gathers x [B, T, …] at the flat positions idx [n] (row·T + column) into one row:
// [1, n, …]. Its gradient scatters back into x's positions: the compact projections (here and the
// trainer's loss) read only the positions they need through it.
func AtPositions(x, idx *Node) *Node {
	dims := x.Shape().Dimensions
	flat := append([]int{dims[0] * dims[1]}, dims[2:]...)
	out := append([]int{1, idx.Shape().Dim(0)}, dims[2:]...)
	return Reshape(Gather(Reshape(x, flat...), ExpandAxes(idx, -1)), out...)
}
