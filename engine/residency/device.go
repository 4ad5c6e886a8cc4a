// Package residency decides what is on the time-shared device when. Rollout holds the inference
// copy of the policy and the KV cache; the reference forward holds the reference (teacher) copy;
// the update holds the float32 master weights, the AdamW moments and the activations. The loop
// calls one switch between phases (ToReference, ToTrain, ToRollout) and the Device moves the
// tensors: freed, rebuilt from the master weights (the weight sync), or sent to host memory and
// back (offload), as the memory ledger planned. It also holds what a checkpoint needs to know
// about where weights live: LoRA's shared base, the adapters' PEFT config, the moments' encoding.
package residency

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/gobackend"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/train"
)

// Device is the time-shared device's residency plan for one run. On the go backend host and
// device are the same memory, but the moves are the ones a GPU makes.
type Device struct {
	// Infer is the generator's weights: the master weights cast, rebuilt by each sync. Gen's KV
	// cache is freed outside rollout. Both are nil when nothing generates on this device
	// (rollout.engines: the engines hold them).
	Infer     *InferenceCopy
	Gen       *rollout.Generator
	Backend   compute.Backend // the backend the device's tensors live on
	Trainer   *train.Trainer  // the master weights and moments
	Reference *model.Model    // the frozen reference (teacher); nil in an evaluation-only run
	// MomentsOnHost: the AdamW moments wait in host memory during rollout and the reference
	// forward. MasterOnHost: the float32 master weights do too (the inference copy is built from
	// them before they leave).
	MomentsOnHost, MasterOnHost bool
	// SharedReference: the reference is the policy's own frozen base with LoRA's adapters off,
	// which rollout and training use too: it never moves.
	SharedReference bool
	// PRMGen is the model PRM's own rollout engine (prm.kind model on the reference or a folder),
	// its KV cache held in the PRM phase only; PRM is a folder's PRM weights, on the device only
	// then too (nil: the PRM is the reference). Both nil without such a PRM.
	PRMGen *rollout.Generator
	PRM    *model.Model
	// EvalGen is the evaluation's own rollout engine when its context is longer than rollout's
	// (eval.max_total_tokens), its KV cache held in the eval phase only; nil: evaluation decodes
	// on Gen.
	EvalGen *rollout.Generator
	// SkipSync, when set (tests only), leaves the inference weights of that step stale: the
	// mis-synced copy the loop's log-prob probe exists to catch.
	SkipSync func(step int) bool
}

func (d *Device) skipsSync(step int) bool { return d.SkipSync != nil && d.SkipSync(step) }

// Settle puts the device in its rollout state once everything is built: offloaded moments and
// master weights go to host memory (the inference copy exists), and so does the reference, which
// comes in only for the reference forward.
func (d *Device) Settle() error {
	// An evaluation-only run has no trainer: nothing of training to move.
	if d.MomentsOnHost && d.Trainer != nil {
		if err := d.Trainer.OffloadMoments(); err != nil {
			return err
		}
	}
	if d.MasterOnHost && d.Trainer != nil {
		if err := d.Trainer.OffloadMaster(); err != nil {
			return err
		}
	}
	if d.PRM != nil {
		if err := referenceToHost(d.PRM); err != nil {
			return err
		}
	}
	return d.moveReference(false)
}

// ToReference switches the device from rollout to the reference forward: the KV cache and the
// inference weights are freed (neither phase after rollout holds them) and, when the recipe has
// a reference forward (usesReference), the reference weights come onto the device. Master weights
// and moments that wait on the host stay there: the ledger's reference phase holds the reference
// copy instead of them.
func (d *Device) ToReference(step int, usesReference bool) error {
	if err := d.leaveRollout(step); err != nil {
		return fmt.Errorf("engine: step %d: entering the reference forward: %w", step, err)
	}
	if usesReference {
		if err := d.moveReference(true); err != nil {
			return fmt.Errorf("engine: step %d: %w", step, err)
		}
	}
	return nil
}

// leaveRollout frees what only rollout holds, the KV cache and the inference weights (a test's
// skipped sync leaves them stale instead), and trims the pools; nothing without a local engine.
func (d *Device) leaveRollout(step int) error {
	if d.Gen != nil {
		if err := d.Gen.ReleaseCache(); err != nil {
			return err
		}
	}
	if d.Infer != nil && !d.skipsSync(step) {
		d.Infer.release()
	}
	d.trimPools()
	return nil
}

// trimPools lets the collector free the buffers the last phase gave back (on the Go backend,
// which keeps them for reuse; nothing elsewhere): the next phase's buffers differ (weights and
// KV cache against activations and logit chunks), and kept ones count as live to the collector,
// above what the ledger plans for the phase.
func (d *Device) trimPools() {
	if d.Backend != nil {
		gobackend.TrimPools(d.Backend)
	}
}

