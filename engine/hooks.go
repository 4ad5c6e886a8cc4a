package engine

import (
	"agentrl/engine/attention"
	"agentrl/engine/batch"
	"agentrl/engine/diskspace"
	"agentrl/engine/event"
	"agentrl/engine/train"
)

// hooks are what a test replaces or watches in a run (Options.hooks); the zero value is the
// run's own behaviour and watches nothing.
type hooks struct {
	// fusedProbe replaces the check of fused attention; nil: the backend's (attention.ProbeFused).
	fusedProbe attention.Probe
	// space measures the store's room before a checkpoint; nil: the store's own.
	space diskspace.Measure
	// onEmit sees each event as it is emitted, on the emitting goroutine; onUpdate each
	// micro-batch of an update as it is about to run: a test stops the run there.
	onEmit   func(event.Event)
	onUpdate func(done, total int)
	// onTrain sees a step's trajectories (an agent's later segments included) and the sequences
	// the update is about to train on.
	onTrain func(step int, trajs []*batch.Trajectory, seqs []train.Sequence)
}

func (h *hooks) emitted(e event.Event) {
	if h.onEmit != nil {
		h.onEmit(e)
	}
}

func (h *hooks) updating(done, total int) {
	if h.onUpdate != nil {
		h.onUpdate(done, total)
	}
}

func (h *hooks) training(step int, trajs []*batch.Trajectory, seqs []train.Sequence) {
	if h.onTrain != nil {
		h.onTrain(step, trajs, seqs)
	}
}
