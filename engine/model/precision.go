package model

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"
)

// ErrBadLowPrecision says a backend computes the model in a 16-bit dtype wrongly. Seen with the Go
// backend of gomlx/compute v0.1.6 built with GOEXPERIMENT=simd on an AVX2-only CPU (AMD EPYC):
// its AVX2 small transposed kernel dropped half of every 16-value bfloat16 load (fixed by patch 12
// of third_party/compute/PATCHES.md); the check stays for backends and kernels to come.
var ErrBadLowPrecision = errors.New("this backend computes 16-bit floats wrongly on this CPU")

var precisionChecked sync.Map // backend → error (nil when the dtype checked out), per dtype

type precisionKey struct {
	backend compute.Backend
	dt      dtypes.DType
}

// CheckComputeDType runs a small random decoder in dt and in float32 on backend and fails with
// ErrBadLowPrecision when their logits disagree by more than dt's rounding explains. The
// result is remembered per backend and dtype; float32 always passes.
func CheckComputeDType(backend compute.Backend, dt dtypes.DType) error {
	if dt == dtypes.Float32 {
		return nil
	}
	key := precisionKey{backend, dt}
	if v, ok := precisionChecked.Load(key); ok {
		err, _ := v.(error)
		return err
	}
	err := checkMatMul(backend, dt)
	precisionChecked.Store(key, err)
	return err
}

func checkMatMul(backend compute.Backend, dt dtypes.DType) error {
	// A small random decoder, run in float32 and in dt on the same inputs: every op the model
	// uses, at sizes that take both the small and the large matmul kernels.
	for _, hidden := range []int{32, 256} {
		c := &Config{Family: Qwen3, VocabSize: 96, HiddenSize: hidden, IntermediateSize: 2 * hidden, NumLayers: 1,
			NumHeads: 4, NumKVHeads: 2, HeadDim: hidden / 4, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true}
		p := RandomParams(c, 7, 0.05)
		np := len(p.Specs)
		e, err := NewExec(backend, func(in []*Node) []*Node {
			ids, pos := in[np], in[np+1]
			ref := NewNet(c, dtypes.Float32, in[:np])
			low := NewNet(c, dt, in[:np])
			return []*Node{ConvertDType(ref.Logits(ref.Forward(ids, pos)), dtypes.Float32),
				ConvertDType(low.Logits(low.Forward(ids, pos)), dtypes.Float32)}
		})
		if err != nil {
			return err
		}
		const t = 16
		ids, pos := make([]int32, t), make([]int32, t)
		for i := range ids {
			ids[i], pos[i] = int32((i*37)%c.VocabSize), int32(i)
		}
		args := make([]any, 0, np+2)
		for _, v := range p.Values {
			args = append(args, v)
		}
		args = append(args, tensors.FromFlatDataAndDimensions(ids, 1, t), tensors.FromFlatDataAndDimensions(pos, 1, t))
		out, err := e.Call(args...)
		e.Finalize()
		if err != nil {
			return err
		}
		ref, low := tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])
		var worst, scale float64
		for i := range ref {
			worst = math.Max(worst, math.Abs(float64(ref[i]-low[i])))
			scale = math.Max(scale, math.Abs(float64(ref[i])))
		}
		if worst > 0.05*scale+0.05 {
			return fmt.Errorf("%w: a small decoder's %s logits are off by %.3g (largest logit %.3g); use model.dtype: f32 on this machine, or build without GOEXPERIMENT=simd",
				ErrBadLowPrecision, dt, worst, scale)
		}
	}
	return nil
}
