package train

import (
	"errors"
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
)

// Config holds the policy-loss and optimizer settings (the controller maps the recipe onto it).
type Config struct {
	ClipLow, ClipHigh float64 // PPO ratio clip bounds: [1 − low, 1 + high] (default 0.2, 0.28)
	KLCoef            float64 // weight of the KL-to-reference loss term (0 = off)
	KLEstimator       string  // k1 | k3 (default k3)
	Aggregation       string  // token-mean | seq-mean (default token-mean)

	LR, WeightDecay float64 // AdamW (default lr 1e-5, wd 0)
	Beta1, Beta2    float64 // default 0.9, 0.999
	Eps             float64 // default 1e-8
	GradClip        float64 // global-norm clip (0 = off)
	LogitsChunk     int     // positions projected onto the vocabulary at once (default 256)
}

func (c *Config) fill() error {
	if c.ClipLow == 0 {
		c.ClipLow = 0.2
	}
	if c.ClipHigh == 0 {
		c.ClipHigh = 0.28
	}
	if c.KLEstimator == "" {
		c.KLEstimator = "k3"
	}
	if c.KLEstimator != "k1" && c.KLEstimator != "k3" {
		return fmt.Errorf("train: kl estimator %q is not one of k1, k3", c.KLEstimator)
	}
	if c.Aggregation == "" {
		c.Aggregation = "token-mean"
	}
	if c.Aggregation != "token-mean" && c.Aggregation != "seq-mean" {
		return fmt.Errorf("train: aggregation %q is not one of token-mean, seq-mean", c.Aggregation)
	}
	if c.LR == 0 {
		c.LR = 1e-5
	}
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	if c.LogitsChunk <= 0 {
		c.LogitsChunk = 256
	}
	return nil
}

// Batch is a padded micro-batch, all [B, T]: Inputs are the tokens fed, Targets the next tokens
// whose log-probs are trained, Mask 1 on policy tokens, OldLogProbs from the sampler, Advantages
// per token, RefLogProbs from the reference model (used only when KLCoef > 0).
type Batch struct {
	B, T                                  int
	Inputs, Positions, Targets            []int32
	Mask, OldLogProbs, Advantages, RefLPs []float32
}

// Sequence is one trajectory as the trainer sees it: the exact sampled tokens (never
// re-tokenised text), which of them the policy produced, and per-token values aligned with
// Tokens (entry t concerns Tokens[t]; entries for non-policy tokens are ignored).
type Sequence struct {
	Tokens      []int32
	LossMask    []bool
	OldLogProbs []float32
	Advantages  []float32
	RefLogProbs []float32
}

// Pack lays sequences out as a batch padded to length t (Bucket of the longest when 0).
func Pack(seqs []Sequence, t int) (*Batch, error) {
	if len(seqs) == 0 {
		return nil, errors.New("train: empty batch")
	}
	for i, s := range seqs {
		n := len(s.Tokens)
		if len(s.LossMask) != n || len(s.OldLogProbs) != n || len(s.Advantages) != n || (s.RefLogProbs != nil && len(s.RefLogProbs) != n) {
			return nil, fmt.Errorf("train: sequence %d: tokens, mask, log-probs and advantages must have equal lengths", i)
		}
		if n < 2 {
			return nil, fmt.Errorf("train: sequence %d has %d tokens; need at least 2", i, n)
		}
		if t == 0 || n-1 > t {
			t = max(t, model.Bucket(n-1))
		}
	}
	b := &Batch{B: len(seqs), T: t}
	size := b.B * t
	b.Inputs, b.Positions, b.Targets = make([]int32, size), make([]int32, size), make([]int32, size)
	b.Mask, b.OldLogProbs, b.Advantages, b.RefLPs = make([]float32, size), make([]float32, size), make([]float32, size), make([]float32, size)
	for i, s := range seqs {
		for p := 0; p < t; p++ {
			k := i*t + p
			b.Positions[k] = -1
			if p >= len(s.Tokens)-1 {
				continue
			}
			// Position p predicts token p+1.
			b.Inputs[k], b.Positions[k], b.Targets[k] = s.Tokens[p], int32(p), s.Tokens[p+1]
			if s.LossMask[p+1] {
				b.Mask[k] = 1
				b.OldLogProbs[k] = s.OldLogProbs[p+1]
				b.Advantages[k] = s.Advantages[p+1]
				if s.RefLogProbs != nil {
					b.RefLPs[k] = s.RefLogProbs[p+1]
				}
			}
		}
	}
	return b, nil
}

// Metrics of one update.
type Metrics struct {
	Loss, ClipFrac, ApproxKL, GradNorm float64
	// MaxLogProbDiff is max |trainer log-prob − rollout log-prob| over policy tokens before the
	// update: a stale or mis-synced inference copy shows up here first.
	MaxLogProbDiff, MeanLogProbDiff float64
	Tokens                          int
}

