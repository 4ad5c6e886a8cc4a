package residency

import (
	"fmt"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/store/safetensors"
)

// MomentTensor encodes one AdamW moment for a checkpoint: float32 moments as F32 shaped like
// their parameter (dims), 8-bit ones (train.MomentShape) as I8 in their storage shape
// [blocks, 256 + 4], codes and scales as the trainer holds them.
func MomentTensor(name string, dims []int, t *tensors.Tensor) (*safetensors.Tensor, error) {
	if t.DType() == dtypes.Int8 {
		vals, err := tensors.CopyFlatData[int8](t)
		if err != nil {
			return nil, err
		}
		data := make([]byte, len(vals))
		for i, x := range vals {
			data[i] = byte(x)
		}
		return &safetensors.Tensor{Name: name, DType: safetensors.I8, Shape: t.Shape().Dimensions, Data: data}, nil
	}
	vals, err := tensors.CopyFlatData[float32](t)
	if err != nil {
		return nil, err
	}
	return safetensors.FromFloat32(name, dims, vals, safetensors.F32)
}

// MomentFrom decodes MomentTensor's encoding; dims is the parameter's shape (float32 moments).
func MomentFrom(t *safetensors.Tensor, dims []int, src string) (*tensors.Tensor, error) {
	if t.DType == safetensors.I8 {
		vals := make([]int8, len(t.Data))
		for i, b := range t.Data {
			vals[i] = int8(b)
		}
		if len(t.Shape) != 2 || t.Shape[0]*t.Shape[1] != len(vals) {
			return nil, fmt.Errorf("%s: 8-bit moment %s has shape %v for %d bytes; the checkpoint is damaged", src, t.Name, t.Shape, len(vals))
		}
		return tensors.FromFlatDataAndDimensions(vals, t.Shape...), nil
	}
	vals, err := t.Float32()
	if err != nil {
		return nil, err
	}
	return tensors.FromFlatDataAndDimensions(vals, dims...), nil
}
