package train

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

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
	// NLL is the mean negative log-likelihood of the policy tokens, each micro-batch's under the
	// parameters it was trained at (in one update per call, as SFT runs it: before the update).
	NLL float64
	// RefKL is the mean KL estimate to the reference model (0 without a KL term).
	RefKL float64
	// ValueLoss is the mean ½(V − R)² over policy tokens (unclipped, not × ValueCoef), before any
	// update of the call's micro-batches; ExplainedVariance is 1 − Var(R − V) ÷ Var(R) over the
	// same tokens (0 when the returns do not vary); ValueClipFrac is the fraction of policy tokens
	// whose clipped value branch is active. All 0 without a value head.
	ValueLoss, ExplainedVariance, ValueClipFrac float64
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
	mNLL
	numMetrics
)

// Indices of the value head's metrics, appended to the vector when there is a value head.
const (
	mValueSq = numMetrics + iota
	mValueClip
	mReturnSum
	mReturnSq
	mResidSum
	numAllMetrics
)

// dataInputs is the number of per-micro-batch graph inputs: ids, positions, targets, mask, old
// log-probs, advantages, reference log-probs, loss denominator, and the vocabulary projection's
// positions (headArgs' two). A trainer with a value head
// appends the returns (and, with value clipping, the old values): see Trainer.dataArgs.
const dataInputs = 10

// Trainer updates float32 master weights with the clipped policy loss and AdamW. It owns the
// model's parameter tensors: every update replaces m.Params.Values with the new ones and frees
// the old (their buffers are donated to the update), so nothing else may keep them.
//
// With Config.ValueCoef > 0 it also owns a value head (PPO's critic): a linear map from the
// final normed hidden state to a scalar, value_head.weight [hidden] and value_head.bias [] in
// float32, initialised to zero (V = 0 at the start). Its parameters follow the model's in every
// graph (trained by the same AdamW update, with their own moments, inside the same global-norm
// clip; being 1-D and 0-D they get no weight decay); Values, ValueHead and SetValueHead expose it.
type Trainer struct {
	m       *model.Model
	cfg     Config
	compute dtypes.DType
	normIdx int               // index of model.norm.weight among the parameters
	train   []int             // the trained model parameters (all, or a LoRA model's adapters): lora.go
	mom     []*tensors.Tensor // AdamW first moments, one per trained model parameter
	vel     []*tensors.Tensor // second moments
	step    int               // AdamW updates made (the bias-correction t)
	// graphOptimizer keeps AdamW in the graph where the host optimizer would run (tests).
	graphOptimizer bool

	nh               int               // value head parameters: 2 with a value head, 0 without
	head             []*tensors.Tensor // value_head.weight, value_head.bias
	headMom, headVel []*tensors.Tensor // their AdamW moments

	fused     *Exec // one micro-batch: loss, gradient and update in one graph
	gradFirst *Exec // first micro-batch of an accumulated update: gradients
	gradNext  *Exec // later micro-batches: accumulated gradients + these gradients
	apply     *Exec // AdamW on accumulated gradients
	logprob   *Exec // forward only: log p(targets)
	value     *Exec // forward only: the value head's V (nil without one)
}

