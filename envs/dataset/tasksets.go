package dataset

import (
	"fmt"
	"io"

	"agentrl/envs"
	"agentrl/envs/synthetic"
	"agentrl/recipes"
)

// TaskSets builds r's training, validation and held-out tasks as a run of r does: from data.train's
// dataset files, env.tasks' JSONL file, or the synthetic generator seeded by the recipe. A
// dataset file that takes more than a second to read says how far it has come on log (nil: not).
func TaskSets(r *recipes.Recipe, log io.Writer) (train, validation, heldout []envs.Task, err error) {
	plan, err := PlanOf(r)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case plan != nil: // data.train: the dataset files, the evaluation sets held out
		if log != nil {
			plan.Progress = func(p Progress) { fmt.Fprintln(log, "data:", p) }
		}
		d, err := Load(plan)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(plan.Eval) > 0 && len(d.Heldout) > r.Eval.HeldoutTasks {
			return nil, nil, nil, fmt.Errorf("engine: the data.eval sets hold %d tasks, more than the %d of eval.heldout_tasks; raise eval.heldout_tasks or give the sets a size", len(d.Heldout), r.Eval.HeldoutTasks)
		}
		return d.Train, d.Validation, d.Heldout, nil
	case r.Env.Tasks.Source == "jsonl":
		all, err := envs.LoadJSONL(r.Env.Tasks.JSONL.Path, envs.Fields{ID: r.Env.Tasks.JSONL.IDField, Prompt: r.Env.Tasks.JSONL.PromptField, Answer: r.Env.Tasks.JSONL.AnswerField})
		if err != nil {
			return nil, nil, nil, err
		}
		n := min(r.Env.Tasks.HeldoutSize, len(all)/2)
		v := min(r.Eval.ValidationTasks, (len(all)-n)/2)
		return all[n+v:], all[n : n+v], all[:n], nil
	}
	syn := synthetic.Tasks{Levels: r.Env.Tasks.Synthetic.Levels, Seed: uint64(r.Env.Tasks.Synthetic.Seed)}
	if train, heldout, err = syn.Split(r.Env.Tasks.TrainSize, r.Env.Tasks.HeldoutSize); err != nil {
		return nil, nil, nil, err
	}
	if validation, err = syn.Validation(r.Eval.ValidationTasks, train); err != nil {
		return nil, nil, nil, err
	}
	return train, validation, heldout, nil
}
