package train

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"agentrl/engine/model"
)

// Sequence is one trajectory as the trainer sees it: the exact sampled tokens plus the tokenized
// observations (never re-tokenised text), which of them the policy produced, and per-token
// values aligned with Tokens (entry t concerns Tokens[t]; entries of non-policy tokens are
// ignored). Tokens[0] is never trained: nothing predicts it. RefLogProbs may be nil when the
// loss has no KL term.
//
// Returns and OldValues serve the value head (Config.ValueCoef > 0): Returns[t] is the value
// target of policy token t (TokenGAE's returns) and OldValues[t] the critic's value there when
// the advantages were computed (Trainer.Values; needed by Config.ValueClip). Like the other
// per-token slices, entry t concerns the state before Tokens[t] is emitted. Both may be nil
// without a value head.
type Sequence struct {
	Tokens      []int32
	LossMask    []bool
	OldLogProbs []float32
	Advantages  []float32
	RefLogProbs []float32
	Returns     []float32
	OldValues   []float32
}

// trained is the number of tokens of s the loss sees: policy tokens after the first.
func (s *Sequence) trained() int {
	n := 0
	for i := 1; i < len(s.LossMask); i++ {
		if s.LossMask[i] {
			n++
		}
	}
	return n
}

// Batch is a padded micro-batch, all [B, T]: Inputs are the tokens fed, Targets the next tokens
// whose log-probs are trained, Mask 1 on policy tokens, OldLogProbs from the sampler, Advantages
// per token, RefLPs from the reference model (used only when KLCoef > 0; HasRef says every
// sequence brought them). Returns and OldValues are the value head's targets and old values
// (used only when ValueCoef > 0, resp. ValueClip > 0; HasReturns and HasOldValues say every
// sequence brought them; zeros otherwise). Rows past the packed sequences are padding
// (positions −1, mask 0).
type Batch struct {
	B, T                                  int
	Inputs, Positions, Targets            []int32
	Mask, OldLogProbs, Advantages, RefLPs []float32
	HasRef                                bool
	Returns, OldValues                    []float32
	HasReturns, HasOldValues              bool
}

// Pack lays sequences out as a batch padded to length t (Bucket of the longest when 0, or when
// a sequence does not fit in t).
func Pack(seqs []Sequence, t int) (*Batch, error) { return packRows(seqs, len(seqs), t) }

// packRows is Pack into a batch of exactly rows rows (≥ len(seqs)); the extra rows are padding.
func packRows(seqs []Sequence, rows, t int) (*Batch, error) {
	if len(seqs) == 0 {
		return nil, errors.New("train: empty batch: pack at least one sequence")
	}
	if rows < len(seqs) {
		return nil, fmt.Errorf("train: %d sequences do not fit in %d rows", len(seqs), rows)
	}
	hasRef, hasRet, hasOld := true, true, true
	for i := range seqs {
		if err := seqs[i].checkShape(i); err != nil {
			return nil, err
		}
		if n := len(seqs[i].Tokens); t == 0 || n-1 > t {
			t = max(t, model.Bucket(n-1))
		}
		hasRef = hasRef && seqs[i].RefLogProbs != nil
		hasRet = hasRet && seqs[i].Returns != nil
		hasOld = hasOld && seqs[i].OldValues != nil
	}
	b := &Batch{B: rows, T: t, HasRef: hasRef, HasReturns: hasRet, HasOldValues: hasOld}
	size := rows * t
	b.Inputs, b.Positions, b.Targets = make([]int32, size), make([]int32, size), make([]int32, size)
	b.Mask, b.OldLogProbs, b.Advantages, b.RefLPs = make([]float32, size), make([]float32, size), make([]float32, size), make([]float32, size)
	b.Returns, b.OldValues = make([]float32, size), make([]float32, size)
	for k := range b.Positions {
		b.Positions[k] = -1
	}
	for i, s := range seqs {
		for p := 0; p < len(s.Tokens)-1; p++ {
			// Position p feeds Tokens[p] and predicts Tokens[p+1].
			k := i*t + p
			b.Inputs[k], b.Positions[k], b.Targets[k] = s.Tokens[p], int32(p), s.Tokens[p+1]
			if s.LossMask[p+1] {
				b.Mask[k] = 1
				b.OldLogProbs[k] = s.OldLogProbs[p+1]
				b.Advantages[k] = s.Advantages[p+1]
				if s.RefLogProbs != nil {
					b.RefLPs[k] = s.RefLogProbs[p+1]
				}
				if s.Returns != nil {
					b.Returns[k] = s.Returns[p+1]
				}
				if s.OldValues != nil {
					b.OldValues[k] = s.OldValues[p+1]
				}
			}
		}
	}
	return b, nil
}

