package residency

import (
	"errors"
	"fmt"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/compiles"
	"agentrl/engine/model"
)

// InferenceCopy is the generator's copy of the policy: the float32 master weights the trainer
// updates, cast to the compute dtype (bfloat16 on a GPU). The time-shared device holds it during
// rollout only: entering the training phase frees it (the ledger counts it in rollout, not in
// train) and the sync after the update rebuilds it from the master weights, on the device.
//
// With LoRA only the adapters are copied and synced: the generator's model holds the frozen
// base tensors themselves (shared with the trainer and the reference model, never freed here)
// and runs the adapters in its graph, so a sync moves rank·(in + out) values per projection
// rather than the whole model, and no second copy of the base exists. (Merging the adapters
// into an inference copy of the base would make decoding a little cheaper but cost a full
// second copy of the weights on the device and a full-size sync.)
type InferenceCopy struct {
	master *model.Model   // the trainer's model: float32 master weights
	model  *model.Model   // the generator's model: the same config, the inference weights (Model)
	synced []int          // the parameters copied and synced: all, or a LoRA model's adapters
	cast   *compiles.Exec // synced master weights → compute dtype, one output per parameter
	diff   *compiles.Exec // max |inference − cast(master)| over the synced parameters, a float32 scalar
	// alone: DropMaster freed the master's synced weights; the copy can no longer sync or check.
	alone bool
}

// NewInferenceCopy builds the inference copy of master's current weights; cc counts the sync's
// programs (kind "sync": the cast and the check) and the copy's own (kind "inference").
func NewInferenceCopy(master *model.Model, cc *compiles.Counter) (*InferenceCopy, error) {
	synced := master.Params.TrainableIndices()
	np := len(synced)
	dt := master.Options().Compute
	cast, err := compiles.NewExec(master.Backend, cc, "sync", func(in []*Node) []*Node {
		out := make([]*Node, np)
		for i, p := range in {
			if p.DType() == dt {
				out[i] = MulScalar(p, 1) // a new buffer: the master's is donated to the next update
			} else {
				out[i] = ConvertDType(p, dt)
			}
		}
		return out
	})
	if err != nil {
		return nil, fmt.Errorf("engine: preparing the weight sync: %w", err)
	}
	diff, err := compiles.NewExec(master.Backend, cc, "sync", func(in []*Node) *Node {
		inf, mas := in[:np], in[np:]
		var worst *Node
		for i := range inf {
			want := ConvertDType(ConvertDType(mas[i], dt), dtypes.Float32)
			d := ReduceAllMax(Abs(Sub(ConvertDType(inf[i], dtypes.Float32), want)))
			if worst == nil {
				worst = d
			} else {
				worst = Max(worst, d)
			}
		}
		return worst
	})
	if err != nil {
		cast.Finalize()
		return nil, fmt.Errorf("engine: preparing the weight-sync check: %w", err)
	}
	c := &InferenceCopy{master: master, synced: synced, cast: cast.WithName("weight_sync"), diff: diff.WithName("weight_sync_check")}
	values, err := c.castMaster()
	if err != nil {
		c.Close()
		return nil, err
	}
	all := append([]*tensors.Tensor{}, master.Params.Values...) // a LoRA base: shared
	for k, i := range synced {
		all[i] = values[k]
	}
	p, err := master.Params.Sibling(all)
	if err != nil {
		c.Close()
		return nil, err
	}
	if c.model, err = model.New(master.Backend, p, master.Options()); err != nil {
		c.Close()
		return nil, err
	}
	c.model.CountCompiles(cc, "inference")
	return c, nil
}

// DropMaster frees the master weights the copy was cast from (all of them, or a LoRA model's
// adapters; a shared base stays), for a run that never updates them: an evaluation-only one, whose
// device then holds the inference weights alone, as its memory plan counts (on a GPU the float32
// master copy of a 4B model is 16 GB). Afterwards the copy can neither sync nor check.
func (c *InferenceCopy) DropMaster() {
	for _, i := range c.synced {
		if v := c.master.Params.Values[i]; v != nil {
			v.FinalizeAll()
		}
	}
	c.alone = true
}

