package train

import (
	"errors"
	"fmt"
	"math"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
)

// Metrics of one Step or Update. Means run over the policy tokens of every micro-batch.
type Metrics struct {
	Loss, ClipFrac, ApproxKL, GradNorm float64
	// MaxLogProbDiff is max |trainer log-prob − rollout log-prob| over policy tokens before any
	// update of the call: a stale or mis-synced inference copy shows up here first.
	MaxLogProbDiff, MeanLogProbDiff float64
	Tokens                          int
	// Entropy is the mean entropy of the policy's next-token distribution on policy tokens.
	Entropy float64
	// MeanRatio is the mean importance ratio exp(logp − old) on policy tokens.
	MeanRatio float64
	// RefKL is the mean KL estimate to the reference model (0 without a KL term).
	RefKL float64
	// Updates counts AdamW updates, MicroBatches forward/backward passes; Skipped counts
	// updates left out because their sequences had no policy token.
	Updates, MicroBatches, Skipped int
}

// Indices of the metric vector a training graph returns for each micro-batch.
const (
	mLoss = iota
	mClip
	mRatio
	mApproxKL
	mRefKL
	mEntropy
	mAbsDiff
	mMaxDiff
	mTokens
	numMetrics
)

// dataInputs is the number of per-micro-batch graph inputs: ids, positions, targets, mask, old
// log-probs, advantages, reference log-probs, loss denominator.
const dataInputs = 8

// Trainer updates float32 master weights with the clipped policy loss and AdamW. It owns the
// model's parameter tensors: every update replaces m.Params.Values with the new ones and frees
// the old (their buffers are donated to the update), so nothing else may keep them.
type Trainer struct {
	m       *model.Model
	cfg     Config
	compute dtypes.DType
	normIdx int               // index of model.norm.weight among the parameters
	mom     []*tensors.Tensor // AdamW first moments, one per parameter
	vel     []*tensors.Tensor // second moments
	step    int               // AdamW updates made (the bias-correction t)

	fused     *Exec // one micro-batch: loss, gradient and update in one graph
	gradFirst *Exec // first micro-batch of an accumulated update: gradients
	gradNext  *Exec // later micro-batches: accumulated gradients + these gradients
	apply     *Exec // AdamW on accumulated gradients
	logprob   *Exec // forward only: log p(targets)
}

