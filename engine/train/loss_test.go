package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/device"
)

func goBackend(t testing.TB) compute.Backend {
	t.Helper()
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lossCase holds [B, T] float64 inputs of PolicyLoss.
type lossCase struct {
	logp, old, adv, mask, ref, ent [][]float64
}

// hostLoss is an independent float64 implementation of PolicyLoss's loss.
func hostLoss(c *Config, in lossCase) float64 {
	var total, seqs, tokens float64
	for b := range in.logp {
		var row, n float64
		for t := range in.logp[b] {
			if in.mask[b][t] == 0 {
				continue
			}
			r := math.Exp(in.logp[b][t] - in.old[b][t])
			a := in.adv[b][t]
			v := -math.Min(r*a, math.Max(1-c.ClipLow, math.Min(r, 1+c.ClipHigh))*a)
			if c.KLCoef > 0 {
				kl, _ := KLPenalty(in.logp[b][t], in.ref[b][t], c.KLEstimator)
				v += c.KLCoef * kl
			}
			v -= c.EntropyCoef * in.ent[b][t]
			row += v
			n++
		}
		total += row
		tokens += n
		if n > 0 {
			seqs++
			if c.Aggregation == SeqMean {
				total += row/n - row
			}
		}
	}
	if c.Aggregation == SeqMean {
		return total / math.Max(seqs, 1)
	}
	return total / math.Max(tokens, 1)
}

// graphLoss evaluates PolicyLoss in float64 on the Go backend and returns the loss, its gradient
// with respect to the log-probs and to the entropy, and the clip count.
func graphLoss(t *testing.T, c *Config, in lossCase) (loss float64, dLogp, dEnt [][]float64, clips float64) {
	t.Helper()
	e, err := NewExec(goBackend(t), func(x []*Node) []*Node {
		out := PolicyLoss(c, LossInputs{LogProbs: x[0], OldLogProbs: x[1], Advantages: x[2], Mask: x[3], RefLogProbs: x[4], Entropy: x[5]})
		g := Gradient(out.Loss, x[0], x[5])
		return []*Node{out.Loss, g[0], g[1], out.ClipCount}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	args := []any{in.logp, in.old, in.adv, in.mask, in.ref, in.ent}
	out, err := e.Call(args...)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.ToScalar[float64](out[0]), out[1].Value().([][]float64), out[2].Value().([][]float64), tensors.ToScalar[float64](out[3])
}

// TestPolicyLossHandComputed checks single-token cases worked out by hand: each clip branch,
// both KL estimators, the entropy bonus, and the two aggregations.
func TestPolicyLossHandComputed(t *testing.T) {
	one := func(v float64) [][]float64 { return [][]float64{{v}} }
	e01, em05 := math.Exp(0.1), math.Exp(-0.5)
	for _, tc := range []struct {
		name                   string
		cfg                    Config
		logp, old, adv, ref, h float64
		loss, grad, gradH      float64
		clips                  float64
	}{
		// r = e^0.1 ≈ 1.105 > 1 + 0.05 with A > 0: the clipped branch wins, no gradient.
		{"clipped high", Config{ClipLow: 0.2, ClipHigh: 0.05}, -1, -1.1, 1, 0, 0, -1.05, 0, 0, 1},
		// Same ratio with A < 0: min picks r·A, gradient −A·r.
		{"unclipped negative", Config{ClipLow: 0.2, ClipHigh: 0.05}, -1, -1.1, -1, 0, 0, e01, e01, 0, 0},
		// r = e^−0.5 < 1 − 0.2 with A > 0: min picks r·A (the pessimistic side), gradient −r.
		{"low ratio positive", Config{ClipLow: 0.2, ClipHigh: 0.2}, -1, -0.5, 1, 0, 0, -em05, -em05, 0, 0},
		// r = e^−0.5 with A < 0: clipped at 0.8, loss 0.8, no gradient.
		{"clipped low", Config{ClipLow: 0.2, ClipHigh: 0.2}, -1, -0.5, -1, 0, 0, 0.8, 0, 0, 1},
		// k3 with ref − logp = −0.5: e^−0.5 + 0.5 − 1; d/dlogp = 1 − e^−0.5; times 0.1.
		{"k3", Config{KLCoef: 0.1, KLEstimator: K3}, -1, -1, 0, -1.5, 0, 0.1 * (em05 - 0.5), 0.1 * (1 - em05), 0, 0},
		// k1 = logp − ref = 0.5; d/dlogp = 1; times 0.1.
		{"k1", Config{KLCoef: 0.1, KLEstimator: K1}, -1, -1, 0, -1.5, 0, 0.05, 0.1, 0, 0},
		// Entropy bonus: −0.01·H; ratio 1 with A = 2 adds −2 and gradient −2.
		{"entropy", Config{EntropyCoef: 0.01}, -1, -1, 2, 0, 3, -2 - 0.03, -2, -0.01, 0},
	} {
		c := tc.cfg
		if err := c.fill(); err != nil {
			t.Fatal(err)
		}
		in := lossCase{one(tc.logp), one(tc.old), one(tc.adv), one(1), one(tc.ref), one(tc.h)}
		loss, g, gh, clips := graphLoss(t, &c, in)
		if math.Abs(loss-tc.loss) > 1e-12 || math.Abs(g[0][0]-tc.grad) > 1e-12 || math.Abs(gh[0][0]-tc.gradH) > 1e-12 || clips != tc.clips {
			t.Errorf("%s: loss %.15g, dL/dlogp %.15g, dL/dH %.15g, clips %v; want %.15g, %.15g, %.15g, %v",
				tc.name, loss, g[0][0], gh[0][0], clips, tc.loss, tc.grad, tc.gradH, tc.clips)
		}
		if host := hostLoss(&c, in); math.Abs(host-tc.loss) > 1e-12 {
			t.Errorf("%s: host reference %.15g; want %.15g", tc.name, host, tc.loss)
		}
	}

	// Aggregation: row 0 holds one token of loss −1 (A = 1, ratio 1), row 1 three of loss −3,
	// row 2 none. token-mean = (−1 − 9) / 4; seq-mean = (−1 + −3) / 2.
	in := lossCase{
		logp: [][]float64{{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}},
		old:  [][]float64{{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}},
		adv:  [][]float64{{1, 7, 7}, {3, 3, 3}, {5, 5, 5}},
		mask: [][]float64{{1, 0, 0}, {1, 1, 1}, {0, 0, 0}},
		ref:  [][]float64{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
		ent:  [][]float64{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
	}
	for _, agg := range []struct {
		name   string
		want   float64
		gRow01 float64 // dL/dlogp at row 0 and row 1
		gRow1  float64
	}{{TokenMean, -10.0 / 4, -1.0 / 4, -3.0 / 4}, {SeqMean, -2, -1.0 / 2, -3.0 / 3 / 2}} {
		c := Config{Aggregation: agg.name}
		_ = c.fill()
		loss, g, _, _ := graphLoss(t, &c, in)
		if math.Abs(loss-agg.want) > 1e-12 || math.Abs(g[0][0]-agg.gRow01) > 1e-12 || math.Abs(g[1][2]-agg.gRow1) > 1e-12 || g[0][1] != 0 || g[2][0] != 0 {
			t.Errorf("%s: loss %v, gradient %v; want %v with %v at [0][0] and %v at [1][2], 0 off the mask", agg.name, loss, g, agg.want, agg.gRow01, agg.gRow1)
		}
	}
}

// TestPolicyLossFiniteDifferences compares PolicyLoss and its gradient with the host reference
// and central finite differences of it, in float64, over every combination of aggregation, KL
// estimator and entropy bonus.
func TestPolicyLossFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const B, T = 3, 5
	mk := func(f func(b, t int) float64) [][]float64 {
		out := make([][]float64, B)
		for b := range out {
			out[b] = make([]float64, T)
			for t := range out[b] {
				out[b][t] = f(b, t)
			}
		}
		return out
	}
	in := lossCase{
		logp: mk(func(int, int) float64 { return -0.2 - 2*rng.Float64() }),
		adv:  mk(func(int, int) float64 { return rng.NormFloat64() }),
		mask: mk(func(b, t int) float64 { return float64(min(1, (b+t)%4)) }),
		ent:  mk(func(int, int) float64 { return 3 * rng.Float64() }),
	}
	// Log-ratios spread over the clip range and beyond it, kept 1e-3 away from the kinks.
	in.old = mk(func(b, t int) float64 {
		for {
			d := 0.6 * (rng.Float64() - 0.5)
			r := math.Exp(d)
			if math.Abs(r-0.8) > 1e-3 && math.Abs(r-1.28) > 1e-3 && math.Abs(r-1) > 1e-3 {
				return in.logp[b][t] - d
			}
		}
	})
	in.ref = mk(func(b, t int) float64 { return in.logp[b][t] + rng.NormFloat64() })
	for _, agg := range []string{TokenMean, SeqMean} {
		for _, kl := range []struct {
			coef float64
			est  string
		}{{0, K3}, {0.3, K1}, {0.3, K3}} {
			for _, ent := range []float64{0, 0.05} {
				c := Config{Aggregation: agg, KLCoef: kl.coef, KLEstimator: kl.est, EntropyCoef: ent, ClipLow: 0.2, ClipHigh: 0.28}
				if err := c.fill(); err != nil {
					t.Fatal(err)
				}
				loss, g, gh, _ := graphLoss(t, &c, in)
				if want := hostLoss(&c, in); math.Abs(loss-want) > 1e-12 {
					t.Errorf("%s kl %v/%s ent %v: loss %.15g; host %.15g", agg, kl.coef, kl.est, ent, loss, want)
				}
				const h = 1e-6
				for b := 0; b < B; b++ {
					for tt := 0; tt < T; tt++ {
						for _, which := range []struct {
							x    [][]float64
							grad [][]float64
						}{{in.logp, g}, {in.ent, gh}} {
							orig := which.x[b][tt]
							which.x[b][tt] = orig + h
							up := hostLoss(&c, in)
							which.x[b][tt] = orig - h
							down := hostLoss(&c, in)
							which.x[b][tt] = orig
							fd := (up - down) / (2 * h)
							if math.Abs(fd-which.grad[b][tt]) > 1e-7 {
								t.Errorf("%s kl %v/%s ent %v: gradient at [%d][%d] %.10g; finite difference %.10g",
									agg, kl.coef, kl.est, ent, b, tt, which.grad[b][tt], fd)
							}
						}
					}
				}
			}
		}
	}
}

// TestPolicyLossMasksBeforeExp: padding with wild values (log-probs of −200 against reference 0,
// which would overflow exp in the k3 estimator) must not reach the loss or the gradient.
func TestPolicyLossMasksBeforeExp(t *testing.T) {
	c := Config{KLCoef: 0.1, KLEstimator: K3, EntropyCoef: 0.01}
	_ = c.fill()
	in := lossCase{
		logp: [][]float64{{-1, -200}}, old: [][]float64{{-1, 300}}, adv: [][]float64{{1, 1e30}},
		mask: [][]float64{{1, 0}}, ref: [][]float64{{-1, 0}}, ent: [][]float64{{2, 1e30}},
	}
	// Only token 0 counts: ratio 1, A = 1, KL 0, entropy 2.
	loss, g, gh, _ := graphLoss(t, &c, in)
	if math.Abs(loss-(-1-0.02)) > 1e-12 || g[0][1] != 0 || gh[0][1] != 0 || math.IsNaN(g[0][0]) {
		t.Errorf("loss %v, gradients %v %v; want −1.02 and zeros on the padding", loss, g, gh)
	}
}

// TestChunkStatsGradient: the closed-form gradient chunkStats gives the logits equals GoMLX's
// autodiff of the plain formulas (log-softmax picked at the target; the entropy through the
// probabilities) for Σ a·logp + Σ b·entropy, with and without the entropy, on logits spread wide
// enough that some probabilities underflow; and the values equal the plain formulas'.
func TestChunkStatsGradient(t *testing.T) {
	const bs, c, v = 2, 3, 11
	rng := rand.New(rand.NewPCG(7, 8))
	logits := make([]float32, bs*c*v)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 30)
	}
	targets := []int32{0, 10, 5, 3, 3, 7}
	a, b := make([]float32, bs*c), make([]float32, bs*c)
	for i := range a {
		a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	plain := func(z, tg *Node, withEntropy bool) (lp, ent *Node) {
		shape := tg.Shape()
		idx := Stack([]*Node{Iota(z.Graph(), shape, 0), Iota(z.Graph(), shape, 1), tg}, -1)
		shifted := Sub(z, StopGradient(ReduceAndKeep(z, ReduceMax, -1)))
		lse := Log(ReduceSum(Exp(shifted), -1))
		lp = Sub(Gather(shifted, idx), lse)
		if withEntropy {
			probs := Exp(Sub(shifted, ExpandAxes(lse, -1)))
			ent = Sub(lse, ReduceSum(Mul(probs, shifted), -1))
		}
		return lp, ent
	}
	for _, withEntropy := range []bool{true, false} {
		run := func(stats func(z, tg *Node, withEntropy bool) (lp, ent *Node)) (lp, ent, grad []float32) {
			e, err := NewExec(goBackend(t), func(in []*Node) []*Node {
				z := Mul(in[0], OnesLike(in[0])) // a node to differentiate, not a parameter
				l, h := stats(z, in[1], withEntropy)
				loss := ReduceAllSum(Mul(l, in[2]))
				outs := []*Node{l}
				if withEntropy {
					loss = Add(loss, ReduceAllSum(Mul(h, in[3])))
					outs = append(outs, h)
				} else {
					outs = append(outs, ZerosLike(l))
				}
				return append(outs, Gradient(loss, z)[0])
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Finalize()
			out, err := e.Call(tensors.FromFlatDataAndDimensions(logits, bs, c, v), tensors.FromFlatDataAndDimensions(targets, bs, c),
				tensors.FromFlatDataAndDimensions(a, bs, c), tensors.FromFlatDataAndDimensions(b, bs, c))
			if err != nil {
				t.Fatal(err)
			}
			return tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1]), tensors.MustCopyFlatData[float32](out[2])
		}
		lp, ent, grad := run(chunkStats)
		wlp, went, wgrad := run(plain)
		for i := range lp {
			if math.Abs(float64(lp[i]-wlp[i])) > 1e-5 || math.Abs(float64(ent[i]-went[i])) > 1e-5 {
				t.Errorf("entropy %v: position %d: logp %g, entropy %g; the plain formulas give %g, %g", withEntropy, i, lp[i], ent[i], wlp[i], went[i])
			}
		}
		var norm float64
		for _, g := range wgrad {
			norm = max(norm, math.Abs(float64(g)))
		}
		for i := range grad {
			if math.Abs(float64(grad[i]-wgrad[i])) > 1e-5*max(1, norm) {
				t.Errorf("entropy %v: ∂/∂logits[%d] = %g; autodiff of the plain formulas gives %g", withEntropy, i, grad[i], wgrad[i])
			}
		}
	}
}
