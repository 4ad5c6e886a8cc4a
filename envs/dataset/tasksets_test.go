package dataset

import (
	"path/filepath"
	"testing"

	"agentrl/envs"
	"agentrl/recipes"
)

// TestTaskSets: the seed recipe's synthetic tasks come as its sizes say, training, validation and
// held-out apart; the same recipe draws the same tasks.
func TestTaskSets(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	train, validation, heldout, err := TaskSets(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(train) != r.Env.Tasks.TrainSize || len(validation) != r.Eval.ValidationTasks || len(heldout) != r.Env.Tasks.HeldoutSize {
		t.Fatalf("%d training, %d validation, %d held-out tasks; want %d, %d, %d",
			len(train), len(validation), len(heldout), r.Env.Tasks.TrainSize, r.Eval.ValidationTasks, r.Env.Tasks.HeldoutSize)
	}
	seen := map[string]string{}
	for name, set := range map[string][]envs.Task{"train": train, "validation": validation, "heldout": heldout} {
		for _, task := range set {
			if other, ok := seen[task.Prompt]; ok && other != name {
				t.Errorf("task %s is in %s and %s", task.ID, other, name)
			}
			seen[task.Prompt] = name
		}
	}
	again, _, _, err := TaskSets(r, nil)
	if err != nil || again[0].ID != train[0].ID || again[len(again)-1].Prompt != train[len(train)-1].Prompt {
		t.Errorf("a second draw differs (%v)", err)
	}
}
