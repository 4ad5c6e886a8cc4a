package train

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/gomlx/core/tensors"
)

// Snapshot is a host copy of everything an update changes: the trained parameters (the value
// head's too), their AdamW moments and the update count. Restore puts it back, discarding the
// updates made since; a run uses it to drop an update it was asked to stop in the middle of.
type Snapshot struct {
	params, m, v []*tensors.Tensor
	step         int
}

// SnapshotBytes is the host memory a Snapshot takes: the trained parameters and both moments.
func (tr *Trainer) SnapshotBytes() int64 {
	var n int64
	for _, t := range tr.params() {
		n += int64(t.Memory())
	}
	return 3 * n
}

// Snapshot copies the trained state to host memory. The trainer keeps its own tensors.
func (tr *Trainer) Snapshot() (*Snapshot, error) {
	clone := func(ts []*tensors.Tensor) ([]*tensors.Tensor, error) {
		out := make([]*tensors.Tensor, len(ts))
		for i, t := range ts {
			c, err := t.LocalClone()
			if err != nil {
				for _, d := range out[:i] {
					d.FinalizeAll()
				}
				return nil, fmt.Errorf("train: snapshot of %s: %w", tr.paramName(i), err)
			}
			out[i] = c
		}
		return out, nil
	}
	m, v := tr.moments()
	s := &Snapshot{step: tr.step}
	var err error
	if s.params, err = clone(tr.params()); err != nil {
		return nil, err
	}
	if s.m, err = clone(m); err != nil {
		s.Free()
		return nil, err
	}
	if s.v, err = clone(v); err != nil {
		s.Free()
		return nil, err
	}
	return s, nil
}

// Free releases a snapshot that is not restored.
func (s *Snapshot) Free() {
	for _, group := range [][]*tensors.Tensor{s.params, s.m, s.v} {
		for _, t := range group {
			if t != nil {
				t.FinalizeAll()
			}
		}
	}
	s.params, s.m, s.v = nil, nil, nil
}

// Restore puts a snapshot back: the parameters and moments go to the device and replace (and
// free) the ones the trainer holds, and the update count is the snapshot's. The snapshot is
// used up.
func (tr *Trainer) Restore(s *Snapshot) error {
	nk := tr.numTrained()
	if len(s.params) != nk || len(s.m) != len(s.params) || len(s.v) != len(s.params) {
		return fmt.Errorf("train: a snapshot of %d tensors for %d trained parameters", len(s.params), nk)
	}
	for _, group := range [][]*tensors.Tensor{s.params, s.m, s.v} {
		for i, t := range group {
			if err := t.ToDevice(tr.m.Backend, compute.DeviceNum(0)); err != nil {
				return fmt.Errorf("train: restoring %s: %w", tr.paramName(i), err)
			}
		}
	}
	for _, t := range tr.params() {
		t.FinalizeAll()
	}
	tr.setTrained(s.params)
	nm := len(tr.train) // the model's trained parameters, then the value head's
	for k, dst := range [][]*tensors.Tensor{tr.mom, tr.headMom, tr.vel, tr.headVel} {
		src := [][]*tensors.Tensor{s.m, s.v}[k/2]
		base := 0
		if k%2 == 1 {
			base = nm
		}
		for i := range dst {
			if dst[i] != nil {
				dst[i].FinalizeAll()
			}
			dst[i] = src[base+i]
		}
	}
	tr.step = s.step
	s.params, s.m, s.v = nil, nil, nil
	return nil
}