// checkShape checks that the per-token slices of sequence i line up with its tokens.
func (s *Sequence) checkShape(i int) error {
	n := len(s.Tokens)
	if n < 2 {
		return fmt.Errorf("train: sequence %d has %d tokens; need at least 2 (a prompt token and a response token)", i, n)
	}
	for _, f := range []struct {
		name string
		n    int
		ok   bool
	}{{"LossMask", len(s.LossMask), true}, {"OldLogProbs", len(s.OldLogProbs), true}, {"Advantages", len(s.Advantages), true},
		{"RefLogProbs", len(s.RefLogProbs), s.RefLogProbs != nil}, {"Returns", len(s.Returns), s.Returns != nil},
		{"OldValues", len(s.OldValues), s.OldValues != nil}} {
		if f.ok && f.n != n {
			return fmt.Errorf("train: sequence %d: %s has %d entries for %d tokens; give one per token", i, f.name, f.n, n)
		}
	}
	return nil
}

// check validates sequence i for a model of vocab tokens: shapes, token ids in range, finite
// values on policy tokens, and reference log-probs, returns and old values when the loss of c
// needs them.
func (s *Sequence) check(i, vocab int, c *Config) error {
	if err := s.checkShape(i); err != nil {
		return err
	}
	needRef, needRet, needOld := c.KLCoef > 0, c.ValueCoef > 0, c.ValueCoef > 0 && c.ValueClip > 0
	if needRef && s.RefLogProbs == nil {
		return fmt.Errorf("train: sequence %d has no RefLogProbs but the KL coefficient is > 0; score it with the reference model or set KLCoef to 0", i)
	}
	if needRet && s.Returns == nil {
		return fmt.Errorf("train: sequence %d has no Returns but ValueCoef is > 0 (the value head needs targets); compute them with TokenGAE from Trainer.Values or set ValueCoef to 0", i)
	}
	if needOld && s.OldValues == nil {
		return fmt.Errorf("train: sequence %d has no OldValues but ValueClip is > 0; pass the Trainer.Values the advantages were computed with or set ValueClip to 0", i)
	}
	for p, tok := range s.Tokens {
		if tok < 0 || int(tok) >= vocab {
			return fmt.Errorf("train: sequence %d, token %d: id %d is outside the vocabulary [0, %d)", i, p, tok, vocab)
		}
	}
	for p := 1; p < len(s.Tokens); p++ {
		if !s.LossMask[p] {
			continue
		}
		vals := []struct {
			name string
			v    float32
		}{{"OldLogProbs", s.OldLogProbs[p]}, {"Advantages", s.Advantages[p]}}
		for _, opt := range []struct {
			name string
			need bool
			x    []float32
		}{{"RefLogProbs", needRef, s.RefLogProbs}, {"Returns", needRet, s.Returns}, {"OldValues", needOld, s.OldValues}} {
			if opt.need {
				vals = append(vals, struct {
					name string
					v    float32
				}{opt.name, opt.x[p]})
			}
		}
		for _, v := range vals {
			if f := float64(v.v); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("train: sequence %d, token %d: %s is %v; want a finite number on every policy token", i, p, v.name, v.v)
			}
		}
	}
	return nil
}

// microBatches splits one update's sequences into passes of rows sequences, longest first so
// that each pass pads to a tight length bucket.
func microBatches(seqs []Sequence, rows int) [][]Sequence {
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(seqs[order[a]].Tokens) > len(seqs[order[b]].Tokens) })
	var out [][]Sequence
	for start := 0; start < len(order); start += rows {
		var mb []Sequence
		for _, i := range order[start:min(start+rows, len(order))] {
			mb = append(mb, seqs[i])
		}
		out = append(out, mb)
	}
	return out
}