// New prepares a trainer for m's parameters, with zero AdamW moments.
func New(m *model.Model, cfg Config) (*Trainer, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	tr := &Trainer{m: m, cfg: cfg, compute: m.Options().Compute, normIdx: -1}
	for i, s := range m.Params.Specs {
		if s.Name == "model.norm.weight" {
			tr.normIdx = i
		}
		tr.mom = append(tr.mom, tensors.FromShape(s.Shape()))
		tr.vel = append(tr.vel, tensors.FromShape(s.Shape()))
	}
	if tr.normIdx < 0 && cfg.GradientCheckpointing {
		return nil, errors.New("train: the model has no model.norm.weight parameter, which gradient checkpointing needs")
	}
	np := len(m.Params.Specs)
	var buildErr error
	build := func(name string, fn func(in []*Node) []*Node) *Exec {
		e, err := NewExec(m.Backend, fn)
		if err != nil {
			buildErr = errors.Join(buildErr, fmt.Errorf("train: preparing graph %s: %w", name, err))
			return nil
		}
		return e.WithName(name)
	}
	tr.fused = build("train_fused", func(in []*Node) []*Node {
		params, mom, vel, d := in[:np], in[np:2*np], in[2*np:3*np], in[3*np:]
		out := tr.lossGraph(params, d[:dataInputs])
		grads := Gradient(out.Loss, params...)
		newP, newM, newV, gnorm := AdamW(&tr.cfg, params, grads, mom, vel, d[dataInputs], d[dataInputs+1])
		res := append(append(append([]*Node{}, newP...), newM...), newV...)
		return append(res, metricVector(out), gnorm)
	})
	tr.gradFirst = build("train_grad", func(in []*Node) []*Node {
		params, d := in[:np], in[np:]
		out := tr.lossGraph(params, d)
		return append(Gradient(out.Loss, params...), metricVector(out))
	})
	tr.gradNext = build("train_grad_accumulate", func(in []*Node) []*Node {
		params, acc, d := in[:np], in[np:2*np], in[2*np:]
		out := tr.lossGraph(params, d)
		grads := Gradient(out.Loss, params...)
		res := make([]*Node, np, np+1)
		for i := range grads {
			res[i] = Add(acc[i], grads[i])
		}
		return append(res, metricVector(out))
	})
	tr.apply = build("train_apply", func(in []*Node) []*Node {
		params, acc, mom, vel, rest := in[:np], in[np:2*np], in[2*np:3*np], in[3*np:4*np], in[4*np:]
		newP, newM, newV, gnorm := AdamW(&tr.cfg, params, acc, mom, vel, rest[0], rest[1])
		return append(append(append(newP, newM...), newV...), gnorm)
	})
	tr.logprob = build("train_logprob", func(in []*Node) []*Node {
		net := model.NewNet(m.Config, tr.compute, in[:np])
		ids := in[np]
		lp, _ := TokenStats(net, net.Forward(ids, in[np+1]), in[np+2], tr.cfg.chunkFor(ids.Shape().Dim(0)), false, false)
		return []*Node{lp}
	})
	if buildErr != nil {
		tr.Close()
		return nil, buildErr
	}
	return tr, nil
}

// lossGraph computes the policy loss of one micro-batch from the data inputs (dataInputs of them).
func (tr *Trainer) lossGraph(params, d []*Node) LossOutputs {
	net := model.NewNet(tr.m.Config, tr.compute, params)
	ids, pos, targets := d[0], d[1], d[2]
	var norm *Node
	if tr.normIdx >= 0 {
		norm = params[tr.normIdx]
	}
	ckpt := tr.cfg.GradientCheckpointing
	h := forward(net, norm, ids, pos, ckpt)
	logp, ent := TokenStats(net, h, targets, tr.cfg.chunkFor(ids.Shape().Dim(0)), true, ckpt)
	return PolicyLoss(&tr.cfg, LossInputs{LogProbs: logp, Mask: d[3], OldLogProbs: d[4], Advantages: d[5],
		RefLogProbs: d[6], Entropy: ent, Denom: d[7]})
}

// metricVector stacks the loss outputs in the order of the m* indices.
func metricVector(o LossOutputs) *Node {
	v := make([]*Node, numMetrics)
	v[mLoss], v[mClip], v[mRatio], v[mApproxKL], v[mRefKL] = o.Loss, o.ClipCount, o.RatioSum, o.ApproxKLSum, o.RefKLSum
	v[mEntropy], v[mAbsDiff], v[mMaxDiff], v[mTokens] = o.EntropySum, o.AbsDiffSum, o.MaxAbsDiff, o.Tokens
	return Stack(v, 0)
}

// Close releases the compiled graphs and the optimizer moments.
func (tr *Trainer) Close() {
	for _, e := range []*Exec{tr.fused, tr.gradFirst, tr.gradNext, tr.apply, tr.logprob} {
		if e != nil {
			e.Finalize()
		}
	}
	for i := range tr.mom {
		tr.mom[i].FinalizeAll()
		tr.vel[i].FinalizeAll()
	}
}

// arg is one graph argument and whether its buffer may be handed over to the computation.
type arg struct {
	t      *tensors.Tensor
	donate bool
}