// New prepares a trainer for m's parameters, with zero AdamW moments.
func New(m *model.Model, cfg Config) (*Trainer, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	tr := &Trainer{m: m, cfg: cfg, compute: m.Options().Compute, normIdx: -1, train: m.Params.TrainableIndices()}
	for i, s := range m.Params.Specs {
		if s.Name == "model.norm.weight" {
			tr.normIdx = i
		}
		if !slices.Contains(tr.train, i) {
			continue // a frozen LoRA base has no moments
		}
		tr.mom = append(tr.mom, tensors.FromShape(MomentShape(cfg.OptimizerBits, s.Shape())))
		tr.vel = append(tr.vel, tensors.FromShape(MomentShape(cfg.OptimizerBits, s.Shape())))
	}
	if tr.normIdx < 0 && cfg.GradientCheckpointing {
		return nil, errors.New("train: the model has no model.norm.weight parameter, which gradient checkpointing needs")
	}
	if cfg.ValueCoef > 0 {
		tr.nh = 2
		for _, s := range valueHeadShapes(m.Config.HiddenSize) {
			tr.head = append(tr.head, tensors.FromShape(s))
			tr.headMom = append(tr.headMom, tensors.FromShape(s))
			tr.headVel = append(tr.headVel, tensors.FromShape(s))
		}
	}
	np := len(m.Params.Specs)
	// graph parameters (model, then value head), the trained ones among them, data inputs
	nt, nk, nd := np+tr.nh, tr.numTrained(), tr.numData()
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
		params, mom, vel, d := in[:nt], in[nt:nt+nk], in[nt+nk:nt+2*nk], in[nt+2*nk:]
		out := tr.lossGraph(params, d[:nd])
		trained := tr.trainedNodes(params)
		grads := Gradient(out.Loss, trained...)
		newP, newM, newV, gnorm := tr.adamW(trained, grads, mom, vel, d[nd], d[nd+1])
		res := append(append(append([]*Node{}, newP...), newM...), newV...)
		return append(res, out.metrics(), gnorm)
	})
	tr.gradFirst = build("train_grad", func(in []*Node) []*Node {
		params, d := in[:nt], in[nt:]
		out := tr.lossGraph(params, d)
		return append(Gradient(out.Loss, tr.trainedNodes(params)...), out.metrics())
	})
	tr.gradNext = build("train_grad_accumulate", func(in []*Node) []*Node {
		params, acc, d := in[:nt], in[nt:nt+nk], in[nt+nk:]
		out := tr.lossGraph(params, d)
		grads := Gradient(out.Loss, tr.trainedNodes(params)...)
		res := make([]*Node, nk, nk+1)
		for i := range grads {
			res[i] = Add(acc[i], grads[i])
		}
		return append(res, out.metrics())
	})
	tr.apply = build("train_apply", func(in []*Node) []*Node {
		params, acc, mom, vel, rest := in[:nk], in[nk:2*nk], in[2*nk:3*nk], in[3*nk:4*nk], in[4*nk:]
		newP, newM, newV, gnorm := tr.adamW(params, acc, mom, vel, rest[0], rest[1])
		return append(append(append(newP, newM...), newV...), gnorm)
	})
	tr.logprob = build("train_logprob", func(in []*Node) []*Node {
		net := tr.m.NewNet(tr.compute, in[:np])
		ids := in[np]
		lp, _ := TokenStats(net, net.Forward(ids, in[np+1]), in[np+2], tr.cfg.chunkFor(ids.Shape().Dim(0)), false, false)
		return []*Node{lp}
	})
	if tr.nh > 0 {
		tr.value = build("train_value", func(in []*Node) []*Node {
			net := tr.m.NewNet(tr.compute, in[:np])
			return []*Node{valueOf(net.Forward(in[nt], in[nt+1]), in[np], in[np+1], false)}
		})
	}
	if buildErr != nil {
		tr.Close()
		return nil, buildErr
	}
	return tr, nil
}

// adamW is AdamW over the trained parameters, with the value head's step scaled by
// Config.ValueLRScale (the head has no weight decay, so this is its update at lr × the scale).
func (tr *Trainer) adamW(params, grads, mom, vel []*Node, lr, t *Node) (newP, newM, newV []*Node, gnorm *Node) {
	newP, newM, newV, gnorm = AdamW(&tr.cfg, params, grads, mom, vel, lr, t)
	if s := tr.cfg.ValueLRScale; tr.nh > 0 && s != 1 {
		for i := len(params) - tr.nh; i < len(params); i++ {
			newP[i] = Add(params[i], MulScalar(Sub(newP[i], params[i]), s))
		}
	}
	return newP, newM, newV, gnorm
}

// numData is the number of per-micro-batch data inputs of the training graphs: dataInputs, plus
// the returns with a value head, plus the old values with value clipping.
func (tr *Trainer) numData() int {
	n := dataInputs
	if tr.nh > 0 {
		n++
		if tr.cfg.ValueClip > 0 {
			n++
		}
	}
	return n
}

