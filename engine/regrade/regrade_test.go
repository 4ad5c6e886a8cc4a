package regrade

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"agentrl/engine/event"
	"agentrl/envs/dataset"
	"agentrl/recipes"
	"agentrl/store"
)

// TestRegrade: a stored run's trajectories are judged again against its own tasks' answers, and
// exactly those whose recorded verdict differs are returned (a training and an evaluation one),
// under the verifier and under math_dapo, which wants the truth's exact string in the last box.
func TestRegrade(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	train, _, heldout, err := dataset.TaskSets(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	yaml, _ := json.Marshal(r)
	if err := st.PutRun(store.Run{ID: "run", RecipeYAML: string(yaml)}); err != nil {
		t.Fatal(err)
	}
	tr, ev := train[0], heldout[0]
	rec := func(task, answer string, sample int, correct, eval bool) store.TrajectoryRecord {
		data, _ := json.Marshal(event.Trajectory{Step: 1, TaskID: task, Sample: sample, Eval: eval, Correct: correct,
			Turns: []event.Turn{{Assistant: "I compute it. " + answer}}})
		return store.TrajectoryRecord{Step: 1, TaskID: task, Sample: sample, Correct: correct, Eval: eval, Data: data}
	}
	recs := []store.TrajectoryRecord{
		rec(tr.ID, `\boxed{`+tr.Answer+`}`, 0, true, false),   // right, recorded right
		rec(tr.ID, `\boxed{`+tr.Answer+`}`, 1, false, false),  // right, recorded wrong: changes
		rec(tr.ID, `\boxed{`+tr.Answer+`.0}`, 2, true, false), // 7.0 for 7: right for the verifier, a string mismatch for math_dapo
		rec(ev.ID, `\boxed{`+ev.Answer+`1}`, 0, true, true),   // wrong, recorded right: changes
	}
	if err := st.PutTrajectories("run", recs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		grader  string
		changed []int // the records whose verdict changes
	}{{"", []int{1, 3}}, {"verifier", []int{1, 3}}, {"math_dapo", []int{1, 2, 3}}} {
		n, changed, err := Run(st, "run", tc.grader)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(recs) || len(changed) != len(tc.changed) {
			t.Fatalf("grader %q: judged %d, changed %+v; want %d judged, records %v changed", tc.grader, n, changed, len(recs), tc.changed)
		}
		for i, k := range tc.changed {
			c, want := changed[i], recs[k]
			if c.TaskID != want.TaskID || c.Sample != want.Sample || c.Eval != want.Eval || c.Stored != want.Correct || c.Now == want.Correct {
				t.Errorf("grader %q: change %d is %+v; want record %d (%s sample %d) flipped from %v", tc.grader, i, c, k, want.TaskID, want.Sample, want.Correct)
			}
		}
	}
	if _, _, err := Run(st, "run", "nope"); err == nil {
		t.Error("an unknown grader was accepted")
	}
}