// run compiles e for the arguments' shapes — when that fails nothing has been donated — and
// executes it, donating the marked arguments' device buffers (the runtime may reuse them for the
// outputs, so an update never holds two copies of the weights and moments). Donated tensors are
// freed afterwards, whatever happened.
func (tr *Trainer) run(e *Exec, args []arg) ([]*tensors.Tensor, error) {
	shp := make([]shapes.Shape, len(args))
	for i, a := range args {
		shp[i] = a.t.Shape()
	}
	if _, err := e.Compile(shp...); err != nil {
		return nil, fmt.Errorf("train: compiling %s: %w", e.Name(), err)
	}
	in := make([]any, len(args))
	seen := make(map[*tensors.Tensor]bool, len(args))
	defer func() {
		for _, a := range args {
			if a.donate {
				a.t.FinalizeAll()
			}
		}
	}()
	for i, a := range args {
		in[i] = a.t
		if a.donate && !seen[a.t] {
			seen[a.t] = true
			d, err := DonateTensorBuffer(a.t, tr.m.Backend, 0)
			if err != nil {
				return nil, fmt.Errorf("train: %s argument %d: %w", e.Name(), i, err)
			}
			in[i] = d
		}
	}
	out, err := e.Call(in...)
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w", e.Name(), err)
	}
	return out, nil
}

// dataArgs are the per-micro-batch graph arguments of b with loss denominator denom.
func dataArgs(b *Batch, denom float64) []arg {
	dims := []int{b.B, b.T}
	ts := []*tensors.Tensor{
		tensors.FromFlatDataAndDimensions(b.Inputs, dims...),
		tensors.FromFlatDataAndDimensions(b.Positions, dims...),
		tensors.FromFlatDataAndDimensions(b.Targets, dims...),
		tensors.FromFlatDataAndDimensions(b.Mask, dims...),
		tensors.FromFlatDataAndDimensions(b.OldLogProbs, dims...),
		tensors.FromFlatDataAndDimensions(b.Advantages, dims...),
		tensors.FromFlatDataAndDimensions(b.RefLPs, dims...),
		tensors.FromScalar(float32(denom)),
	}
	out := make([]arg, len(ts))
	for i, t := range ts {
		out[i] = arg{t, true}
	}
	return out
}

func tensorArgs(ts []*tensors.Tensor, donate bool) []arg {
	out := make([]arg, len(ts))
	for i, t := range ts {
		out[i] = arg{t, donate}
	}
	return out
}

// denominator is the loss normaliser of a set of batches: policy tokens (token-mean) or rows
// with a policy token (seq-mean).
func (tr *Trainer) denominator(bs []*Batch) float64 {
	var n float64
	for _, b := range bs {
		for r := 0; r < b.B; r++ {
			var row float64
			for _, m := range b.Mask[r*b.T : (r+1)*b.T] {
				row += float64(m)
			}
			if tr.cfg.Aggregation == SeqMean {
				row = math.Min(row, 1)
			}
			n += row
		}
	}
	return n
}

// tally accumulates per-micro-batch metric vectors into Metrics.
type tally struct {
	sums                  [numMetrics]float64
	probeSum, probeTokens float64
	probeMax              float64
	loss, gnorm           float64
	met                   Metrics
}

func (t *tally) add(v []float32, probe bool) {
	for i, x := range v {
		if i == mMaxDiff {
			t.sums[i] = math.Max(t.sums[i], float64(x))
		} else {
			t.sums[i] += float64(x)
		}
	}
	if probe {
		t.probeSum += float64(v[mAbsDiff])
		t.probeTokens += float64(v[mTokens])
		t.probeMax = math.Max(t.probeMax, float64(v[mMaxDiff]))
	}
	t.loss += float64(v[mLoss])
	t.met.MicroBatches++
}

