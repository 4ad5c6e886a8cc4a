package train

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"
)

// The host optimizer: on a backend whose buffers are host memory (the Go backend), AdamW runs as
// one Go loop over each tensor's elements, updating the weights and moments where they are,
// instead of as graph operations. The graph form (AdamW) builds a dozen element-wise ops per
// tensor, and on the Go backend each writes a new buffer of the tensor's size: at Qwen3-0.6B's
// width the embedding's update alone allocated three to four 600 MiB temporaries at once and the
// element-wise passes took about 40 % of a 64-token update's CPU time. The loop reads each
// gradient, weight and moment once and writes each weight and moment once, and allocates
// nothing, so a training step holds what the ledger counts: weights, gradients, moments and the
// micro-batch's activations. It computes the same float32 expressions in the same order as
// AdamW (each product and sum rounded to float32, without fused multiply-adds), so a tensor's
// update, and the global norm that clips it, are bit-identical to the graph's on the Go backend.

// hostOptimizer reports whether the trainer updates with the host optimizer: a backend with
// shared buffers, float32 moments (8-bit moments are quantised in the graph), and no value head
// with its own learning-rate scale.
func (tr *Trainer) hostOptimizer() bool {
	return !tr.graphOptimizer && tr.m.Backend.HasSharedBuffers() && tr.cfg.OptimizerBits != 8 &&
		(tr.nh == 0 || tr.cfg.ValueLRScale == 0 || tr.cfg.ValueLRScale == 1)
}

// hostBlock is the elements one task of the host optimizer handles.
const hostBlock = 1 << 16

// f32Data calls fn with t's float32 values where they are: the backend buffer of a tensor that
// is only on the device (Go backend buffers are host memory), else the local values (a tensor
// also on the device then has its device copy invalidated, so the next graph call sends the new
// values). hostAdamW keeps the slices past fn for the update: neither storage moves while the
// tensor lives, and nothing else runs on the trainer's tensors meanwhile.
func f32Data(t *tensors.Tensor, b compute.Backend, fn func([]float32)) error {
	if t.DType() != dtypes.Float32 {
		return fmt.Errorf("train: host optimizer: a %s tensor; want float32", t.DType())
	}
	if !t.IsLocal() && t.IsOnDevice(0) && b.HasSharedBuffers() {
		buf, err := t.Buffer(b, 0)
		if err != nil {
			return err
		}
		flat, err := buf.Data()
		if err != nil {
			return err
		}
		fn(flat.([]float32))
		return nil
	}
	return t.MutableFlatData(func(flat any) { fn(flat.([]float32)) })
}

// parallel runs fn(k) for every k in [0, n) on GOMAXPROCS goroutines.
func parallel(n int, fn func(k int)) {
	next := make(chan int, n)
	for k := range n {
		next <- k
	}
	close(next)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for k := range next {
				fn(k)
			}
		})
	}
	wg.Wait()
}

// forBlocks runs fn(tensor, lo, hi) over every hostBlock-sized block of n[i] elements of each
// tensor, in parallel; the partition does not depend on scheduling.
func forBlocks(n []int, fn func(i, lo, hi int)) {
	type block struct{ i, lo, hi int }
	var blocks []block
	for i, size := range n {
		for lo := 0; lo < size; lo += hostBlock {
			blocks = append(blocks, block{i, lo, min(lo+hostBlock, size)})
		}
	}
	parallel(len(blocks), func(k int) { b := blocks[k]; fn(b.i, b.lo, b.hi) })
}