// ToTrain switches to the update once the reference forward is done: the reference weights go
// back to host memory, then offloaded master weights and AdamW moments come onto the device.
func (d *Device) ToTrain(step int) error {
	if err := d.moveReference(false); err != nil {
		return fmt.Errorf("engine: step %d: %w", step, err)
	}
	d.trimPools()
	if d.MasterOnHost {
		if err := d.Trainer.RestoreMaster(); err != nil {
			return fmt.Errorf("engine: step %d: entering training: %w", step, err)
		}
	}
	if d.MomentsOnHost {
		if err := d.Trainer.RestoreMoments(); err != nil {
			return fmt.Errorf("engine: step %d: entering training: %w", step, err)
		}
	}
	return nil
}

// ToRollout is the sync after an update: offloaded moments go to host memory, the inference
// weights are rebuilt from the master weights on the device and checked against them, offloaded
// master weights then go to host memory, and the KV cache is allocated again. It returns
// max |inference − cast(master)|, 0 when in sync. Without a local engine (rollout.engines) only
// the offloads remain: there is nothing here to rebuild or check.
func (d *Device) ToRollout(step int) (float64, error) {
	if d.MomentsOnHost {
		if err := d.Trainer.OffloadMoments(); err != nil {
			return 0, fmt.Errorf("engine: step %d: sync: %w", step, err)
		}
	}
	d.trimPools()
	var diff float64
	if d.Infer != nil {
		if !d.skipsSync(step) {
			if err := d.Infer.refresh(); err != nil {
				return 0, fmt.Errorf("engine: step %d: sync: %w", step, err)
			}
		}
		var err error
		if diff, err = d.Infer.check(); err != nil {
			return 0, err
		}
	}
	if d.MasterOnHost {
		if err := d.Trainer.OffloadMaster(); err != nil {
			return 0, fmt.Errorf("engine: step %d: sync: %w", step, err)
		}
	}
	if d.Gen != nil {
		if err := d.Gen.RestoreCache(); err != nil {
			return 0, fmt.Errorf("engine: step %d: sync: %w", step, err)
		}
	}
	return diff, nil
}

// moveReference puts the reference copy on the device (toDevice) or in host memory; a shared
// reference (LoRA) stays where it is, and a run without one (an evaluation) has nothing to move.
func (d *Device) moveReference(toDevice bool) error {
	if d.SharedReference || d.Reference == nil {
		return nil
	}
	if toDevice {
		return referenceToDevice(d.Reference)
	}
	return referenceToHost(d.Reference)
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

// DeviceBytes is the size of the tensors that hold a device buffer now (a tensor freed by an
// update that did not return holds none).
func DeviceBytes(ts []*tensors.Tensor) int64 {
	var n int64
	for _, t := range ts {
		if t.Ok() && t.IsOnDevice(0) {
			n += int64(t.Memory())
		}
	}
	return n
}

// ToPRM switches the device from rollout to the model PRM's phase (prm.kind model on a PRM of
// its own): the policy's KV cache and inference weights are freed (as for the reference
// forward), the PRM's weights come onto the device (a folder's, PRM; else the reference's,
// which then stay for the reference forward) and its KV cache is allocated.
func (d *Device) ToPRM(step int) error {
	if err := d.leaveRollout(step); err != nil {
		return fmt.Errorf("engine: step %d: entering the PRM phase: %w", step, err)
	}
	var err error
	if d.PRM != nil {
		err = referenceToDevice(d.PRM)
	} else {
		err = d.moveReference(true)
	}
	if err != nil {
		return fmt.Errorf("engine: step %d: the PRM's weights: %w", step, err)
	}
	if err := d.PRMGen.RestoreCache(); err != nil {
		return fmt.Errorf("engine: step %d: the PRM's KV cache: %w", step, err)
	}
	return nil
}

// FromPRM ends the PRM phase: its KV cache is freed and a folder's PRM weights go to host memory.
func (d *Device) FromPRM(step int) error {
	if err := d.PRMGen.ReleaseCache(); err != nil {
		return fmt.Errorf("engine: step %d: leaving the PRM phase: %w", step, err)
	}
	if d.PRM != nil {
		if err := referenceToHost(d.PRM); err != nil {
			return fmt.Errorf("engine: step %d: the PRM's weights: %w", step, err)
		}
	}
	d.trimPools()
	return nil
}

// ToEval switches the device from rollout to the evaluation's own slots (EvalGen): rollout's
// KV cache is freed and the evaluation's allocated; the inference weights stay, both decode
// with them.
func (d *Device) ToEval(step int) error {
	if err := d.Gen.ReleaseCache(); err != nil {
		return fmt.Errorf("engine: step %d: entering the evaluation: %w", step, err)
	}
	if err := d.EvalGen.RestoreCache(); err != nil {
		return fmt.Errorf("engine: step %d: the evaluation's KV cache: %w", step, err)
	}
	return nil
}

// FromEval ends the evaluation's phase: its KV cache is freed and rollout's allocated again.
func (d *Device) FromEval(step int) error {
	if err := d.EvalGen.ReleaseCache(); err != nil {
		return fmt.Errorf("engine: step %d: leaving the evaluation: %w", step, err)
	}
	if err := d.Gen.RestoreCache(); err != nil {
		return fmt.Errorf("engine: step %d: rollout's KV cache after the evaluation: %w", step, err)
	}
	return nil
}