// Trainer updates float32 master weights with the clipped policy loss and AdamW.
type Trainer struct {
	m       *model.Model
	cfg     Config
	mom     []*tensors.Tensor // first moments, one per parameter
	vel     []*tensors.Tensor // second moments
	step    int
	update  *Exec
	logprob *Exec
}

// New prepares a trainer for m's parameters (updated in place: m.Params.Values are replaced).
func New(m *model.Model, cfg Config) (*Trainer, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	tr := &Trainer{m: m, cfg: cfg}
	for _, s := range m.Params.Specs {
		tr.mom = append(tr.mom, tensors.FromShape(s.Shape()))
		tr.vel = append(tr.vel, tensors.FromShape(s.Shape()))
	}
	np := len(m.Params.Specs)
	compute := m.Options().Compute
	var err error
	tr.update, err = NewExec(m.Backend, func(in []*Node) []*Node {
		params, mom, vel := in[:np], in[np:2*np], in[2*np:3*np]
		d := in[3*np:]
		ids, pos, targets, mask, old, adv, ref, lr, t := d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]
		net := model.NewNet(m.Config, compute, params)
		loss, clipFrac, approxKL, maxDiff, meanDiff := tr.lossGraph(net, ids, pos, targets, mask, old, adv, ref)
		grads := Gradient(loss, params...)
		newP, newM, newV, gnorm := tr.adamw(params, grads, mom, vel, lr, t)
		out := append(append(append([]*Node{}, newP...), newM...), newV...)
		return append(out, loss, clipFrac, approxKL, maxDiff, meanDiff, gnorm)
	})
	if err != nil {
		return nil, err
	}
	tr.logprob, err = NewExec(m.Backend, func(in []*Node) []*Node {
		net := model.NewNet(m.Config, compute, in[:np])
		lp, _ := net.TokenLogProbs(net.Forward(in[np], in[np+1]), in[np+2], cfg.LogitsChunk)
		return []*Node{lp}
	})
	return tr, err
}

// lossGraph is the clipped surrogate with an optional KL term, aggregated over policy tokens.
func (tr *Trainer) lossGraph(net *model.Net, ids, pos, targets, mask, old, adv, ref *Node) (loss, clipFrac, approxKL, maxDiff, meanDiff *Node) {
	c := tr.cfg
	logp, _ := net.TokenLogProbs(net.Forward(ids, pos), targets, c.LogitsChunk)
	diff := Sub(logp, old)
	ratio := Exp(diff)
	surr1 := Mul(ratio, adv)
	surr2 := Mul(ClipScalar(ratio, 1-c.ClipLow, 1+c.ClipHigh), adv)
	perTok := Neg(Min(surr1, surr2))
	if c.KLCoef > 0 {
		var kl *Node
		if c.KLEstimator == "k1" {
			kl = Sub(logp, ref)
		} else {
			d := Sub(ref, logp)
			kl = SubScalar(Sub(Exp(d), d), 1)
		}
		perTok = Add(perTok, MulScalar(kl, c.KLCoef))
	}
	count := MaxScalar(ReduceAllSum(mask), 1)
	if c.Aggregation == "seq-mean" {
		perSeq := Div(ReduceSum(Mul(perTok, mask), 1), MaxScalar(ReduceSum(mask, 1), 1))
		seqs := MaxScalar(ReduceAllSum(ConvertDType(GreaterThan(ReduceSum(mask, 1), ZerosLike(ReduceSum(mask, 1))), dtypes.Float32)), 1)
		loss = Div(ReduceAllSum(perSeq), seqs)
	} else {
		loss = Div(ReduceAllSum(Mul(perTok, mask)), count)
	}
	sd := StopGradient(diff)
	clipped := ConvertDType(LogicalOr(LessThan(StopGradient(ratio), Scalar(ids.Graph(), dtypes.Float32, 1-c.ClipLow)), GreaterThan(StopGradient(ratio), Scalar(ids.Graph(), dtypes.Float32, 1+c.ClipHigh))), dtypes.Float32)
	clipFrac = Div(ReduceAllSum(Mul(clipped, mask)), count)
	approxKL = Div(ReduceAllSum(Mul(MulScalar(Square(sd), 0.5), mask)), count)
	absd := Mul(Abs(sd), mask)
	maxDiff = ReduceAllMax(absd)
	meanDiff = Div(ReduceAllSum(absd), count)
	return
}