func (t *tally) result() Metrics {
	m := t.met
	tok := math.Max(t.sums[mTokens], 1)
	m.Tokens = int(t.sums[mTokens])
	if m.Updates > 0 {
		m.Loss, m.GradNorm = t.loss/float64(m.Updates), t.gnorm/float64(m.Updates)
	}
	m.ClipFrac, m.MeanRatio = t.sums[mClip]/tok, t.sums[mRatio]/tok
	m.ApproxKL, m.RefKL, m.Entropy = t.sums[mApproxKL]/tok, t.sums[mRefKL]/tok, t.sums[mEntropy]/tok
	m.MaxLogProbDiff, m.MeanLogProbDiff = t.probeMax, t.probeSum/math.Max(t.probeTokens, 1)
	return m
}

// Update trains on one step's sequences at learning rate lr: it splits them into micro-batches
// of Config.MicroBatch rows (each padded to exactly that many rows and to a power-of-two length
// bucket), sums the gradients of Config.GradAccumulation micro-batches per AdamW update (the loss
// of each update is normalised over all of its micro-batches, so accumulation is exact), clips
// and updates. The log-prob probe in the metrics covers the micro-batches run before the first
// update, when trainer and rollout weights should agree.
func (tr *Trainer) Update(seqs []Sequence, lr float64) (Metrics, error) {
	if len(seqs) == 0 {
		return Metrics{}, errors.New("train: update with no sequences")
	}
	if err := checkLR(lr); err != nil {
		return Metrics{}, err
	}
	for i := range seqs {
		if err := seqs[i].check(i, tr.m.Config.VocabSize, tr.cfg.KLCoef > 0); err != nil {
			return Metrics{}, err
		}
	}
	rows := tr.cfg.MicroBatch
	if rows == 0 {
		rows = len(seqs)
	}
	perUpdate := len(seqs)
	if tr.cfg.GradAccumulation > 0 {
		perUpdate = rows * tr.cfg.GradAccumulation
	}
	startStep := tr.step
	var t tally
	for start := 0; start < len(seqs); start += perUpdate {
		var bs []*Batch
		for _, mb := range microBatches(seqs[start:min(start+perUpdate, len(seqs))], rows) {
			b, err := packRows(mb, rows, 0)
			if err != nil {
				return t.result(), err
			}
			bs = append(bs, b)
		}
		if err := tr.update(bs, lr, &t, tr.step == startStep); err != nil {
			return t.result(), err
		}
	}
	return t.result(), nil
}

// Step runs one update on a single packed micro-batch at learning rate lr and returns its
// metrics. The model's parameter tensors are replaced by the updated ones.
func (tr *Trainer) Step(b *Batch, lr float64) (Metrics, error) {
	if err := checkLR(lr); err != nil {
		return Metrics{}, err
	}
	if tr.cfg.KLCoef > 0 && !b.HasRef {
		return Metrics{}, errors.New("train: the batch has no reference log-probs but the KL coefficient is > 0; pack sequences with RefLogProbs or set KLCoef to 0")
	}
	if err := checkBatch(b, tr.m.Config.VocabSize); err != nil {
		return Metrics{}, err
	}
	var t tally
	err := tr.update([]*Batch{b}, lr, &t, true)
	return t.result(), err
}

func checkLR(lr float64) error {
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return fmt.Errorf("train: learning rate %v; want a finite value ≥ 0", lr)
	}
	return nil
}

// checkBatch checks a packed batch's sizes and token ids.
func checkBatch(b *Batch, vocab int) error {
	n := b.B * b.T
	if b.B <= 0 || b.T <= 0 || len(b.Inputs) != n || len(b.Positions) != n || len(b.Targets) != n || len(b.Mask) != n ||
		len(b.OldLogProbs) != n || len(b.Advantages) != n || len(b.RefLPs) != n {
		return fmt.Errorf("train: batch of %d×%d has slices of the wrong length; build it with Pack", b.B, b.T)
	}
	for k := range b.Inputs {
		if b.Inputs[k] < 0 || int(b.Inputs[k]) >= vocab || b.Targets[k] < 0 || int(b.Targets[k]) >= vocab {
			return fmt.Errorf("train: batch row %d, position %d: token id outside the vocabulary [0, %d)", k/b.T, k%b.T, vocab)
		}
	}
	return nil
}

