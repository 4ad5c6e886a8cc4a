package play

import (
	"agentrl/engine/batch"
	"agentrl/engine/event"
)

// traceRolloutPoints is how many points a generation phase's occupancy trace has (the Status
// pane's sparkline).
const traceRolloutPoints = 32

// Event is what the generation phase of step that g reports measured: the generator's phase
// stats and the time its trajectories queued for a sandbox worker.
func (g Generation) Event(step int, phase string) event.Generation {
	ps, toolQueue := g.Stats, g.ToolQueue
	e := event.Generation{Step: step, Phase: phase, Slots: ps.Slots, Steps: ps.Steps, Occupancy: ps.Occupancy(),
		TailSeconds: ps.Tail().Seconds(), ToolStallShare: ps.StallShare(), ToolQueueSeconds: toolQueue.Seconds()}
	e.Trace, e.TraceEvery = ps.Trace(traceRolloutPoints)
	return e
}

// PartialEvent adds a partial rollout's state to t's event: whether t waits paused, and its
// response's stretches by phase. A trajectory sampled without partial rollouts is left as it is.
func PartialEvent(e *event.Trajectory, t *batch.Trajectory) {
	if t.Partial != nil {
		e.Paused, e.Segments = t.Partial.State == PartialPaused, segments(t)
	}
}

// segments is t's response stretches by phase for its event (nil for a trajectory sampled in
// one phase): each segment's first response token and its step and policy version.
func segments(t *batch.Trajectory) []event.Segment {
	if t.Partial == nil || len(t.Partial.Segments) < 2 {
		return nil
	}
	var out []event.Segment
	for _, s := range t.Partial.Segments {
		from := 0
		for j := t.PromptLen; j < min(s.Start, len(t.Mask)); j++ {
			if t.Mask[j] {
				from++
			}
		}
		out = append(out, event.Segment{From: from, Step: s.Step, Version: s.Version})
	}
	return out
}
