package train

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
)

// Where the loss runs the vocabulary projection (Config.HeadPositions).
const (
	HeadAuto = ""     // HeadLoss for vocabularies of model.CompactHeadVocab words or more, else HeadAll
	HeadAll  = "all"  // at every position of the micro-batch
	HeadLoss = "loss" // only at the positions the loss reads
)

// compactHead reports whether the trainer projects only the loss's positions.
func (tr *Trainer) compactHead() bool {
	switch tr.cfg.HeadPositions {
	case HeadLoss:
		return true
	case HeadAll:
		return false
	}
	return tr.m.Config.VocabSize >= model.CompactHeadVocab
}

// headIndex lays out the compact projection of a [rows, t] micro-batch with this mask: idx holds
// the flat positions (row·t + column) where the mask is set, padded with position 0 to
// model.CompactPositions of them, and inv, for each of the rows·t positions, its entry in idx, or
// len(idx) for a position outside the loss. Both are nil when projecting every position is as
// cheap.
func headIndex(mask []float32, rows, t int) (idx, inv []int32) {
	size := rows * t
	count := 0
	for _, m := range mask {
		if m != 0 {
			count++
		}
	}
	n := model.CompactPositions(count, size)
	if n >= size {
		return nil, nil
	}
	idx, inv = make([]int32, n), make([]int32, size)
	j := 0
	for k, m := range mask {
		inv[k] = int32(n)
		if m != 0 {
			idx[j], inv[k] = int32(k), int32(j)
			j++
		}
	}
	return idx, inv
}

// headArgs are the compact projection's two graph inputs for b: idx [n] and inv [B·T] of
// headIndex when compact and it saves positions, else one-entry placeholders (every position is
// projected; lossGraph tells them apart by inv's length).
func headArgs(b *Batch, compact bool) []arg {
	var idx, inv []int32
	if compact {
		idx, inv = headIndex(b.Mask, b.B, b.T)
	}
	if idx == nil {
		idx, inv = []int32{0}, []int32{0}
	}
	return []arg{{tensors.FromFlatDataAndDimensions(idx, len(idx)), true}, {tensors.FromFlatDataAndDimensions(inv, len(inv)), true}}
}

// tokenStatsAt is TokenStats over the positions the loss reads: with inv of B·T entries, the
// hidden states and targets at idx are gathered into one row of n positions, projected there
// (in chunks of rows × chunk positions, as many tokens as a chunk of the full batch holds), and
// the log-probs and entropies put back in [B, T] by inv, 0 at positions outside the loss. The
// gathers' gradients carry the loss's gradient back to hidden unchanged: only the projection's
// work at positions the loss ignores is saved. Otherwise it is TokenStats at every position.
func tokenStatsAt(net *model.Net, hidden, targets, idx, inv *Node, chunk int, withEntropy, checkpoint bool) (logp, entropy *Node) {
	b, t := hidden.Shape().Dim(0), hidden.Shape().Dim(1)
	if inv.Shape().Dim(0) != b*t || b*t == 1 {
		return TokenStats(net, hidden, targets, chunk, withEntropy, checkpoint)
	}
	n := idx.Shape().Dim(0)
	lp, ent := TokenStats(net, model.AtPositions(hidden, idx), model.AtPositions(targets, idx), b*min(chunk, t), withEntropy, checkpoint)
	back := func(x *Node) *Node {
		if x == nil {
			return nil
		}
		ext := Concatenate([]*Node{Reshape(x, n), Zeros(x.Graph(), shapes.Make(dtypes.Float32, 1))}, 0)
		return Reshape(Gather(ext, ExpandAxes(inv, -1)), b, t)
	}
	return back(lp), back(ent)
}
