package play

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/envs/external"
)

// dropNoRequests is the drop of an agent that gave a result without calling the model: there is
// nothing to train on.
const dropNoRequests external.Drop = "no_requests"

// SplitDropped separates the trajectories whose agent gave nothing usable from the rest: the
// step trains on the usable ones and shows and stores both. A step with nothing usable is an
// error that says why (the agent does not work): the first agent's reason and its stderr, from
// the line that says what failed to its end, and what to do next. checkpoint is the step of the
// run's latest checkpoint, 0 when it has none: only then can fixing the agent and resuming go
// on; without one the recipe is run again.
func SplitDropped(step, checkpoint int, trajs []*batch.Trajectory) (usable, dropped []*batch.Trajectory, err error) {
	for _, t := range trajs {
		if x := AgentRunOf(t); x != nil && x.Drop != external.DropNone {
			dropped = append(dropped, t)
		} else {
			usable = append(usable, t)
		}
	}
	if len(usable) == 0 && len(dropped) > 0 {
		x := AgentRunOf(dropped[0])
		msg := fmt.Sprintf("engine: step %d: every one of its %d trajectories was dropped (%s); the first: %s", step, len(dropped), dropCounts(dropped), x.Why)
		if tail := strings.TrimSpace(x.Result.StderrTail); tail != "" {
			msg += "; its stderr ends:\n" + stderrExcerpt(tail, 8)
		}
		next := "fix it, and run the recipe again (the run has no checkpoint to resume from)"
		if checkpoint > 0 {
			next = fmt.Sprintf("fix it, and resume the run (agentrl-tui resume: it goes on from the checkpoint of step %d)", checkpoint)
		}
		return nil, dropped, errors.New(msg + "\nrun the agent by hand against `agentrl-tui serve` to see what it does, " + next)
	}
	return usable, dropped, nil
}

// stderrExcerpt is the last n lines of an agent's stderr, led by the line that says what failed
// when that is further up (Node's cause is above its stack and version).
func stderrExcerpt(tail string, n int) string {
	end := lastLines(tail, n)
	if cause := external.StderrCause(tail); cause != "" && !strings.Contains(end, cause) {
		return cause + "\n…\n" + end
	}
	return end
}

// dropCounts says how many trajectories were dropped for each reason: "3 crashed, 1 timeout".
func dropCounts(dropped []*batch.Trajectory) string {
	n := map[external.Drop]int{}
	for _, t := range dropped {
		n[AgentRunOf(t).Drop]++
	}
	kinds := make([]string, 0, len(n))
	for k := range n {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", n[external.Drop(k)], k)
	}
	return strings.Join(parts, ", ")
}

// dropReasons are the drop kinds a step's metrics always count, so that their curves have a
// point at every step; the others (cancelled, not_started) appear when they happen.
var dropReasons = []external.Drop{external.DropCrashed, external.DropTimeout, external.DropNoResult, external.DropBadResult, dropNoRequests}

// DropMetrics counts an external run's dropped trajectories in the step's metrics: dropped, and
// dropped_REASON for each reason. A ReTool run (a nil AgentEnv) drops nothing and gets none of
// these.
func (a *AgentEnv) DropMetrics(metrics map[event.Metric]float64, dropped []*batch.Trajectory) {
	if a == nil {
		return
	}
	metrics[event.MetricDropped] = float64(len(dropped))
	for _, k := range dropReasons {
		metrics[event.MetricDroppedFor(string(k))] = 0
	}
	for _, t := range dropped {
		metrics[event.MetricDroppedFor(string(AgentRunOf(t).Drop))]++
	}
}
