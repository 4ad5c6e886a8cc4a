package train

import (
	"math"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// GlobalNorm is √(Σ over every gradient of Σ g²), a float32 scalar.
func GlobalNorm(grads []*Node) *Node {
	var sq *Node
	for _, gr := range grads {
		s := ReduceAllSum(Square(ConvertDType(gr, dtypes.Float32)))
		if sq == nil {
			sq = s
		} else {
			sq = Add(sq, s)
		}
	}
	return Sqrt(sq)
}

// AdamW builds one AdamW update of float32 master weights. Gradients are first scaled by
// min(1, GradClip ÷ (‖g‖ + 1e-6)) with ‖g‖ the global norm over all of them (no clipping when
// GradClip is 0); then, with t the 1-based update count and bias-corrected moments,
//
//	m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,  p ← p − lr·(m̂ ÷ (√v̂ + ε) + wd·p)
//
// Weight decay is decoupled (it does not pass through the moments) and skips 1-D parameters —
// RMSNorm weights and biases — whose decay would only fight their scale. lr and t are float32
// scalars. It returns the new parameters and moments and the pre-clip global norm.
//
// Moments stored in 8 bits (int8, MomentShape with Config.OptimizerBits 8; see optim8.go) are
// dequantised before the step and quantised after it; float32 ones (the value head's always) are
// used as they are.
func AdamW(c *Config, params, grads, mom, vel []*Node, lr, t *Node) (newP, newM, newV []*Node, gnorm *Node) {
	g := params[0].Graph()
	gnorm = GlobalNorm(grads)
	scale := OnesLike(gnorm)
	if c.GradClip > 0 {
		scale = Min(scale, Div(Scalar(g, dtypes.Float32, c.GradClip), AddScalar(gnorm, 1e-6)))
	}
	bc1 := OneMinus(Pow(Scalar(g, dtypes.Float32, c.Beta1), t))
	bc2 := OneMinus(Pow(Scalar(g, dtypes.Float32, c.Beta2), t))
	for i, p := range params {
		gr := Mul(grads[i], scale)
		m0, v0 := mom[i], vel[i]
		q8 := m0.DType() == dtypes.Int8
		if q8 {
			m0, v0 = DequantizeSigned(m0, p.Shape()), DequantizeSqrtLog(v0, p.Shape())
		}
		m := Add(MulScalar(m0, c.Beta1), MulScalar(gr, 1-c.Beta1))
		v := Add(MulScalar(v0, c.Beta2), MulScalar(Square(gr), 1-c.Beta2))
		upd := Div(Div(m, bc1), AddScalar(Sqrt(Div(v, bc2)), c.Eps))
		if c.WeightDecay > 0 && p.Rank() > 1 {
			upd = Add(upd, MulScalar(p, c.WeightDecay))
		}
		newP = append(newP, Sub(p, Mul(lr, upd)))
		if q8 {
			m, v = QuantizeSigned(m), QuantizeSqrtLog(v)
		}
		newM, newV = append(newM, m), append(newV, v)
	}
	return newP, newM, newV, gnorm
}

// Schedule is the learning rate over updates: linear warm-up from 0 over Warmup steps to Base,
// then constant, or cosine decay to MinRatio·Base at step Total.
type Schedule struct {
	Base     float64
	Warmup   int
	Total    int
	Kind     string // constant | cosine
	MinRatio float64
}

// At returns the learning rate at step (1-based).
func (s Schedule) At(step int) float64 {
	if s.Warmup > 0 && step <= s.Warmup {
		return s.Base * float64(step) / float64(s.Warmup)
	}
	if s.Kind == "cosine" && s.Total > s.Warmup {
		frac := math.Min(float64(step-s.Warmup)/float64(s.Total-s.Warmup), 1)
		floor := s.MinRatio * s.Base
		return floor + (s.Base-floor)*0.5*(1+math.Cos(math.Pi*frac))
	}
	return s.Base
}

// LR is the learning rate at step (1-based): linear warm-up over warmup steps, then constant or
// cosine decay to 0 at total (Schedule with MinRatio 0).
func LR(base float64, step, warmup, total int, schedule string) float64 {
	return Schedule{Base: base, Warmup: warmup, Total: total, Kind: schedule}.At(step)
}