// stepOutputs are the outputs of one micro-batch's loss graph: the policy loss's (with Loss the
// total, policy + ValueCoef·value loss) and the value loss's (nil without a value head).
type stepOutputs struct {
	LossOutputs
	Value *ValueOutputs
}

// lossGraph computes the loss of one micro-batch from the trained parameters (the model's, then
// the value head's) and the data inputs (numData of them).
func (tr *Trainer) lossGraph(params, d []*Node) stepOutputs {
	np := len(tr.m.Params.Specs)
	net := tr.m.NewNet(tr.compute, params[:np])
	net.Differentiated = true
	ids, pos, targets := d[0], d[1], d[2]
	var norm *Node
	if tr.normIdx >= 0 {
		norm = params[tr.normIdx]
	}
	ckpt := tr.cfg.GradientCheckpointing
	h := forward(net, norm, ids, pos, ckpt)
	logp, ent := tokenStatsAt(net, h, targets, d[8], d[9], tr.cfg.chunkFor(ids.Shape().Dim(0)), true, ckpt)
	out := stepOutputs{LossOutputs: PolicyLoss(&tr.cfg, LossInputs{LogProbs: logp, Mask: d[3], OldLogProbs: d[4], Advantages: d[5],
		RefLogProbs: d[6], Entropy: ent, Denom: d[7]})}
	if tr.nh > 0 {
		in := ValueInputs{Values: valueOf(h, params[np], params[np+1], tr.cfg.ValueShared), Returns: d[dataInputs], Mask: d[3], Denom: d[7]}
		if tr.cfg.ValueClip > 0 {
			in.OldValues = d[dataInputs+1]
		}
		vo := ValueLoss(&tr.cfg, in)
		out.Value = &vo
		out.Loss = Add(out.Loss, MulScalar(vo.Loss, tr.cfg.ValueCoef))
	}
	return out
}

// metrics is the metric vector of a micro-batch: metricVector, then with a value head its sums
// in the order of the mValue… indices.
func (o stepOutputs) metrics() *Node {
	v := metricVector(o.LossOutputs)
	if o.Value == nil {
		return v
	}
	vo := o.Value
	return Concatenate([]*Node{v, Stack([]*Node{vo.SqErrSum, vo.ClipCount, vo.ReturnSum, vo.ReturnSq, vo.ResidSum}, 0)}, 0)
}

// metricVector stacks the loss outputs in the order of the m* indices.
func metricVector(o LossOutputs) *Node {
	v := make([]*Node, numMetrics)
	v[mLoss], v[mClip], v[mRatio], v[mApproxKL], v[mRefKL] = o.Loss, o.ClipCount, o.RatioSum, o.ApproxKLSum, o.RefKLSum
	v[mEntropy], v[mAbsDiff], v[mMaxDiff], v[mTokens], v[mNLL] = o.EntropySum, o.AbsDiffSum, o.MaxAbsDiff, o.Tokens, o.NLLSum
	return Stack(v, 0)
}

// params are the trained parameter tensors: the model's (a LoRA model's adapters), then the
// value head's.
func (tr *Trainer) params() []*tensors.Tensor {
	out := make([]*tensors.Tensor, 0, tr.numTrained())
	for _, i := range tr.train {
		out = append(out, tr.m.Params.Values[i])
	}
	return append(out, tr.head...)
}

// moments are the AdamW moments of params, in the same order.
func (tr *Trainer) moments() (m, v []*tensors.Tensor) {
	return append(append([]*tensors.Tensor{}, tr.mom...), tr.headMom...), append(append([]*tensors.Tensor{}, tr.vel...), tr.headVel...)
}

