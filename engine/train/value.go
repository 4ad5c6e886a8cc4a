package train

import (
	"errors"
	"fmt"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"
)

// Value head parameter names, in the order ValueHead and SetValueHead use.
const (
	ValueHeadWeight = "value_head.weight" // [hidden] float32
	ValueHeadBias   = "value_head.bias"   // [] float32
)

// ValueInputs are the per-token inputs of the value loss, all [B, T] float32.
type ValueInputs struct {
	Values    *Node // the critic's current V, with gradient
	Returns   *Node // value targets R (TokenGAE's returns)
	OldValues *Node // V when the advantages were computed; read only when Config.ValueClip > 0
	Mask      *Node // 1 on policy tokens, 0 elsewhere
	// Denom is the scalar normaliser, as in LossInputs (the same one, so that the value loss is
	// aggregated exactly like the policy loss). nil: this batch's own count.
	Denom *Node
}

// ValueOutputs are the value loss and the sums of its metrics, all scalars, over policy tokens.
type ValueOutputs struct {
	Loss      *Node // ½(V − R)² (clipped: ½·max of the two squares) aggregated ÷ Denom; not × ValueCoef
	SqErrSum  *Node // Σ ½(V − R)², unclipped: ÷ tokens is the ValueLoss metric
	ClipCount *Node // tokens whose clipped branch is active (their gradient is zero); 0 without clipping
	ReturnSum *Node // Σ R, for the explained variance
	ReturnSq  *Node // Σ R²
	ResidSum  *Node // Σ (R − V)
}

// ValueLoss builds the critic's loss: per policy token ½(V − R)², or with Config.ValueClip = ε
// > 0 PPO's clipped form ½·max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²), aggregated by
// token-mean or seq-mean over in.Denom like PolicyLoss. Non-policy positions are masked before
// any arithmetic, so whatever padding holds never reaches the loss or its gradient.
func ValueLoss(c *Config, in ValueInputs) ValueOutputs {
	dt := in.Values.DType()
	on := GreaterThan(in.Mask, ZerosLike(in.Mask))
	zero := ZerosLike(in.Values)
	masked := func(x *Node) *Node { return Where(on, x, zero) }
	v, r := masked(in.Values), masked(in.Returns)
	sq := MulScalar(Square(Sub(v, r)), 0.5)
	perTok := sq
	var out ValueOutputs
	out.ClipCount = ScalarZero(v.Graph(), dt)
	if c.ValueClip > 0 {
		old := masked(in.OldValues)
		vc := Add(old, ClipScalar(Sub(v, old), -c.ValueClip, c.ValueClip))
		sqc := MulScalar(Square(Sub(vc, r)), 0.5)
		perTok = Max(sq, sqc)
		out.ClipCount = ReduceAllSum(ConvertDType(LogicalAnd(on, GreaterThan(StopGradient(sqc), StopGradient(sq))), dt))
	}
	maskF := ConvertDType(on, dt)
	out.Loss = aggregate(c, perTok, maskF, ReduceAllSum(maskF), in.Denom)
	sv := StopGradient(v)
	out.SqErrSum = ReduceAllSum(StopGradient(sq))
	out.ReturnSum = ReduceAllSum(r)
	out.ReturnSq = ReduceAllSum(Square(r))
	out.ResidSum = ReduceAllSum(Sub(r, sv))
	return out
}

// valueOf is the value head: V = h·w + b, [B, T] float32, from the final normed hidden states h
// [B, T, H] (the states TokenStats projects onto the vocabulary, so V at position t is the
// value of the state before target t is emitted). Unless shared, the gradient stops at h.
func valueOf(h, w, b *Node, shared bool) *Node {
	h32 := h
	if h32.DType() != dtypes.Float32 {
		h32 = ConvertDType(h32, dtypes.Float32)
	}
	if !shared {
		h32 = StopGradient(h32)
	}
	return Add(DotGeneral(h32, []int{2}, nil, w, []int{0}, nil), b)
}

// valueHeadShapes are the shapes of value_head.weight and value_head.bias for a hidden size.
func valueHeadShapes(hidden int) []shapes.Shape {
	return []shapes.Shape{shapes.Make(dtypes.Float32, hidden), shapes.Make(dtypes.Float32)}
}

