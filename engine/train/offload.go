package train

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/tensors"
)

// OffloadMaster moves the float32 master weights (the value head's too) to host memory, freeing
// their device buffers: rollout decodes with the inference copy and does not need them. The next
// RestoreMaster brings them back; an update needs them on the device. The values are copied
// exactly, so a run with the master weights offloaded trains the same weights as one without.
func (tr *Trainer) OffloadMaster() error {
	for i, t := range tr.params() {
		if err := t.ToLocal(); err != nil {
			return fmt.Errorf("train: offloading master weight %s: %w", tr.paramName(i), err)
		}
	}
	return nil
}

// RestoreMaster moves offloaded master weights back onto the device and frees their host copies.
func (tr *Trainer) RestoreMaster() error {
	for i, t := range tr.params() {
		if err := t.ToDevice(tr.m.Backend, compute.DeviceNum(0)); err != nil {
			return fmt.Errorf("train: restoring master weight %s: %w", tr.paramName(i), err)
		}
	}
	return nil
}

// OnDevice reports the bytes of master weights and of AdamW moments held on the device now (the
// rest waits in host memory): the engine's own account of the ledger's components.
func (tr *Trainer) OnDevice() (master, moments int64) {
	for _, t := range tr.params() {
		if onDevice(t) {
			master += int64(t.Memory())
		}
	}
	m, v := tr.moments()
	for i := range m {
		for _, t := range []*tensors.Tensor{m[i], v[i]} {
			if onDevice(t) {
				moments += int64(t.Memory())
			}
		}
	}
	return master, moments
}

// onDevice: t holds device memory (a tensor freed by an update that did not return holds none).
func onDevice(t *tensors.Tensor) bool { return t.Ok() && t.IsOnDevice(0) }