// update runs one AdamW update over the micro-batches bs (gradients accumulated when more than
// one), adding their metrics to t (to the probe as well when probe).
func (tr *Trainer) update(bs []*Batch, lr float64, t *tally, probe bool) error {
	denom := tr.denominator(bs)
	if denom == 0 {
		t.met.Skipped++
		return nil
	}
	p := tr.m.Params
	np := len(p.Values)
	lrT, stepT := tensors.FromScalar(float32(lr)), tensors.FromScalar(float32(tr.step+1))
	if len(bs) == 1 {
		args := append(append(append(tensorArgs(p.Values, true), tensorArgs(tr.mom, true)...), tensorArgs(tr.vel, true)...), dataArgs(bs[0], denom)...)
		out, err := tr.run(tr.fused, append(args, arg{lrT, true}, arg{stepT, true}))
		if err != nil {
			return err
		}
		tr.adopt(out[:3*np])
		t.add(tensors.MustCopyFlatData[float32](out[3*np]), probe)
		return tr.finishUpdate(out[3*np:], t)
	}
	var acc []*tensors.Tensor
	for i, b := range bs {
		var out []*tensors.Tensor
		var err error
		if i == 0 {
			out, err = tr.run(tr.gradFirst, append(tensorArgs(p.Values, false), dataArgs(b, denom)...))
		} else {
			out, err = tr.run(tr.gradNext, append(append(tensorArgs(p.Values, false), tensorArgs(acc, true)...), dataArgs(b, denom)...))
		}
		if err != nil {
			return err
		}
		acc = out[:np]
		t.add(tensors.MustCopyFlatData[float32](out[np]), probe)
		out[np].FinalizeAll()
	}
	args := append(append(append(tensorArgs(p.Values, true), tensorArgs(acc, true)...), tensorArgs(tr.mom, true)...), tensorArgs(tr.vel, true)...)
	out, err := tr.run(tr.apply, append(args, arg{lrT, true}, arg{stepT, true}))
	if err != nil {
		return err
	}
	tr.adopt(out[:3*np])
	return tr.finishUpdate(out[3*np:], t)
}

// adopt installs updated parameters and moments ([params, m, v], the old ones were donated).
func (tr *Trainer) adopt(out []*tensors.Tensor) {
	np := len(tr.m.Params.Values)
	copy(tr.m.Params.Values, out[:np])
	copy(tr.mom, out[np:2*np])
	copy(tr.vel, out[2*np:3*np])
	tr.step++
}

// finishUpdate reads the gradient norm (and frees what is left of the outputs).
func (tr *Trainer) finishUpdate(rest []*tensors.Tensor, t *tally) error {
	gn := float64(tensors.ToScalar[float32](rest[len(rest)-1]))
	for _, x := range rest {
		x.FinalizeAll()
	}
	t.gnorm += gn
	t.met.Updates++
	if math.IsNaN(gn) || math.IsInf(gn, 0) {
		return fmt.Errorf("train: update %d: the gradient norm is %v; lower the learning rate or check the advantages", tr.step, gn)
	}
	return nil
}

// LogProbs returns log p(Targets) at every position of b under the current parameters ([B][T]).
func (tr *Trainer) LogProbs(b *Batch) ([][]float32, error) { return tr.LogProbsWith(nil, b) }

