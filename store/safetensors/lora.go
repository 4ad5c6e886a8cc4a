package safetensors

import (
	"fmt"
	"strings"
)

// IsAdapter reports whether a tensor name is a LoRA adapter's (….lora_A.weight, ….lora_B.weight).
func IsAdapter(name string) bool {
	return strings.HasSuffix(name, ".lora_A.weight") || strings.HasSuffix(name, ".lora_B.weight")
}

// MergeLoRA returns the base weights with each adapter pair merged into its projection,
// W + scale·B·A (scale = lora_alpha ÷ r) computed in float32 and stored in W's dtype; the
// adapters are left out. A checkpoint's export and the weights pushed to rollout engines are
// merged with it.
func MergeLoRA(weights []*Tensor, scale float64) ([]*Tensor, error) {
	byName := make(map[string]*Tensor, len(weights))
	for _, t := range weights {
		byName[t.Name] = t
	}
	var out []*Tensor
	for _, t := range weights {
		if IsAdapter(t.Name) {
			continue
		}
		module := strings.TrimSuffix(t.Name, ".weight")
		a, b := byName[module+".lora_A.weight"], byName[module+".lora_B.weight"]
		if a == nil && b == nil {
			out = append(out, t)
			continue
		}
		merged, err := mergeOne(t, a, b, scale)
		if err != nil {
			return nil, fmt.Errorf("merging the adapters of %s: %w", module, err)
		}
		out = append(out, merged)
	}
	return out, nil
}

// mergeOne computes W + scale·B·A for W [out, in], A [r, in], B [out, r].
func mergeOne(w, a, b *Tensor, scale float64) (*Tensor, error) {
	if a == nil || b == nil {
		return nil, fmt.Errorf("lora_A and lora_B come in pairs; one is missing")
	}
	if len(w.Shape) != 2 || len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, fmt.Errorf("shapes %v, A %v, B %v: want matrices", w.Shape, a.Shape, b.Shape)
	}
	out, in, r := w.Shape[0], w.Shape[1], a.Shape[0]
	if a.Shape[1] != in || b.Shape[0] != out || b.Shape[1] != r {
		return nil, fmt.Errorf("weight %v, A %v, B %v: want A [r, %d] and B [%d, r]", w.Shape, a.Shape, b.Shape, in, out)
	}
	wv, err := w.Float32()
	if err != nil {
		return nil, err
	}
	av, err := a.Float32()
	if err != nil {
		return nil, err
	}
	bv, err := b.Float32()
	if err != nil {
		return nil, err
	}
	for o := 0; o < out; o++ {
		row := wv[o*in : (o+1)*in]
		for k := 0; k < r; k++ {
			s := float32(scale) * bv[o*r+k]
			if s == 0 {
				continue
			}
			for i, x := range av[k*in : (k+1)*in] {
				row[i] += s * x
			}
		}
	}
	return FromFloat32(w.Name, w.Shape, wv, w.DType)
}
