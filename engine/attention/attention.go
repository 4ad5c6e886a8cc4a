// Package attention chooses the attention path a run's whole-sequence forwards take (the
// recipe's model.attention: auto, fused, chunked or dense) from what the backend offers, and says
// which and why in a line a user can act on.
package attention

import (
	"fmt"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/model"
)

// Probe says whether fused attention serves a run on backend b for cfg's heads in dtype dt:
// why not, in words a user can act on ("" when the backend has it), and otherwise what building,
// compiling and running its program for one seqLen-token sequence gave (nil: it ran).
type Probe func(b compute.Backend, cfg *model.Config, dt dtypes.DType, seqLen int) (unavailable string, compileErr error)

// ProbeFused is the real Probe: the backend's capabilities, then the program compiled.
func ProbeFused(b compute.Backend, cfg *model.Config, dt dtypes.DType, seqLen int) (string, error) {
	if why := model.FusedAttentionUnavailable(b, dt, cfg.HeadDim); why != "" {
		return why, nil
	}
	return "", model.CompileFusedAttention(b, cfg, dt, seqLen)
}

// Choose resolves model.attention asked for a run's models, policy and reference (nil for an
// evaluation-only run), whose training sequences are up to seqLen tokens, sets it on both (before
// any of their programs is built) and returns the line that says which path the run takes and
// why (event.RunStart.Attention). probe checks fused attention (nil: ProbeFused). fused where
// the backend lacks the op, or where its program does not compile, is refused with the reason;
// auto there falls back to chunked and says why.
func Choose(asked string, seqLen int, policy, reference *model.Model, probe Probe) (string, error) {
	if probe == nil {
		probe = ProbeFused
	}
	p := policy
	dt, block := p.Options().Compute, p.Options().AttentionBlock
	kind, line, err := Resolve(asked, func() (string, error) { return probe(p.Backend, p.Config, dt, seqLen) }, seqLen, block)
	if err != nil {
		return "", err
	}
	for _, m := range []*model.Model{policy, reference} {
		if m == nil { // an evaluation-only run has no reference
			continue
		}
		if err := m.SetAttention(kind); err != nil {
			return "", err
		}
	}
	return line, nil
}

// Resolve is Choose's decision for model.attention asked, where probe says whether fused
// attention serves the run (see Probe) and training sequences are up to seqLen
// tokens, attended in blocks of block queries on the chunked path.
func Resolve(asked string, probe func() (string, error), seqLen, block int) (model.AttentionKind, string, error) {
	switch model.AttentionKind(asked) {
	case model.AttentionDense:
		return model.AttentionDense, "dense (model.attention: dense): every query's scores at once", nil
	case model.AttentionChunked:
		return model.AttentionChunked, fmt.Sprintf("chunked (model.attention: chunked): blocks of %d queries", block), nil
	case model.AttentionFused:
		why, err := probe()
		switch {
		case why != "":
			return "", "", fmt.Errorf("model.attention: fused: %s; set model.attention: auto (chunked attention here) or chunked", why)
		case err != nil:
			return "", "", fmt.Errorf("model.attention: fused: the fused attention program failed to compile for a %d-token sequence: %s; "+
				"set model.attention: auto (it falls back to chunked attention) or chunked", seqLen, firstLine(err))
		}
		return model.AttentionFused, fmt.Sprintf("fused (model.attention: fused): cuDNN flash attention, its program compiled for %d tokens", seqLen), nil
	case model.AttentionAuto, "":
	default:
		return "", "", fmt.Errorf("model.attention: %q is not one of auto, fused, chunked, dense", asked)
	}
	why, err := probe()
	switch {
	case why != "" && seqLen > block:
		return model.AttentionAuto, fmt.Sprintf("chunked, blocks of %d queries (dense for sequences up to %d tokens) (auto: %s)", block, block, why), nil
	case why != "":
		return model.AttentionAuto, fmt.Sprintf("dense: sequences of at most %d tokens fit one block (auto: %s)", seqLen, why), nil
	case err != nil:
		return model.AttentionChunked, fmt.Sprintf("chunked, blocks of %d queries (auto: the fused attention program failed to compile for a %d-token sequence, so chunked: %s)",
			block, seqLen, firstLine(err)), nil
	}
	return model.AttentionAuto, fmt.Sprintf("fused (auto: cuDNN flash attention, its program compiled for %d tokens)", seqLen), nil
}

// firstLine is err's first line, at most 300 characters (XLA's compile errors run to pages).
func firstLine(err error) string {
	s, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
