package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/compiles"
)

// Options tune how a Model computes.
type Options struct {
	// Compute is the dtype of matmuls and activations: Float32 (default) or BFloat16.
	Compute dtypes.DType
	// LogitsChunk bounds the positions projected onto the vocabulary at once (default 256).
	LogitsChunk int
	// Attention is how whole-sequence forwards attend (default auto, see ChooseAttention), and
	// AttentionBlock the chunked path's query block (default DefaultAttentionBlock).
	Attention      AttentionKind
	AttentionBlock int
}

// Model is a loaded transformer bound to a backend, with its compiled executables.
// It is safe for concurrent use.
type Model struct {
	Config  *Config
	Params  *Params
	Backend compute.Backend
	opts    Options

	scoreExec   *compiles.Exec
	scoreAtExec *compiles.Exec // LogProbsFrom's compact projection
	logitsExec  *compiles.Exec
}

// Load reads config.json and the safetensors weights of a HuggingFace folder.
func Load(backend compute.Backend, dir string, opts Options) (*Model, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	p, err := LoadParams(dir, cfg)
	if err != nil {
		return nil, err
	}
	return New(backend, p, opts)
}

// New binds parameters to a backend and prepares the executables (compiled lazily per shape).
func New(backend compute.Backend, p *Params, opts Options) (*Model, error) {
	if opts.Compute == dtypes.InvalidDType {
		opts.Compute = dtypes.Float32
	}
	if opts.Compute != dtypes.Float32 && opts.Compute != dtypes.BFloat16 && opts.Compute != dtypes.Float16 {
		return nil, fmt.Errorf("compute dtype %s is not supported: want float32, bfloat16 or float16", opts.Compute)
	}
	if opts.LogitsChunk <= 0 {
		opts.LogitsChunk = 256
	}
	if opts.Attention == "" {
		opts.Attention = AttentionAuto
	}
	if _, err := ParseAttention(string(opts.Attention)); err != nil {
		return nil, err
	}
	if opts.AttentionBlock <= 0 {
		opts.AttentionBlock = DefaultAttentionBlock
	}
	if err := CheckComputeDType(backend, opts.Compute); err != nil {
		return nil, err
	}
	m := &Model{Config: p.Config, Params: p, Backend: backend, opts: opts}
	np := len(p.Specs)
	var err error
	m.scoreExec, err = compiles.NewExec(backend, nil, "", func(in []*Node) []*Node {
		net := m.NewNet(opts.Compute, in[:np])
		ids, pos, targets := in[np], in[np+1], in[np+2]
		lp, am := net.TokenLogProbs(net.Forward(ids, pos), targets, opts.LogitsChunk)
		return []*Node{lp, am}
	})
	if err != nil {
		return nil, fmt.Errorf("building score graph: %w", err)
	}
	if m.scoreAtExec, err = compiles.NewExec(backend, nil, "", m.scoreAt); err != nil {
		return nil, fmt.Errorf("building compact score graph: %w", err)
	}
	m.logitsExec, err = compiles.NewExec(backend, nil, "", func(in []*Node) []*Node {
		net := m.NewNet(opts.Compute, in[:np])
		return []*Node{net.Logits(net.Forward(in[np], in[np+1]))}
	})
	if err != nil {
		return nil, fmt.Errorf("building logits graph: %w", err)
	}
	return m, nil
}

// Options returns the effective options.
func (m *Model) Options() Options { return m.opts }

// SetAttention changes how whole-sequence forwards attend (Options.Attention) for the programs
// built from now on: call it before the model's first Score or Logits, and before anything that
// builds nets from it (a trainer, an inference copy), which read it when they build their graphs.
func (m *Model) SetAttention(k AttentionKind) error {
	if _, err := ParseAttention(string(k)); err != nil {
		return err
	}
	m.opts.Attention = k
	return nil
}

// NewNet binds parameter nodes (ParamShapes order) like NewNet, with the model's attention options.
func (m *Model) NewNet(compute dtypes.DType, paramNodes []*Node) *Net {
	n := NewNet(m.Config, compute, paramNodes)
	n.Attention, n.AttentionBlock = m.opts.Attention, m.opts.AttentionBlock
	return n
}

// CountCompiles makes c count the programs Score and Logits compile from now on, under kind (c nil:
// none counted, the default).
func (m *Model) CountCompiles(c *compiles.Counter, kind string) {
	m.scoreExec.Count(c, kind)
	m.scoreAtExec.Count(c, kind)
	m.logitsExec.Count(c, kind)
}

// Close releases compiled executables.
func (m *Model) Close() {
	m.scoreExec.Finalize()
	m.scoreAtExec.Finalize()
	m.logitsExec.Finalize()
}

// Bucket returns the padded length used for a sequence of n tokens: the next power of two ≥ n,
// at least 16, so that a handful of compiled shapes serve every length.
func Bucket(n int) int {
	b := 16
	for b < n {
		b *= 2
	}
	return b
}

