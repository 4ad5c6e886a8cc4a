package engine

import (
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/train"
)

// TestHooks: unset hooks watch nothing and do not fail; set ones see what the run passes them.
func TestHooks(t *testing.T) {
	var none hooks
	none.emitted(event.Phase{})
	none.updating(1, 2)
	none.training(1, nil, nil)

	var emitted []event.Event
	var updates [][2]int
	var trained int
	h := hooks{onEmit: func(e event.Event) { emitted = append(emitted, e) }, onUpdate: func(done, total int) { updates = append(updates, [2]int{done, total}) },
		onTrain: func(step int, trajs []*batch.Trajectory, _ []train.Sequence) { trained = step + len(trajs) }}
	h.emitted(event.Phase{Step: 3})
	h.updating(1, 2)
	h.training(4, []*batch.Trajectory{{}}, nil)
	if len(emitted) != 1 || emitted[0].(event.Phase).Step != 3 || len(updates) != 1 || updates[0] != [2]int{1, 2} || trained != 5 {
		t.Errorf("hooks saw %v, %v, %d; want one phase of step 3, update 1 of 2, step 4 with one trajectory", emitted, updates, trained)
	}
}
