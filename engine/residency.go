package engine

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
)

// The reference (teacher) copy is on the device only for the reference forward, between rollout
// and the update (the ledger's reference phase): rollout and the update never hold it. On the go
// backend host and device are the same memory, but the moves are the ones a GPU makes.

// moveReference puts the reference copy on the device (toDevice) or in host memory. A LoRA run's
// reference is the policy's own frozen base with the adapters off, which rollout and training use
// too: it stays where it is.
func (c *Controller) moveReference(toDevice bool) error {
	if c.r.Train.LoRA.Rank > 0 {
		return nil
	}
	if toDevice {
		return referenceToDevice(c.o.Reference)
	}
	return referenceToHost(c.o.Reference)
}

// referenceToDevice brings the reference weights onto the device for the reference forward.
func referenceToDevice(m *model.Model) error {
	for i, t := range m.Params.Values {
		if err := t.ToDevice(m.Backend, compute.DeviceNum(0)); err != nil {
			return fmt.Errorf("engine: reference weight %s to the device: %w", m.Params.Specs[i].Name, err)
		}
	}
	return nil
}

// referenceToHost moves the reference weights to host memory, freeing their device buffers.
func referenceToHost(m *model.Model) error {
	for i, t := range m.Params.Values {
		if err := t.ToLocal(); err != nil {
			return fmt.Errorf("engine: reference weight %s to the host: %w", m.Params.Specs[i].Name, err)
		}
	}
	return nil
}

// deviceBytes is the size of the tensors that hold a device buffer now.
func deviceBytes(ts []*tensors.Tensor) int64 {
	var n int64
	for _, t := range ts {
		if t.Ok() && t.IsOnDevice(0) {
			n += int64(t.Memory())
		}
	}
	return n
}
