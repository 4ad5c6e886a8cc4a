package compare

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"agentrl/envs"
	"agentrl/envs/synthetic"
	"agentrl/recipes"
	"agentrl/store"
)

// inGroup reports whether t is of group: its synthetic.TaskGroup, or its level as "level N".
func inGroup(t envs.Task, group string) bool {
	return synthetic.TaskGroup(t) == group || "level "+t.Meta["level"] == group
}

// GroupSource is a Source with every evaluation cut to the held-out tasks of one group (synthetic.TaskGroup, or
// "level N"): counts of those tasks only, pass@k over them, and a task fingerprint of its own. A
// run's held-out tasks are drawn again from its stored recipe and checked against the
// evaluation's fingerprint, so compare can pair runs on a part of their tasks.
type GroupSource struct {
	Source
	Group string
}

// Evals returns run's evaluations over the group's tasks.
func (g GroupSource) Evals(run string) ([]store.Eval, error) {
	r, err := g.GetRun(run)
	if err != nil {
		return nil, err
	}
	tasks, err := storedHeldout(r)
	if err != nil {
		return nil, err
	}
	es, err := g.Source.Evals(run)
	if err != nil {
		return nil, err
	}
	out := make([]store.Eval, 0, len(es))
	for _, e := range es {
		if e.Counts == nil {
			out = append(out, e)
			continue
		}
		n := len(e.Counts)
		if n > len(tasks) || envs.Fingerprint(tasks[:n]) != e.Tasks {
			return nil, fmt.Errorf("run %s: its step-%d evaluation is not of the held-out tasks its recipe draws, so its tasks cannot be told apart by group", run, e.Step)
		}
		var sub []envs.Task
		var counts [][2]int
		for i, t := range tasks[:n] {
			if inGroup(t, g.Group) {
				sub, counts = append(sub, t), append(counts, e.Counts[i])
			}
		}
		if len(sub) == 0 {
			return nil, fmt.Errorf("run %s: none of its %d held-out tasks is of group %q; its groups are %s", run, n, g.Group, strings.Join(groups(tasks[:n]), ", "))
		}
		cut := store.Eval{Step: e.Step, Counts: counts, Tasks: envs.Fingerprint(sub), PassAtK: map[int]float64{}}
		for k := range e.PassAtK {
			if cut.PassAtK[k], err = envs.MeanPassAtK(counts, k); err != nil {
				return nil, fmt.Errorf("run %s, step %d, pass@%d over %q: %w", run, e.Step, k, g.Group, err)
			}
		}
		out = append(out, cut)
	}
	return out, nil
}

// storedHeldout draws run's held-out tasks again from its stored recipe, in the order its
// evaluations count them.
func storedHeldout(run store.Run) ([]envs.Task, error) {
	var r recipes.Recipe
	if err := json.Unmarshal([]byte(run.RecipeYAML), &r); err != nil {
		return nil, fmt.Errorf("run %s: the stored recipe is unreadable: %w", run.ID, err)
	}
	if r.Env.Name != "retool" || r.Env.Tasks.Source != "synthetic" {
		return nil, fmt.Errorf("run %s: its tasks come from env %s, tasks %s; only synthetic ReTool tasks have groups", run.ID, r.Env.Name, r.Env.Tasks.Source)
	}
	_, held, err := synthetic.Tasks{Levels: r.Env.Tasks.Synthetic.Levels, Seed: uint64(r.Env.Tasks.Synthetic.Seed)}.Split(r.Env.Tasks.TrainSize, r.Env.Tasks.HeldoutSize)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run.ID, err)
	}
	return held, nil
}

// groups lists the groups of tasks (synthetic.TaskGroup) in order of first occurrence, and each level.
func groups(tasks []envs.Task) []string {
	var gs []string
	for _, t := range tasks {
		for _, g := range []string{"level " + t.Meta["level"], synthetic.TaskGroup(t)} {
			if !slices.Contains(gs, g) {
				gs = append(gs, g)
			}
		}
	}
	for i := range gs {
		gs[i] = fmt.Sprintf("%q", gs[i])
	}
	return gs
}
