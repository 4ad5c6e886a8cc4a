package engine

import (
	"time"

	"agentrl/engine/event"
	"agentrl/engine/rollout"
)

// traceRolloutPoints is how many points a generation phase's occupancy trace has (the Status
// pane's sparkline).
const traceRolloutPoints = 32

// generationEvent is what a generation phase of step measured: the generator's phase stats and
// the time its trajectories queued for a sandbox worker.
func generationEvent(step int, phase string, ps rollout.PhaseStats, toolQueue time.Duration) event.Generation {
	e := event.Generation{Step: step, Phase: phase, Slots: ps.Slots, Steps: ps.Steps, Occupancy: ps.Occupancy(),
		TailSeconds: ps.Tail().Seconds(), ToolStallShare: ps.StallShare(), ToolQueueSeconds: toolQueue.Seconds()}
	e.Trace, e.TraceEvery = ps.Trace(traceRolloutPoints)
	return e
}

// generationMetrics puts a rollout's four numbers in a step's metrics.
func generationMetrics(g event.Generation, metrics map[event.Metric]float64) {
	metrics[event.MetricRolloutOccupancy] = g.Occupancy
	metrics[event.MetricRolloutTailSeconds] = g.TailSeconds
	metrics[event.MetricToolStallShare] = g.ToolStallShare
	metrics[event.MetricToolQueueSeconds] = g.ToolQueueSeconds
}