// Close releases the compiled graphs, the optimizer moments and the value head.
func (tr *Trainer) Close() {
	if tr == nil { // an evaluation-only run builds none
		return
	}
	for _, e := range []*Exec{tr.fused, tr.gradFirst, tr.gradNext, tr.apply, tr.logprob, tr.value} {
		if e != nil {
			e.Finalize()
		}
	}
	m, v := tr.moments()
	for i := range m {
		m[i].FinalizeAll()
		v[i].FinalizeAll()
	}
	for _, x := range tr.head {
		x.FinalizeAll()
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
	if err := tr.cfg.Compiles.Compile(e, tr.compileKind(e), shp...); err != nil {
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

// dataArgs are the trainer's per-micro-batch graph arguments of b with loss denominator denom:
// the policy's (the package function), then the value head's.
func (tr *Trainer) dataArgs(b *Batch, denom float64) []arg {
	out := dataArgs(b, denom, tr.compactHead())
	if tr.nh > 0 {
		out = append(out, arg{tensors.FromFlatDataAndDimensions(b.Returns, b.B, b.T), true})
		if tr.cfg.ValueClip > 0 {
			out = append(out, arg{tensors.FromFlatDataAndDimensions(b.OldValues, b.B, b.T), true})
		}
	}
	return out
}

// dataArgs are the per-micro-batch policy-loss graph arguments of b with loss denominator denom,
// the vocabulary projected only at the loss's positions when compact (headArgs).
func dataArgs(b *Batch, denom float64, compact bool) []arg {
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
	return append(out, headArgs(b, compact)...)
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
	sums                  [numAllMetrics]float64
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
	m.ApproxKL, m.RefKL, m.Entropy, m.NLL = t.sums[mApproxKL]/tok, t.sums[mRefKL]/tok, t.sums[mEntropy]/tok, t.sums[mNLL]/tok
	m.MaxLogProbDiff, m.MeanLogProbDiff = t.probeMax, t.probeSum/math.Max(t.probeTokens, 1)
	m.ValueLoss, m.ValueClipFrac = t.sums[mValueSq]/tok, t.sums[mValueClip]/tok
	// Var(R) and Var(R − V) from sums; Σ(R − V)² = 2·Σ½(V − R)².
	meanR, meanRes := t.sums[mReturnSum]/tok, t.sums[mResidSum]/tok
	varR := t.sums[mReturnSq]/tok - meanR*meanR
	varRes := 2*t.sums[mValueSq]/tok - meanRes*meanRes
	if varR > 1e-5*t.sums[mReturnSq]/tok { // below: float32 rounding of the sums, not spread
		m.ExplainedVariance = 1 - varRes/varR
	}
	return m
}

// Update trains on one step's sequences at learning rate lr: it splits them into micro-batches
// of Config.MicroBatch rows (each padded to exactly that many rows and to a power-of-two length
// bucket), sums the gradients of Config.GradAccumulation micro-batches per AdamW update (the loss
// of each update is normalised over all of its micro-batches, so accumulation is exact), clips
// and updates. The log-prob probe in the metrics covers the micro-batches run before the first
// update, when trainer and rollout weights should agree.
func (tr *Trainer) Update(seqs []Sequence, lr float64) (Metrics, error) {
	return tr.UpdateUntil(seqs, lr, nil)
}

// ErrStopped is UpdateUntil's error when its stop function ended the update early.
var ErrStopped = errors.New("train: update stopped")

// UpdateUntil is Update that asks stop, before each micro-batch, whether to go on: stop(done,
// total) with done of the call's total micro-batches finished. When stop returns true the
// update ends there with ErrStopped; the AdamW updates already applied stay applied (Snapshot
// and Restore undo them). A nil stop never stops.
func (tr *Trainer) UpdateUntil(seqs []Sequence, lr float64, stop func(done, total int) bool) (Metrics, error) {
	if len(seqs) == 0 {
		return Metrics{}, errors.New("train: update with no sequences")
	}
	if err := checkLR(lr); err != nil {
		return Metrics{}, err
	}
	for i := range seqs {
		if err := seqs[i].check(i, tr.m.Config.VocabSize, &tr.cfg); err != nil {
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
	var p *progress
	if stop != nil {
		p = &progress{stop: stop, total: (len(seqs) + rows - 1) / rows}
	}
	for start := 0; start < len(seqs); start += perUpdate {
		var bs []*Batch
		for _, mb := range microBatches(seqs[start:min(start+perUpdate, len(seqs))], rows) {
			b, err := packRows(mb, rows, 0)
			if err != nil {
				return t.result(), err
			}
			bs = append(bs, b)
		}
		if err := tr.update(bs, lr, &t, tr.step == startStep, p); err != nil {
			return t.result(), err
		}
	}
	return t.result(), nil
}

// progress asks an update's stop function before each micro-batch; nil asks nothing.
type progress struct {
	stop        func(done, total int) bool
	done, total int
}

// next reports whether the next micro-batch may run.
func (p *progress) next() bool {
	if p == nil {
		return true
	}
	if p.stop(p.done, p.total) {
		return false
	}
	p.done++
	return true
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
	if tr.nh > 0 {
		if !b.HasReturns || len(b.Returns) != b.B*b.T {
			return Metrics{}, errors.New("train: the batch has no returns but ValueCoef is > 0 (the value head needs targets); pack sequences with Returns or set ValueCoef to 0")
		}
		if tr.cfg.ValueClip > 0 && (!b.HasOldValues || len(b.OldValues) != b.B*b.T) {
			return Metrics{}, errors.New("train: the batch has no old values but ValueClip is > 0; pack sequences with OldValues or set ValueClip to 0")
		}
	}
	var t tally
	err := tr.update([]*Batch{b}, lr, &t, true, nil)
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
func (tr *Trainer) update(bs []*Batch, lr float64, t *tally, probe bool, p *progress) error {
	denom := tr.denominator(bs)
	if denom == 0 {
		t.met.Skipped++
		return nil
	}
	if !p.next() {
		return ErrStopped
	}
	if tr.hostOptimizer() {
		acc, err := tr.gradients(bs, denom, t, probe, p)
		if err != nil {
			return err
		}
		gn, err := tr.hostAdamW(acc, lr)
		for _, a := range acc {
			a.FinalizeAll()
		}
		if err != nil {
			return err
		}
		return tr.countUpdate(gn, t)
	}
	params := tr.params()
	mom, vel := tr.moments()
	nt := len(params)
	lrT, stepT := tensors.FromScalar(float32(lr)), tensors.FromScalar(float32(tr.step+1))
	if len(bs) == 1 {
		args := append(append(append(tr.paramArgs(true), tensorArgs(mom, true)...), tensorArgs(vel, true)...), tr.dataArgs(bs[0], denom)...)
		out, err := tr.run(tr.fused, append(args, arg{lrT, true}, arg{stepT, true}))
		if err != nil {
			return err
		}
		tr.adopt(out[:3*nt])
		t.add(tensors.MustCopyFlatData[float32](out[3*nt]), probe)
		return tr.finishUpdate(out[3*nt:], t)
	}
	acc, err := tr.gradients(bs, denom, t, probe, p)
	if err != nil {
		return err
	}
	args := append(append(append(tensorArgs(params, true), tensorArgs(acc, true)...), tensorArgs(mom, true)...), tensorArgs(vel, true)...)
	out, err := tr.run(tr.apply, append(args, arg{lrT, true}, arg{stepT, true}))
	if err != nil {
		return err
	}
	tr.adopt(out[:3*nt])
	return tr.finishUpdate(out[3*nt:], t)
}

// gradients runs the gradient graphs over the micro-batches bs (the first's progress already
// counted by the caller) and returns the summed gradients of the trained parameters, adding the
// micro-batches' metrics to t.
func (tr *Trainer) gradients(bs []*Batch, denom float64, t *tally, probe bool, p *progress) ([]*tensors.Tensor, error) {
	nt := tr.numTrained()
	var acc []*tensors.Tensor
	for i, b := range bs {
		if i > 0 && !p.next() {
			for _, a := range acc {
				a.FinalizeAll()
			}
			return nil, ErrStopped // nothing applied: the accumulated gradients are dropped
		}
		var out []*tensors.Tensor
		var err error
		if i == 0 {
			out, err = tr.run(tr.gradFirst, append(tr.paramArgs(false), tr.dataArgs(b, denom)...))
		} else {
			out, err = tr.run(tr.gradNext, append(append(tr.paramArgs(false), tensorArgs(acc, true)...), tr.dataArgs(b, denom)...))
		}
		if err != nil {
			return nil, err
		}
		acc = out[:nt]
		t.add(tensors.MustCopyFlatData[float32](out[nt]), probe)
		out[nt].FinalizeAll()
	}
	return acc, nil
}

// adopt installs updated parameters and moments ([params, m, v] in params order, the model's then
// the value head's; the old ones were donated).
func (tr *Trainer) adopt(out []*tensors.Tensor) {
	nk, nm := tr.numTrained(), len(tr.train)
	tr.setTrained(out[:nk])
	copy(tr.mom, out[nk:nk+nm])
	copy(tr.headMom, out[nk+nm:2*nk])
	copy(tr.vel, out[2*nk:2*nk+nm])
	copy(tr.headVel, out[2*nk+nm:3*nk])
	tr.step++
}

// finishUpdate reads the gradient norm (and frees what is left of the outputs).
func (tr *Trainer) finishUpdate(rest []*tensors.Tensor, t *tally) error {
	gn := float64(tensors.ToScalar[float32](rest[len(rest)-1]))
	for _, x := range rest {
		x.FinalizeAll()
	}
	return tr.countUpdate(gn, t)
}

// countUpdate adds an applied update with gradient norm gn to t; a norm that is not finite is
// an error.
func (tr *Trainer) countUpdate(gn float64, t *tally) error {
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
// Sequences run Config.MicroBatch at a time (all at once when 0), longest first like the
// update's micro-batches, so that each micro-batch pads to the length bucket of sequences of
// about its own length rather than to the longest of the call.
func (tr *Trainer) SequenceLogProbs(p *model.Params, seqs [][]int32) ([][]float32, error) {
	rows := tr.cfg.MicroBatch
	if rows == 0 {
		rows = len(seqs)
	}
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(seqs[order[a]]) > len(seqs[order[b]]) })
	out := make([][]float32, len(seqs))
	for start := 0; start < len(seqs); start += rows {
		idx := order[start:min(start+rows, len(seqs))]
		part := make([][]int32, len(idx))
		ss := make([]Sequence, len(idx))
		for i, k := range idx {
			s := seqs[k]
			part[i] = s
			for p, tok := range s {
				if tok < 0 || int(tok) >= tr.m.Config.VocabSize {
					return nil, fmt.Errorf("train: sequence %d, token %d: id %d is outside the vocabulary [0, %d)", k, p, tok, tr.m.Config.VocabSize)
				}
			}
			n := len(s)
			ss[i] = Sequence{Tokens: s, LossMask: make([]bool, n), OldLogProbs: make([]float32, n), Advantages: make([]float32, n)}
		}
		b, err := packRows(ss, rows, 0)
		if err != nil {
			return nil, fmt.Errorf("train: scoring sequences %v: %w", idx, err)
		}
		lp, err := tr.LogProbsWith(p, b)
		if err != nil {
			return nil, err
		}
		for i, s := range part {
			row := make([]float32, len(s))
			copy(row[1:], lp[i][:len(s)-1])
			out[idx[i]] = row
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
		if p.Values[i] == nil || !slices.Equal(p.Values[i].Shape().Dimensions, s.Dims) { // a LoRA base is in the compute dtype
			return fmt.Errorf("train: parameter %s does not have shape %v; score with a model of the policy's shape", s.Name, s.Dims)
		}
	}
	return nil
}

// Moments returns the AdamW first and second moments (in TrainedSpecs order) and the update count,
// for checkpoints. The tensors stay the trainer's and are valid until the next update.
func (tr *Trainer) Moments() (m, v []*tensors.Tensor, step int) { return tr.mom, tr.vel, tr.step }

// SetMoments restores moments and the update count saved by Moments (resume). The trainer takes
// the tensors over and frees the ones it held.
func (tr *Trainer) SetMoments(m, v []*tensors.Tensor, step int) error {
	specs := tr.TrainedSpecs()
	n := len(specs)
	if len(m) != n || len(v) != n {
		return fmt.Errorf("train: %d first and %d second moment tensors for %d parameters; save them with Moments", len(m), len(v), n)
	}
	if step < 0 {
		return fmt.Errorf("train: update count %d; want ≥ 0", step)
	}
	for i, s := range specs {
		if m[i] == nil || v[i] == nil || !m[i].Shape().Equal(MomentShape(tr.cfg.OptimizerBits, s.Shape())) || !v[i].Shape().Equal(MomentShape(tr.cfg.OptimizerBits, s.Shape())) {
			return fmt.Errorf("train: moments of %s are missing or not shaped %s", s.Name, MomentShape(tr.cfg.OptimizerBits, s.Shape()))
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

// OffloadMoments moves the AdamW moments (the value head's too) to host memory, freeing their
// device buffers (rollout needs the room); the next update or RestoreMoments brings them back.
func (tr *Trainer) OffloadMoments() error {
	m, v := tr.moments()
	for i := range m {
		for _, t := range []*tensors.Tensor{m[i], v[i]} {
			if err := t.ToLocal(); err != nil {
				return fmt.Errorf("train: offloading moments of %s: %w", tr.paramName(i), err)
			}
		}
	}
	return nil
}

// RestoreMoments moves offloaded moments back onto the device and frees their host copies.
func (tr *Trainer) RestoreMoments() error {
	m, v := tr.moments()
	for i := range m {
		for _, t := range []*tensors.Tensor{m[i], v[i]} {
			if err := t.ToDevice(tr.m.Backend, compute.DeviceNum(0)); err != nil {
				return fmt.Errorf("train: restoring moments of %s: %w", tr.paramName(i), err)
			}
		}
	}
	return nil
}

// paramName is the name of trained parameter i (params order: the model's, then the value head's).
func (tr *Trainer) paramName(i int) string {
	if nm := len(tr.train); i >= nm {
		return []string{ValueHeadWeight, ValueHeadBias}[i-nm]
	}
	return tr.m.Params.Specs[tr.train[i]].Name
}

// Footprint is what the trainer keeps between calls, in bytes, by memory-ledger component.
// Gradients exist only inside Step and Update (one float32 copy of the parameters when
// accumulating, transient otherwise) and are not listed.
type Footprint struct {
	MasterWeights    int64 // float32 parameters (and value head) on the device
	OptimizerMoments int64 // AdamW m and v on the device
	HostMoments      int64 // AdamW m and v held only in host memory (offloaded)
}

// Footprint reports the bytes the trainer holds now. A tensor given up to an update that did not
// return (an error, a stop) holds nothing and is not counted: the ledger read after a failed step
// must not panic over it (seen on the first GPU run, docs/gpu/2026-11-27-h100.md).
func (tr *Trainer) Footprint() Footprint {
	if tr == nil { // an evaluation-only run builds none
		return Footprint{}
	}
	var f Footprint
	f.MasterWeights, f.OptimizerMoments = tr.OnDevice()
	m, v := tr.moments()
	for i := range m {
		for _, t := range []*tensors.Tensor{m[i], v[i]} {
			if t.Ok() && !onDevice(t) {
				f.HostMoments += int64(t.Memory())
			}
		}
	}
	return f
}

// OnPolicy reports Config.OnPolicy: the surrogate's old log-probs are the trained model's own.
func (tr *Trainer) OnPolicy() bool { return tr.cfg.OnPolicy }

// SFTStep is one supervised step: it raises the log-likelihood of the masked tokens (the
// clipped surrogate at ratio 1 with advantage 1 has exactly the log-likelihood's gradient) and
// returns their mean negative log-likelihood before the update. With Config.OnPolicy the ratio's
// old log-probs are the graph's own and the step is one forward/backward pass; without, a
// log-probs pass gives them first. It needs a trainer without a value head (supervised data has
// no returns).
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
	if tr.cfg.OnPolicy { // the old log-probs are the graph's own: no pass before the update
		met, err := tr.Step(b, lr)
		return met.NLL, err
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
