package engine

import (
	"strings"
	"testing"

	"agentrl/engine/event"
)

// TestDataRunEndToEnd runs two steps with the tasks from the sample files: training on the
// verl-style DAPO parquet, evaluating on two sets (the HF AIME folder and the slime JSONL, two
// tasks each), with pass@k reported over both and per set.
func TestDataRunEndToEnd(t *testing.T) {
	c, _, events := tinyRun(t, map[string]string{
		"data.train":               "../testdata/data/dapo-verl.parquet",
		"data.eval":                "aime24=../testdata/data/aime2024@2,slime=../testdata/data/dapo-slime.jsonl@2",
		"data.prompt_template":     "{problem}",
		"eval.heldout_tasks":       "4",
		"rollout.max_total_tokens": "512",
	})
	if len(c.train) != 18 || len(c.validation) != 2 || len(c.heldout) != 4 {
		t.Fatalf("train %d, validation %d, held-out %d; want 18, 2, 4", len(c.train), len(c.validation), len(c.heldout))
	}
	var evals []event.Eval
	trained := map[string]bool{}
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.Eval:
			evals = append(evals, v)
		case event.Trajectory:
			if !v.Eval {
				trained[v.TaskID] = true
			}
		}
	}
	if len(evals) == 0 {
		t.Fatal("no evaluation")
	}
	for _, ev := range evals {
		if len(ev.BySet) != 2 || ev.BySet["aime24"] == nil || ev.BySet["slime"] == nil || ev.PassAtK[1] != (ev.BySet["aime24"][1]+ev.BySet["slime"][1])/2 {
			t.Errorf("step %d: pass@k %v by set %v; want both sets, the overall their mean", ev.Step, ev.PassAtK, ev.BySet)
		}
	}
	for id := range trained {
		if !strings.Contains(id, "-") || strings.HasPrefix(id, "aime24/") {
			t.Errorf("trained on %q; want the DAPO sample's tasks only", id)
		}
	}
	if len(trained) == 0 {
		t.Error("no training trajectory")
	}
}

// TestDataRunBuiltin trains the built-in model for two steps on the slime-style DAPO JSONL:
// the trajectories open with the dataset's user turn, and the run ends.
func TestDataRunBuiltin(t *testing.T) {
	c, events := builtinRun(t, map[string]string{"data.train": "../testdata/data/dapo-slime.jsonl", "run.max_steps": "2",
		"rollout.group_size": "2", "rollout.max_new_tokens": "24", "rollout.max_total_tokens": "384", "eval.validation_tasks": "0"})
	steps, trajs := 0, 0
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.StepMetrics:
			steps++
		case event.Trajectory:
			trajs++
			if !strings.HasPrefix(v.Prompt, "Solve the following math problem step by step.") || !strings.HasPrefix(v.TaskID, "line-") {
				t.Errorf("trajectory of task %q, prompt %.40q…; want the JSONL's tasks", v.TaskID, v.Prompt)
			}
		}
	}
	if steps != 2 || trajs != 8 {
		t.Errorf("%d steps, %d trajectories; want 2 and 8", steps, trajs)
	}
}