// Values returns the critic's value at every position of each sequence under the current
// parameters: entry j is V of the state before Tokens[j] is emitted — the convention of the
// log-probs, of Sequence's per-token slices and of TokenGAE's values — and entry 0 is 0 (nothing
// precedes the first token). Only Tokens are read. Sequences run Config.MicroBatch at a time
// (all at once when 0) through a forward-only graph. It needs a value head (ValueCoef > 0).
func (tr *Trainer) Values(seqs []Sequence) ([][]float32, error) {
	if tr.nh == 0 {
		return nil, errors.New("train: Values needs a value head; set Config.ValueCoef > 0")
	}
	rows := tr.cfg.MicroBatch
	if rows == 0 {
		rows = len(seqs)
	}
	vocab := tr.m.Config.VocabSize
	out := make([][]float32, len(seqs))
	for start := 0; start < len(seqs); start += rows {
		part := seqs[start:min(start+rows, len(seqs))]
		ss := make([]Sequence, len(part))
		for i, s := range part {
			for p, tok := range s.Tokens {
				if tok < 0 || int(tok) >= vocab {
					return nil, fmt.Errorf("train: sequence %d, token %d: id %d is outside the vocabulary [0, %d)", start+i, p, tok, vocab)
				}
			}
			n := len(s.Tokens)
			ss[i] = Sequence{Tokens: s.Tokens, LossMask: make([]bool, n), OldLogProbs: make([]float32, n), Advantages: make([]float32, n)}
		}
		b, err := packRows(ss, rows, 0)
		if err != nil {
			return nil, fmt.Errorf("train: values of sequences %d..%d: %w", start, start+len(part)-1, err)
		}
		dims := []int{b.B, b.T}
		args := append(tensorArgs(tr.params(), false),
			arg{tensors.FromFlatDataAndDimensions(b.Inputs, dims...), true},
			arg{tensors.FromFlatDataAndDimensions(b.Positions, dims...), true})
		res, err := tr.run(tr.value, args)
		if err != nil {
			return nil, err
		}
		flat := tensors.MustCopyFlatData[float32](res[0])
		res[0].FinalizeAll()
		for i, s := range part {
			row := make([]float32, len(s.Tokens))
			copy(row[1:], flat[i*b.T:i*b.T+len(s.Tokens)-1])
			out[start+i] = row
		}
	}
	return out, nil
}

// ValueHead returns the value head's parameter names (ValueHeadWeight, ValueHeadBias), values
// and AdamW moments, for checkpoints; all nil without a value head. The tensors stay the
// trainer's and are valid until the next update; the AdamW update count is Moments' step.
func (tr *Trainer) ValueHead() (names []string, values, m, v []*tensors.Tensor) {
	if tr.nh == 0 {
		return nil, nil, nil, nil
	}
	clone := func(ts []*tensors.Tensor) []*tensors.Tensor { return append([]*tensors.Tensor{}, ts...) }
	return []string{ValueHeadWeight, ValueHeadBias}, clone(tr.head), clone(tr.headMom), clone(tr.headVel)
}

// SetValueHead restores the value head saved by ValueHead (resume): values, and its AdamW
// moments m and v in the same order, or nil m and v to restart the moments from zero (a
// checkpoint without optimizer state). The trainer takes the tensors over and frees the ones it
// held. Restore the update count with SetMoments.
func (tr *Trainer) SetValueHead(values, m, v []*tensors.Tensor) error {
	if tr.nh == 0 {
		return errors.New("train: SetValueHead on a trainer without a value head; set Config.ValueCoef > 0")
	}
	want := valueHeadShapes(tr.m.Config.HiddenSize)
	names := []string{ValueHeadWeight, ValueHeadBias}
	if (m == nil) != (v == nil) {
		return errors.New("train: value head moments: give both m and v, or neither")
	}
	fresh := m == nil
	if fresh {
		m, v = []*tensors.Tensor{tensors.FromShape(want[0]), tensors.FromShape(want[1])}, []*tensors.Tensor{tensors.FromShape(want[0]), tensors.FromShape(want[1])}
	}
	if len(values) != tr.nh || len(m) != tr.nh || len(v) != tr.nh {
		return fmt.Errorf("train: %d value head tensors, %d first and %d second moments; want %d of each (save them with ValueHead)", len(values), len(m), len(v), tr.nh)
	}
	for i, s := range want {
		for _, x := range []*tensors.Tensor{values[i], m[i], v[i]} {
			if x == nil || !x.Shape().Equal(s) {
				return fmt.Errorf("train: %s or its moments are missing or not shaped %s", names[i], s)
			}
		}
	}
	keep := map[*tensors.Tensor]bool{}
	for i := range values {
		keep[values[i]], keep[m[i]], keep[v[i]] = true, true, true
	}
	for _, old := range [][]*tensors.Tensor{tr.head, tr.headMom, tr.headVel} {
		for _, x := range old {
			if !keep[x] {
				x.FinalizeAll()
			}
		}
	}
	tr.head = append([]*tensors.Tensor{}, values...)
	tr.headMom, tr.headVel = append([]*tensors.Tensor{}, m...), append([]*tensors.Tensor{}, v...)
	return nil
}
