package play

import (
	"os"
	"path/filepath"
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
			Reward: envs.Reward{Total: reward}, Agent: &AgentRun{Drop: drop}}
	}
	// Nothing usable: the step stops with the reasons and the first agent's stderr.
	crashed := mk(0, 0, external.DropCrashed)
	x := AgentRunOf(crashed)
	x.Why, x.Result.StderrTail = "crashed: exit status 1", "Error: connect ECONNREFUSED\n"
	if _, _, err := SplitDropped(3, 0, []*batch.Trajectory{crashed, mk(0, 0, external.DropTimeout)}); err == nil ||
		!strings.Contains(err.Error(), "every one of its 2 trajectories was dropped (1 crashed, 1 timeout)") || !strings.Contains(err.Error(), "ECONNREFUSED") {
		t.Errorf("a step with every trajectory dropped: %v; want an error naming the reasons and the stderr", err)
	}
}

// TestSplitDroppedNamesTheCause: agents that crash without their Node packages stop the step
// with the line that says so (not only "Node.js v20.20.2") and the fix, npm ci; the advice to
// resume comes only when the run has a checkpoint to resume from.
func TestSplitDroppedNamesTheCause(t *testing.T) {
	var trajs []*batch.Trajectory
	for i := 0; i < 64; i++ {
		res := external.Result{StderrTail: nodeMissingOpenAI, ExitCode: 1, Drop: external.DropCrashed}
		res.Dropped = "crashed: exit status 1" // as Run writes it, less the cause, so that the excerpt must show it
		trajs = append(trajs, &batch.Trajectory{Group: i / 8, Agent: &AgentRun{Result: res, Drop: res.Drop, Why: res.Dropped}})
	}
	_, _, err := SplitDropped(1, 0, trajs)
	if err == nil {
		t.Fatal("SplitDropped: no error for a step whose 64 trajectories crashed")
	}
	msg := err.Error()
	for _, want := range []string{"every one of its 64 trajectories was dropped (64 crashed)",
		"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'openai'", "Node.js v20.20.2", "no checkpoint to resume from"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "resume the run") {
		t.Errorf("the error %q suggests resuming a run that has no checkpoint", msg)
	}
	if _, _, err := SplitDropped(7, 5, trajs); err == nil || !strings.Contains(err.Error(), "resume the run") || !strings.Contains(err.Error(), "checkpoint of step 5") {
		t.Errorf("with a checkpoint of step 5: %v; want the advice to resume from it", err)
	}
}

// nodeMissingOpenAI is Node 20's stderr for an agent whose folder has no node_modules (envs/external's
// test file): the cause is above the stack, whose last 8 lines do not include it.
var nodeMissingOpenAI = func() string {
	b, err := os.ReadFile(filepath.Join("..", "..", "envs", "external", "testdata", "node-missing-openai.stderr"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()
