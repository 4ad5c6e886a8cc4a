// Package evalset names a run's evaluation sets (the held-out tasks, the validation tasks, each
// data.eval set), picks the tasks of one, and scores an evaluation's samples as pass@k overall,
// per level and per set.
package evalset

import (
	"fmt"
	"slices"
	"strings"

	"agentrl/engine/event"
	"agentrl/envs"
	"agentrl/envs/dataset"
	"agentrl/recipes"
)

// The evaluation sets every recipe has: the held-out tasks (eval.heldout_tasks of them) and the
// validation tasks (eval.validation_tasks).
const (
	Heldout    = "heldout"
	Validation = "validation"
)

// UnknownError is an evaluation set name no task carries.
type UnknownError struct {
	Name string
	Sets []string // the sets there are, sorted
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown evaluation set %q; the sets are %s", e.Name, strings.Join(e.Sets, ", "))
}

// Names are the evaluation set names a recipe's tasks can carry before they are loaded: Heldout
// and Validation.
func Names() []string { return []string{Heldout, Validation} }

// Tasks is the tasks of evaluation set name of a run of r with these held-out and validation
// tasks, in the order evaluations score them: of the held-out tasks the first eval.heldout_tasks,
// then the validation tasks, each in the set its Meta["set"] names (Heldout, Validation when it
// names none). Heldout is all the held-out tasks, of every data.eval set: those a training run's
// evaluations score.
func Tasks(name string, r *recipes.Recipe, heldout, validation []envs.Task) ([]envs.Task, error) {
	pools := []struct {
		tasks []envs.Task
		set   string
	}{{heldout[:min(r.Eval.HeldoutTasks, len(heldout))], Heldout}, {validation, Validation}}
	sets := map[string]bool{}
	for _, s := range Names() {
		sets[s] = true
	}
	var out []envs.Task
	for _, p := range pools {
		for _, t := range p.tasks {
			set := p.set
			if s := t.Meta["set"]; s != "" {
				set = s
			}
			sets[set] = true
			// heldout is every held-out task, of whichever data.eval set, as a training run's
			// evaluations score them; a set's name picks its own.
			if set == name || (name == Heldout && p.set == Heldout) {
				out = append(out, t)
			}
		}
	}
	if !sets[name] {
		names := make([]string, 0, len(sets))
		for s := range sets {
			names = append(names, s)
		}
		slices.Sort(names)
		return nil, &UnknownError{Name: name, Sets: names}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("evaluation set %q has no tasks in this recipe (eval.heldout_tasks %d, eval.validation_tasks %d)", name, r.Eval.HeldoutTasks, r.Eval.ValidationTasks)
	}
	return out, nil
}

// PassAtK is the eval event for per-task (samples, correct) counts: pass@k over all tasks, over
// the tasks of each level when the tasks carry one, and over each evaluation set (data.eval)
// when there is more than one.
func PassAtK(step int, tasks []envs.Task, counts [][2]int, ks []int) (event.Eval, error) {
	levels, sets := map[string][][2]int{}, map[string][][2]int{}
	for i, t := range tasks {
		if l, ok := t.Meta["level"]; ok {
			levels[l] = append(levels[l], counts[i])
		}
		if s, ok := t.Meta[dataset.MetaSet]; ok {
			sets[s] = append(sets[s], counts[i])
		}
	}
	mean := func(counts [][2]int) (map[int]float64, error) {
		p := make(map[int]float64, len(ks))
		for _, k := range ks {
			v, err := envs.MeanPassAtK(counts, k)
			if err != nil {
				return nil, err
			}
			p[k] = v
		}
		return p, nil
	}
	ev := event.Eval{Step: step}
	var err error
	if ev.PassAtK, err = mean(counts); err != nil {
		return ev, err
	}
	for l, lc := range levels {
		if ev.ByLevel == nil {
			ev.ByLevel = map[string]map[int]float64{}
		}
		if ev.ByLevel[l], err = mean(lc); err != nil {
			return ev, err
		}
	}
	if len(sets) > 1 {
		ev.BySet = make(map[string]map[int]float64, len(sets))
		for name, sc := range sets {
			if ev.BySet[name], err = mean(sc); err != nil {
				return ev, err
			}
		}
	}
	return ev, nil
}