// InferenceModel is the model a command that only generates decodes with (serve, generate,
// bench rollout and bench serve): m's weights cast once to its compute dtype, as a training run's
// rollout holds them, so that on a GPU each decode step reads bfloat16 weights (half the bytes)
// instead of converting float32 ones, and the device holds one copy. m's float32 weights are then
// freed (keep false: m is spent) or moved to host memory (keep true: m stays usable, its weights
// off the device). done frees the inference model.
func InferenceModel(m *model.Model, keep bool) (inference *model.Model, done func(), err error) {
	c, err := NewInferenceCopy(m, nil)
	if err != nil {
		return nil, nil, err
	}
	if !keep {
		c.DropMaster()
		return c.Model(), c.Close, nil
	}
	for _, i := range c.synced {
		if err := m.Params.Values[i].ToLocal(); err != nil {
			c.Close()
			return nil, nil, fmt.Errorf("engine: weight %s to host memory: %w", m.Params.Specs[i].Name, err)
		}
	}
	return c.Model(), c.Close, nil
}

// Model is the generator's model: the master's config with the inference weights.
func (c *InferenceCopy) Model() *model.Model { return c.model }

// castMaster runs the cast graph on the master weights.
func (c *InferenceCopy) castMaster() ([]*tensors.Tensor, error) {
	if c.alone {
		return nil, errors.New("engine: weight sync: the master weights were dropped (an evaluation-only run has none to sync from)")
	}
	in := make([]any, len(c.synced))
	for k, i := range c.synced {
		in[k] = c.master.Params.Values[i]
	}
	out, err := c.cast.Call(in...)
	if err != nil {
		return nil, fmt.Errorf("engine: weight sync: %w", err)
	}
	return out, nil
}

// release frees the inference weights (entering the training phase).
func (c *InferenceCopy) release() {
	for _, i := range c.synced {
		if v := c.model.Params.Values[i]; v != nil {
			v.FinalizeAll()
			c.model.Params.Values[i] = nil
		}
	}
}

// released says whether the inference weights are freed.
func (c *InferenceCopy) released() bool {
	return len(c.synced) > 0 && c.model.Params.Values[c.synced[0]] == nil
}

// refresh rebuilds the inference weights from the master weights (the sync after an update),
// freeing the old ones if they are still held.
func (c *InferenceCopy) refresh() error {
	values, err := c.castMaster()
	if err != nil {
		return err
	}
	c.release()
	for k, i := range c.synced {
		c.model.Params.Values[i] = values[k]
	}
	return nil
}

// check returns max |inference − cast(master)| over every weight: 0 after a sync.
func (c *InferenceCopy) check() (float64, error) {
	if c.released() {
		return 0, errors.New("engine: weight-sync check: the inference weights are released")
	}
	if c.alone {
		return 0, errors.New("engine: weight-sync check: the master weights were dropped (an evaluation-only run has none to check against)")
	}
	in := make([]any, 0, 2*len(c.synced))
	for _, i := range c.synced {
		in = append(in, c.model.Params.Values[i])
	}
	for _, i := range c.synced {
		in = append(in, c.master.Params.Values[i])
	}
	out, err := c.diff.Call(in...)
	if err != nil {
		return 0, fmt.Errorf("engine: weight-sync check: %w", err)
	}
	defer out[0].FinalizeAll()
	return float64(tensors.ToScalar[float32](out[0])), nil
}

// Bytes is the size of the inference weights in the compute dtype (a LoRA model's adapters).
func (c *InferenceCopy) Bytes() int64 {
	var n int64
	for _, i := range c.synced {
		n += int64(c.master.Params.Specs[i].Size()) * int64(c.master.Options().Compute.Size())
	}
	return n
}

// Close frees the inference weights and the sync programs.
func (c *InferenceCopy) Close() {
	if c.model != nil {
		c.release()
		c.model.Close()
	}
	if c.cast != nil {
		c.cast.Finalize()
	}
	if c.diff != nil {
		c.diff.Finalize()
	}
}