// LogProbsWith is LogProbs under other parameters of the same shape, such as the frozen
// reference model's (nil: the policy's).
func (tr *Trainer) LogProbsWith(p *model.Params, b *Batch) ([][]float32, error) {
	if p == nil {
		p = tr.m.Params
	}
	if err := tr.sameShape(p); err != nil {
		return nil, err
	}
	if err := checkBatch(b, tr.m.Config.VocabSize); err != nil {
		return nil, err
	}
	dims := []int{b.B, b.T}
	args := append(tensorArgs(p.Values, false),
		arg{tensors.FromFlatDataAndDimensions(b.Inputs, dims...), true},
		arg{tensors.FromFlatDataAndDimensions(b.Positions, dims...), true},
		arg{tensors.FromFlatDataAndDimensions(b.Targets, dims...), true})
	out, err := tr.run(tr.logprob, args)
	if err != nil {
		return nil, err
	}
	flat := tensors.MustCopyFlatData[float32](out[0])
	out[0].FinalizeAll()
	rows := make([][]float32, b.B)
	for i := range rows {
		rows[i] = flat[i*b.T : (i+1)*b.T]
	}
	return rows, nil
}

// SequenceLogProbs scores token sequences teacher-forced under p (nil: the policy): entry t of
// each result is log p(seq[t] | seq[:t]), aligned token for token with the input (entry 0 is 0).
// Sequences run Config.MicroBatch at a time (all at once when 0).
func (tr *Trainer) SequenceLogProbs(p *model.Params, seqs [][]int32) ([][]float32, error) {
	rows := tr.cfg.MicroBatch
	if rows == 0 {
		rows = len(seqs)
	}
	out := make([][]float32, len(seqs))
	for start := 0; start < len(seqs); start += rows {
		part := seqs[start:min(start+rows, len(seqs))]
		ss := make([]Sequence, len(part))
		for i, s := range part {
			for p, tok := range s {
				if tok < 0 || int(tok) >= tr.m.Config.VocabSize {
					return nil, fmt.Errorf("train: sequence %d, token %d: id %d is outside the vocabulary [0, %d)", start+i, p, tok, tr.m.Config.VocabSize)
				}
			}
			n := len(s)
			ss[i] = Sequence{Tokens: s, LossMask: make([]bool, n), OldLogProbs: make([]float32, n), Advantages: make([]float32, n)}
		}
		b, err := packRows(ss, rows, 0)
		if err != nil {
			return nil, fmt.Errorf("train: scoring sequences %d..%d: %w", start, start+len(part)-1, err)
		}
		lp, err := tr.LogProbsWith(p, b)
		if err != nil {
			return nil, err
		}
		for i, s := range part {
			row := make([]float32, len(s))
			copy(row[1:], lp[i][:len(s)-1])
			out[start+i] = row
		}
	}
	return out, nil
}

// sameShape checks that p has the trainer model's parameter shapes.
func (tr *Trainer) sameShape(p *model.Params) error {
	want := tr.m.Params.Specs
	if len(p.Values) != len(want) {
		return fmt.Errorf("train: %d parameter tensors for a model of %d", len(p.Values), len(want))
	}
	for i, s := range want {
		if p.Values[i] == nil || !p.Values[i].Shape().Equal(s.Shape()) {
			return fmt.Errorf("train: parameter %s does not have shape %v; score with a model of the policy's shape", s.Name, s.Dims)
		}
	}
	return nil
}

// Moments returns the AdamW first and second moments (in parameter order) and the update count,
// for checkpoints. The tensors stay the trainer's and are valid until the next update.
func (tr *Trainer) Moments() (m, v []*tensors.Tensor, step int) { return tr.mom, tr.vel, tr.step }

// SetMoments restores moments and the update count saved by Moments (resume). The trainer takes
// the tensors over and frees the ones it held.
func (tr *Trainer) SetMoments(m, v []*tensors.Tensor, step int) error {
	n := len(tr.m.Params.Specs)
	if len(m) != n || len(v) != n {
		return fmt.Errorf("train: %d first and %d second moment tensors for %d parameters; save them with Moments", len(m), len(v), n)
	}
	if step < 0 {
		return fmt.Errorf("train: update count %d; want ≥ 0", step)
	}
	for i, s := range tr.m.Params.Specs {
		if m[i] == nil || v[i] == nil || !m[i].Shape().Equal(s.Shape()) || !v[i].Shape().Equal(s.Shape()) {
			return fmt.Errorf("train: moments of %s are missing or not shaped %s", s.Name, s.Shape())
		}
	}
	for i := range tr.mom {
		if tr.mom[i] != m[i] {
			tr.mom[i].FinalizeAll()
		}
		if tr.vel[i] != v[i] {
			tr.vel[i].FinalizeAll()
		}
	}
	tr.mom, tr.vel, tr.step = append([]*tensors.Tensor{}, m...), append([]*tensors.Tensor{}, v...), step
	return nil
}