// adamw applies one AdamW step with global-norm clipping. Weight decay skips 1-D parameters
// (norm weights and biases).
func (tr *Trainer) adamw(params, grads, mom, vel []*Node, lr, t *Node) (newP, newM, newV []*Node, gnorm *Node) {
	c := tr.cfg
	g := params[0].Graph()
	var sq *Node
	for _, gr := range grads {
		s := ReduceAllSum(Square(gr))
		if sq == nil {
			sq = s
		} else {
			sq = Add(sq, s)
		}
	}
	gnorm = Sqrt(sq)
	scale := OnesLike(gnorm)
	if c.GradClip > 0 {
		scale = Min(scale, Div(Scalar(g, dtypes.Float32, c.GradClip), AddScalar(gnorm, 1e-6)))
	}
	bc1 := OneMinus(Pow(Scalar(g, dtypes.Float32, c.Beta1), t))
	bc2 := OneMinus(Pow(Scalar(g, dtypes.Float32, c.Beta2), t))
	for i, p := range params {
		gr := Mul(grads[i], scale)
		m := Add(MulScalar(mom[i], c.Beta1), MulScalar(gr, 1-c.Beta1))
		v := Add(MulScalar(vel[i], c.Beta2), MulScalar(Square(gr), 1-c.Beta2))
		upd := Div(Div(m, bc1), AddScalar(Sqrt(Div(v, bc2)), c.Eps))
		if c.WeightDecay > 0 && p.Rank() > 1 {
			upd = Add(upd, MulScalar(p, c.WeightDecay))
		}
		newP = append(newP, Sub(p, Mul(lr, upd)))
		newM, newV = append(newM, m), append(newV, v)
	}
	return newP, newM, newV, gnorm
}

// Step runs one update on a micro-batch at learning rate lr and returns its metrics. The model's
// parameter tensors are replaced by the updated ones.
func (tr *Trainer) Step(b *Batch, lr float64) (Metrics, error) {
	tr.step++
	p := tr.m.Params
	args := make([]any, 0, 3*len(p.Values)+9)
	for _, v := range p.Values {
		args = append(args, v)
	}
	for _, v := range tr.mom {
		args = append(args, v)
	}
	for _, v := range tr.vel {
		args = append(args, v)
	}
	args = append(args,
		tensors.FromFlatDataAndDimensions(b.Inputs, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.Positions, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.Targets, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.Mask, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.OldLogProbs, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.Advantages, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.RefLPs, b.B, b.T),
		float32(lr), float32(tr.step))
	out, err := tr.update.Call(args...)
	if err != nil {
		return Metrics{}, fmt.Errorf("train step: %w", err)
	}
	n := len(p.Values)
	for i := range p.Values {
		p.Values[i].FinalizeAll()
		tr.mom[i].FinalizeAll()
		tr.vel[i].FinalizeAll()
		p.Values[i], tr.mom[i], tr.vel[i] = out[i], out[n+i], out[2*n+i]
	}
	scalar := func(t *tensors.Tensor) float64 { return float64(tensors.ToScalar[float32](t)) }
	var tokens int
	for _, m := range b.Mask {
		tokens += int(m)
	}
	met := Metrics{Loss: scalar(out[3*n]), ClipFrac: scalar(out[3*n+1]), ApproxKL: scalar(out[3*n+2]),
		MaxLogProbDiff: scalar(out[3*n+3]), MeanLogProbDiff: scalar(out[3*n+4]), GradNorm: scalar(out[3*n+5]), Tokens: tokens}
	if math.IsNaN(met.Loss) {
		return met, errors.New("train step: the loss is NaN")
	}
	return met, nil
}

// LogProbs returns log p(Targets) at every position of b under the current parameters ([B][T]).
func (tr *Trainer) LogProbs(b *Batch) ([][]float32, error) {
	args := make([]any, 0, len(tr.m.Params.Values)+3)
	for _, v := range tr.m.Params.Values {
		args = append(args, v)
	}
	args = append(args, tensors.FromFlatDataAndDimensions(b.Inputs, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.Positions, b.B, b.T),
		tensors.FromFlatDataAndDimensions(b.Targets, b.B, b.T))
	out, err := tr.logprob.Call(args...)
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

// LR is the learning rate at step (1-based): linear warm-up over warmup steps, then constant or
// cosine decay to 0 at total.
func LR(base float64, step, warmup, total int, schedule string) float64 {
	if warmup > 0 && step <= warmup {
		return base * float64(step) / float64(warmup)
	}
	if schedule == "cosine" && total > warmup {
		frac := float64(step-warmup) / float64(total-warmup)
		return base * 0.5 * (1 + math.Cos(math.Pi*math.Min(frac, 1)))
	}
	return base
}

// Moments returns the AdamW first and second moments (in parameter order) and the update count,
// for checkpoints.
func (tr *Trainer) Moments() (m, v []*tensors.Tensor, step int) { return tr.mom, tr.vel, tr.step }

// SetMoments restores moments and the update count saved by Moments (resume).
func (tr *Trainer) SetMoments(m, v []*tensors.Tensor, step int) error {
	n := len(tr.m.Params.Specs)
	if len(m) != n || len(v) != n {
		return fmt.Errorf("train: %d/%d moment tensors for %d parameters", len(m), len(v), n)
	}
	for i, s := range tr.m.Params.Specs {
		if !m[i].Shape().Equal(s.Shape()) || !v[i].Shape().Equal(s.Shape()) {
			return fmt.Errorf("train: moments of %s have shape %s, want %s", s.Name, m[i].Shape(), s.Shape())
		}
	}
	tr.mom, tr.vel, tr.step = m, v, step
	return nil
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
