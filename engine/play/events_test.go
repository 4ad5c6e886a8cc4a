package play

import (
	"reflect"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/event"
)

// TestPartialEvent: a paused trajectory sampled in two phases says so, with each stretch's first
// response token counted over the policy tokens; one sampled in one phase, or without partial
// rollouts, carries no stretches.
func TestPartialEvent(t *testing.T) {
	tr := &batch.Trajectory{PromptLen: 2, Mask: []bool{false, false, true, true, false, true, true},
		Partial: &batch.Partial{State: PartialPaused, Segments: []batch.Segment{{Start: 2, Version: 0, Step: 1}, {Start: 5, Version: 1, Step: 2}}}}
	var e event.Trajectory
	PartialEvent(&e, tr)
	if want := []event.Segment{{From: 0, Step: 1, Version: 0}, {From: 2, Step: 2, Version: 1}}; !e.Paused || !reflect.DeepEqual(e.Segments, want) {
		t.Errorf("paused %v, segments %+v; want paused, %+v", e.Paused, e.Segments, want)
	}
	tr.Partial.Segments, tr.Partial.State = tr.Partial.Segments[:1], 0
	e = event.Trajectory{}
	PartialEvent(&e, tr)
	if e.Paused || e.Segments != nil {
		t.Errorf("one phase: paused %v, segments %+v; want neither", e.Paused, e.Segments)
	}
	e = event.Trajectory{}
	PartialEvent(&e, &batch.Trajectory{})
	if e.Paused || e.Segments != nil {
		t.Errorf("no partial rollout: %+v", e)
	}
}
