package engine

import (
	"fmt"
	"strings"
	"testing"

	"agentrl/engine/event"
)

// partialOver is a short partial-rollout run on the long-tail workload: 2 groups of 6 a step
// and 1 more in flight, a third of the trajectories asked for 8 turns, so that steps end with
// long ones unfinished.
func partialOver(steps int) map[string]string {
	return map[string]string{"run.max_steps": fmt.Sprint(steps), "rollout.partial.enabled": "true", "rollout.partial.over_sample": "1",
		"rollout.partial.max_staleness": "2", "env.long_tail.share": "0.35", "env.long_tail.turns": "8", "rollout.max_turns": "8",
		"rollout.max_total_tokens": "1024"}
}

// TestPartialSameSeedSameRun runs three steps with partial rollouts on the built-in model twice:
// trajectories pause and resume across steps (seen in the metrics and the events: a paused
// trajectory marked, a resumed one with its segments and their policy versions), and the two
// runs pause the same trajectories at the same tokens and train the same batches, to the bit,
// as the lockstep generator's pause rule follows decode-step counts.
func TestPartialSameSeedSameRun(t *testing.T) {
	run := func() (p runPrint, paused, resumed int, segs []event.Segment) {
		c, events := builtinRun(t, partialOver(3))
		evs := runEvents(t, c, events)
		for _, e := range evs {
			if v, ok := e.(event.Trajectory); ok {
				if v.Paused {
					paused++
				}
				if len(v.Segments) > 1 {
					resumed++
					segs = v.Segments
				}
			}
		}
		return printOf(evs), paused, resumed, segs
	}
	p1, paused, resumed, segs := run()
	p2, _, _, _ := run()
	if paused == 0 || resumed == 0 {
		t.Fatalf("%d paused and %d resumed trajectories shown; want some of each", paused, resumed)
	}
	for i, s := range segs[1:] {
		if s.Step != segs[i].Step+1 || s.Version != s.Step-1 || s.From < segs[i].From {
			t.Fatalf("segments %+v; want one per step, each under its step's weights (version step − 1)", segs)
		}
	}
	sameRun(t, p1, p2)
	t.Logf("%d trajectories shown, %d paused, %d resumed; e.g. segments %+v", len(p1.trajs), paused, resumed, segs)
	for _, m := range p1.metrics {
		if strings.Contains(m, "paused") || strings.Contains(m, "resumed") || strings.Contains(m, "stale") || strings.Contains(m, "logprob_diff_max") {
			t.Log(m)
		}
	}
}
