package engine

import (
	"errors"
	"fmt"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
)

// inferenceCopy is the generator's copy of the policy: the float32 master weights the trainer
// updates, cast to the compute dtype (bfloat16 on a GPU). The time-shared device holds it during
// rollout only: entering the training phase frees it (the ledger counts it in rollout, not in
// train) and the sync after the update rebuilds it from the master weights, on the device.
type inferenceCopy struct {
	master *model.Model // the trainer's model: float32 master weights
	model  *model.Model // the generator's model: the same config, the inference weights
	cast   *Exec        // master weights → compute dtype, one output per parameter
	diff   *Exec        // max |inference − cast(master)| over every parameter, a float32 scalar
}

// newInferenceCopy builds the inference copy of master's current weights.
func newInferenceCopy(master *model.Model) (*inferenceCopy, error) {
	np := len(master.Params.Specs)
	dt := master.Options().Compute
	cast, err := NewExec(master.Backend, func(in []*Node) []*Node {
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
	diff, err := NewExec(master.Backend, func(in []*Node) *Node {
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
	c := &inferenceCopy{master: master, cast: cast.WithName("weight_sync"), diff: diff.WithName("weight_sync_check")}
	values, err := c.castMaster()
	if err != nil {
		c.close()
		return nil, err
	}
	p, err := master.Params.Sibling(values)
	if err != nil {
		c.close()
		return nil, err
	}
	if c.model, err = model.New(master.Backend, p, master.Options()); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// castMaster runs the cast graph on the master weights.
func (c *inferenceCopy) castMaster() ([]*tensors.Tensor, error) {
	in := make([]any, len(c.master.Params.Values))
	for i, v := range c.master.Params.Values {
		in[i] = v
	}
	out, err := c.cast.Call(in...)
	if err != nil {
		return nil, fmt.Errorf("engine: weight sync: %w", err)
	}
	return out, nil
}

// release frees the inference weights (entering the training phase).
func (c *inferenceCopy) release() {
	for i, v := range c.model.Params.Values {
		if v != nil {
			v.FinalizeAll()
			c.model.Params.Values[i] = nil
		}
	}
}

// released says whether the inference weights are freed.
func (c *inferenceCopy) released() bool {
	return len(c.model.Params.Values) > 0 && c.model.Params.Values[0] == nil
}

// refresh rebuilds the inference weights from the master weights (the sync after an update),
// freeing the old ones if they are still held.
func (c *inferenceCopy) refresh() error {
	values, err := c.castMaster()
	if err != nil {
		return err
	}
	c.release()
	copy(c.model.Params.Values, values)
	return nil
}

// check returns max |inference − cast(master)| over every weight: 0 after a sync.
func (c *inferenceCopy) check() (float64, error) {
	if c.released() {
		return 0, errors.New("engine: weight-sync check: the inference weights are released")
	}
	in := make([]any, 0, 2*len(c.master.Params.Values))
	for _, v := range c.model.Params.Values {
		in = append(in, v)
	}
	for _, v := range c.master.Params.Values {
		in = append(in, v)
	}
	out, err := c.diff.Call(in...)
	if err != nil {
		return 0, fmt.Errorf("engine: weight-sync check: %w", err)
	}
	defer out[0].FinalizeAll()
	return float64(tensors.ToScalar[float32](out[0])), nil
}

// bytes is the size of the inference weights in the compute dtype.
func (c *inferenceCopy) bytes() int64 {
	var n int64
	for _, s := range c.master.Params.Specs {
		n += int64(s.Size()) * int64(c.master.Options().Compute.Size())
	}
	return n
}

func (c *inferenceCopy) close() {
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