// padded lays sequences out as [B, L] ids and positions (−1 marks padding).
func padded(seqs [][]int32, l int) (ids, pos []int32) {
	ids = make([]int32, len(seqs)*l)
	pos = make([]int32, len(seqs)*l)
	for b, s := range seqs {
		for t := 0; t < l; t++ {
			if t < len(s) {
				ids[b*l+t] = s[t]
				pos[b*l+t] = int32(t)
			} else {
				pos[b*l+t] = -1
			}
		}
	}
	return ids, pos
}

func (m *Model) call(e *compiles.Exec, extra ...any) ([]*tensors.Tensor, error) {
	args := make([]any, 0, len(m.Params.Values)+len(extra))
	for _, v := range m.Params.Values {
		args = append(args, v)
	}
	args = append(args, extra...)
	out, err := e.Call(args...)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", e.Name(), err)
	}
	return out, nil
}

func (m *Model) checkIDs(seqs [][]int32) error {
	if len(seqs) == 0 {
		return errors.New("no sequences given")
	}
	for b, s := range seqs {
		if len(s) == 0 {
			return fmt.Errorf("sequence %d is empty", b)
		}
		for t, id := range s {
			if id < 0 || int(id) >= m.Config.VocabSize {
				return fmt.Errorf("sequence %d position %d: token id %d is outside the vocabulary [0, %d)", b, t, id, m.Config.VocabSize)
			}
		}
	}
	return nil
}

// Score is the teacher-forced view of sequences: for each sequence of length T, NextLogProbs[t] is
// log p(ids[t+1] | ids[..t]) for t < T−1, and Argmax[t] the most likely token after ids[..t].
type Score struct {
	NextLogProbs [][]float32
	Argmax       [][]int32
}

// Score runs one batched forward pass over the sequences (padded to a common bucket length).
func (m *Model) Score(seqs [][]int32) (*Score, error) {
	if err := m.checkIDs(seqs); err != nil {
		return nil, err
	}
	l := 0
	for _, s := range seqs {
		l = max(l, len(s))
	}
	l = Bucket(l)
	ids, pos := padded(seqs, l)
	targets := make([]int32, len(ids))
	for b := range seqs {
		copy(targets[b*l:(b+1)*l-1], ids[b*l+1:(b+1)*l])
	}
	bsz := len(seqs)
	out, err := m.call(m.scoreExec,
		tensors.FromFlatDataAndDimensions(ids, bsz, l),
		tensors.FromFlatDataAndDimensions(pos, bsz, l),
		tensors.FromFlatDataAndDimensions(targets, bsz, l))
	if err != nil {
		return nil, err
	}
	lp := tensors.MustCopyFlatData[float32](out[0])
	am := tensors.MustCopyFlatData[int32](out[1])
	for _, o := range out {
		o.FinalizeAll()
	}
	res := &Score{NextLogProbs: make([][]float32, bsz), Argmax: make([][]int32, bsz)}
	for b, s := range seqs {
		res.NextLogProbs[b] = append([]float32{}, lp[b*l:b*l+len(s)-1]...)
		res.Argmax[b] = append([]int32{}, am[b*l:b*l+len(s)]...)
	}
	return res, nil
}

// NextLogProbs is Score's NextLogProbs of one sequence: entry t is log p(ids[t+1] | ids[..t]).
// It is the prompt log-probs a server returns and the probe a weight sync is checked with.
func (m *Model) NextLogProbs(ids []int32) ([]float32, error) {
	sc, err := m.Score([][]int32{ids})
	if err != nil {
		return nil, err
	}
	return sc.NextLogProbs[0], nil
}

// Logits returns the full [T, V] float32 logits of one sequence. It materialises the whole
// vocabulary projection and is meant for checks against reference outputs, not for large models.
func (m *Model) Logits(seq []int32) ([][]float32, error) {
	if err := m.checkIDs([][]int32{seq}); err != nil {
		return nil, err
	}
	l := Bucket(len(seq))
	ids, pos := padded([][]int32{seq}, l)
	out, err := m.call(m.logitsExec,
		tensors.FromFlatDataAndDimensions(ids, 1, l),
		tensors.FromFlatDataAndDimensions(pos, 1, l))
	if err != nil {
		return nil, err
	}
	flat := tensors.MustCopyFlatData[float32](out[0])
	out[0].FinalizeAll()
	v := m.Config.VocabSize
	rows := make([][]float32, len(seq))
	for t := range rows {
		rows[t] = flat[t*v : (t+1)*v]
	}
	return rows, nil
}

// Greedy continues seq by n tokens, each the argmax of the full forward pass over the sequence so
// far (no KV cache: a reference implementation for checks; the rollout engine generates for real).
func (m *Model) Greedy(seq []int32, n int) ([]int32, error) {
	cur := append([]int32{}, seq...)
	for i := 0; i < n; i++ {
		s, err := m.Score([][]int32{cur})
		if err != nil {
			return nil, err
		}
		cur = append(cur, s.Argmax[0][len(cur)-1])
	}
	return cur[len(seq):], nil
}

// writeFileAtomic writes dir/name through a temporary file and a rename.
func writeFileAtomic(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}