// hostAdamW applies one AdamW update to the trained parameters (Trainer.params) in place from
// grads (same order), as AdamW does, and returns the gradients' global norm before clipping.
func (tr *Trainer) hostAdamW(grads []*tensors.Tensor, lr float64) (float64, error) {
	params := tr.params()
	mom, vel := tr.moments()
	if len(grads) != len(params) {
		return 0, fmt.Errorf("train: host optimizer: %d gradients for %d parameters", len(grads), len(params))
	}
	b := tr.m.Backend
	// Every tensor's flat values, held for the update (the buffers stay alive: the tensors do).
	g, p, m, v := make([][]float32, len(params)), make([][]float32, len(params)), make([][]float32, len(params)), make([][]float32, len(params))
	sizes := make([]int, len(params))
	for i := range params {
		for _, x := range []struct {
			t   *tensors.Tensor
			dst *[]float32
		}{{grads[i], &g[i]}, {params[i], &p[i]}, {mom[i], &m[i]}, {vel[i], &v[i]}} {
			if err := f32Data(x.t, b, func(f []float32) { *x.dst = f }); err != nil {
				return 0, fmt.Errorf("train: host optimizer, %s: %w", tr.paramName(i), err)
			}
		}
		sizes[i] = len(p[i])
		if len(g[i]) != sizes[i] || len(m[i]) != sizes[i] || len(v[i]) != sizes[i] {
			return 0, fmt.Errorf("train: host optimizer, %s: %d values, gradient %d, moments %d and %d",
				tr.paramName(i), sizes[i], len(g[i]), len(m[i]), len(v[i]))
		}
	}

	// The global norm as GlobalNorm computes it on the Go backend: each tensor's squares added in
	// float32 in order (its ReduceSum over every axis is one such loop), the tensors' sums added in
	// order, the square root in float64; the tensors are summed in parallel.
	sums := make([]float32, len(params))
	parallel(len(params), func(i int) {
		var s float32
		for _, x := range g[i] {
			s += float32(x * x)
		}
		sums[i] = s
	})
	sq := sums[0]
	for _, s := range sums[1:] {
		sq += s
	}
	gnorm := float32(math.Sqrt(float64(sq)))

	c := &tr.cfg
	scale := float32(1)
	if c.GradClip > 0 {
		scale = min(scale, float32(c.GradClip)/(gnorm+float32(1e-6)))
	}
	t := float64(float32(tr.step + 1))
	k := adamConsts{
		scale: scale, b1: float32(c.Beta1), b2: float32(c.Beta2), ob1: float32(1 - c.Beta1), ob2: float32(1 - c.Beta2),
		bc1: 1 - float32(math.Pow(float64(float32(c.Beta1)), t)), bc2: 1 - float32(math.Pow(float64(float32(c.Beta2)), t)),
		eps: float32(c.Eps), wd: float32(c.WeightDecay), lr: float32(lr),
	}
	decays := make([]bool, len(params))
	for i, x := range params {
		decays[i] = c.WeightDecay > 0 && x.Shape().Rank() > 1
	}
	forBlocks(sizes, func(i, lo, hi int) {
		adamwBlock(p[i][lo:hi], g[i][lo:hi], m[i][lo:hi], v[i][lo:hi], &k, decays[i])
	})
	tr.step++
	return float64(gnorm), nil
}

// adamConsts are one update's AdamW scalars in float32, as the graph holds them: the clipping
// scale, β₁, β₂, 1−β₁, 1−β₂, the bias corrections 1−βᵗ, ε, the weight decay and the learning rate.
type adamConsts struct{ scale, b1, b2, ob1, ob2, bc1, bc2, eps, wd, lr float32 }

// adamwScalar is AdamW over one block of values, one at a time: each step rounded to float32 (the
// explicit conversions forbid fused multiply-adds), in AdamW's order.
func adamwScalar(pp, gg, mm, vv []float32, k *adamConsts, decay bool) {
	gg, mm, vv = gg[:len(pp)], mm[:len(pp)], vv[:len(pp)]
	for i := range pp {
		gr := float32(gg[i] * k.scale)
		mi := float32(float32(mm[i]*k.b1) + float32(gr*k.ob1))
		vi := float32(float32(vv[i]*k.b2) + float32(float32(gr*gr)*k.ob2))
		upd := float32(float32(mi/k.bc1) / float32(float32(math.Sqrt(float64(float32(vi/k.bc2))))+k.eps))
		if decay {
			upd = float32(upd + float32(pp[i]*k.wd))
		}
		pp[i] = float32(pp[i] - float32(k.lr*upd))
		mm[i], vv[i] = mi, vi
	}
}