// OffloadMoments moves the AdamW moments to host memory, freeing their device buffers (rollout
// needs the room); the next update or RestoreMoments brings them back.
func (tr *Trainer) OffloadMoments() error {
	for i := range tr.mom {
		for _, t := range []*tensors.Tensor{tr.mom[i], tr.vel[i]} {
			if err := t.ToLocal(); err != nil {
				return fmt.Errorf("train: offloading moments of %s: %w", tr.m.Params.Specs[i].Name, err)
			}
		}
	}
	return nil
}

// RestoreMoments moves offloaded moments back onto the device and frees their host copies.
func (tr *Trainer) RestoreMoments() error {
	for i := range tr.mom {
		for _, t := range []*tensors.Tensor{tr.mom[i], tr.vel[i]} {
			if err := t.ToDevice(tr.m.Backend, compute.DeviceNum(0)); err != nil {
				return fmt.Errorf("train: restoring moments of %s: %w", tr.m.Params.Specs[i].Name, err)
			}
		}
	}
	return nil
}

// Footprint is what the trainer keeps between calls, in bytes, by memory-ledger component.
// Gradients exist only inside Step and Update (one float32 copy of the parameters when
// accumulating, transient otherwise) and are not listed.
type Footprint struct {
	MasterWeights    int64 // float32 parameters on the device
	OptimizerMoments int64 // AdamW m and v on the device
	HostMoments      int64 // AdamW m and v held only in host memory (offloaded)
}

// Footprint reports the bytes the trainer holds now.
func (tr *Trainer) Footprint() Footprint {
	var f Footprint
	for _, t := range tr.m.Params.Values {
		if t.IsOnDevice(0) {
			f.MasterWeights += int64(t.Memory())
		}
	}
	for i := range tr.mom {
		for _, t := range []*tensors.Tensor{tr.mom[i], tr.vel[i]} {
			if t.IsOnDevice(0) {
				f.OptimizerMoments += int64(t.Memory())
			} else {
				f.HostMoments += int64(t.Memory())
			}
		}
	}
	return f
}

// SFTStep is one supervised step: it raises the log-likelihood of the masked tokens (the
// clipped surrogate at ratio 1 with advantage 1 has exactly the log-likelihood's gradient) and
// returns their mean negative log-likelihood before the update.
func (tr *Trainer) SFTStep(seqs []Sequence, lr float64) (float64, error) {
	for i := range seqs {
		seqs[i].Advantages = make([]float32, len(seqs[i].Tokens))
		seqs[i].OldLogProbs = make([]float32, len(seqs[i].Tokens))
		for j := range seqs[i].Advantages {
			seqs[i].Advantages[j] = 1
		}
	}
	b, err := Pack(seqs, 0)
	if err != nil {
		return 0, err
	}
	lp, err := tr.LogProbs(b)
	if err != nil {
		return 0, err
	}
	var nll, n float64
	for i := 0; i < b.B; i++ {
		for p := 0; p < b.T; p++ {
			if k := i*b.T + p; b.Mask[k] > 0 {
				b.OldLogProbs[k] = lp[i][p]
				nll -= float64(lp[i][p])
				n++
			}
		}
	}
	if _, err := tr.Step(b, lr); err != nil {
		return 0, err
	}
	return nll / max(n, 1), nil
}
