package play

import (
	"strings"
	"testing"

	"agentrl/engine/batch"
	"agentrl/envs"
	"agentrl/envs/external"
)

// TestSplitDroppedNothingUsable: a step where every agent's trajectory was dropped is an error
// that names the reasons, counted, and the first agent's stderr. (The group statistics over the
// trajectories that remain are the engine's TestAgentGroupStatistics.)
func TestSplitDroppedNothingUsable(t *testing.T) {
	mk := func(group int, reward float64, drop external.Drop) *batch.Trajectory {
		return &batch.Trajectory{Group: group, Tokens: []int32{1, 2, 3}, Mask: []bool{false, true, true}, LogProbs: []float32{0, -1, -1},
			Reward: envs.Reward{Total: reward}, Agent: &batch.AgentRun{Drop: drop}}
	}
	// Nothing usable: the step stops with the reasons and the first agent's stderr.
	crashed := mk(0, 0, external.DropCrashed)
	crashed.Agent.Why, crashed.Agent.Result.StderrTail = "crashed: exit status 1", "Error: connect ECONNREFUSED\n"
	if _, _, err := SplitDropped(3, []*batch.Trajectory{crashed, mk(0, 0, external.DropTimeout)}); err == nil ||
		!strings.Contains(err.Error(), "every one of its 2 trajectories was dropped (1 crashed, 1 timeout)") || !strings.Contains(err.Error(), "ECONNREFUSED") {
		t.Errorf("a step with every trajectory dropped: %v; want an error naming the reasons and the stderr", err)
	}
}
