package evalset

import (
	"errors"
	"reflect"
	"testing"

	"agentrl/engine/event"
	"agentrl/envs"
	"agentrl/envs/dataset"
	"agentrl/recipes"
)

// TestTasks: an evaluation set is the tasks that carry its name (the held-out and validation
// tasks, without a name of their own, theirs); an unknown name lists the sets there are.
func TestTasks(t *testing.T) {
	task := func(id, set string) envs.Task {
		tk := envs.Task{ID: id, Prompt: id}
		if set != "" {
			tk.Meta = map[string]string{"set": set}
		}
		return tk
	}
	r := recipes.Default()
	r.Eval.HeldoutTasks = 3
	heldout := []envs.Task{task("h1", ""), task("h2", ""), task("a1", "aime"), task("h4", "")} // h4 is past eval.heldout_tasks
	validation := []envs.Task{task("v1", ""), task("v2", "")}
	ids := func(ts []envs.Task) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	for _, tc := range []struct {
		set  string
		want []string
		sets []string // an unknown set: the sets the error lists
	}{
		{set: Heldout, want: []string{"h1", "h2", "a1"}}, // every held-out task, of any data.eval set,
		{set: Validation, want: []string{"v1", "v2"}},
		{set: "aime", want: []string{"a1"}},
		{set: "gsm8k", sets: []string{"aime", "heldout", "validation"}},
	} {
		got, err := Tasks(tc.set, r, heldout, validation)
		var unknown *UnknownError
		switch {
		case tc.sets != nil && (!errors.As(err, &unknown) || !reflect.DeepEqual(unknown.Sets, tc.sets)):
			t.Errorf("%s: error %v; want an unknown set listing %v", tc.set, err, tc.sets)
		case tc.sets == nil && (err != nil || !reflect.DeepEqual(ids(got), tc.want)):
			t.Errorf("%s: got %v (%v); want %v", tc.set, ids(got), err, tc.want)
		}
	}
	if _, err := Tasks(Validation, r, heldout, nil); err == nil {
		t.Error("validation without validation tasks: no error")
	}
}

// TestPassAtKByLevel: pass@k per level comes with tasks that carry one.
func TestPassAtKByLevel(t *testing.T) {
	lv := func(l string) envs.Task { return envs.Task{Meta: map[string]string{"level": l}} }
	tasks := []envs.Task{lv("0"), lv("0"), lv("1"), lv("1")}
	counts := [][2]int{{2, 1}, {2, 2}, {2, 0}, {2, 0}}
	ev, err := PassAtK(3, tasks, counts, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	// pass@1 is the mean success rate per task, pass@2 with n = 2 is "any of the two".
	want := event.Eval{Step: 3, PassAtK: map[int]float64{1: 0.375, 2: 0.5},
		ByLevel: map[string]map[int]float64{"0": {1: 0.75, 2: 1}, "1": {1: 0, 2: 0}}}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("got %+v\nwant %+v", ev, want)
	}
	ev, _ = PassAtK(3, []envs.Task{{}}, [][2]int{{2, 1}}, []int{1})
	if ev.ByLevel != nil {
		t.Errorf("tasks without a level gave ByLevel %v", ev.ByLevel)
	}
}

// Per-set pass@k comes with more than one set; one set is the overall figure alone.
func TestPassAtKBySet(t *testing.T) {
	set := func(s string) envs.Task { return envs.Task{Meta: map[string]string{dataset.MetaSet: s}} }
	ev, err := PassAtK(1, []envs.Task{set("a"), set("a"), set("b")}, [][2]int{{2, 2}, {2, 0}, {2, 1}}, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]map[int]float64{"a": {1: 0.5}, "b": {1: 0.5}}; !reflect.DeepEqual(ev.BySet, want) || ev.PassAtK[1] != 0.5 {
		t.Errorf("by set %v, overall %v; want %v and 0.5", ev.BySet, ev.PassAtK, want)
	}
	if ev, _ = PassAtK(1, []envs.Task{set("a")}, [][2]int{{2, 1}}, []int{1}); ev.BySet != nil {
		t.Errorf("one set gave BySet %v", ev.BySet)
	}
}
