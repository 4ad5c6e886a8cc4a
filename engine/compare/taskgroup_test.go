package compare

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/envs"
	"agentrl/recipes"
	"agentrl/store"
)

// TestGroupSource: an evaluation cut to a group keeps the counts of that group's tasks only, in
// order, with pass@k worked out by hand from them; Runs on the cut pairs the same tasks; a group
// no task is of, and an evaluation of other tasks, are refused with what is there.
func TestGroupSource(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Env.Tasks.Synthetic.Levels = []int{0, 6}
	data, _ := json.Marshal(r)
	held, err := storedHeldout(store.Run{ID: "x", RecipeYAML: string(data)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 24
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	counts := map[string][][2]int{"a": make([][2]int, n), "b": make([][2]int, n)}
	for i := range n {
		counts["a"][i] = [2]int{4, i % 5}       // 0..4 correct of 4
		counts["b"][i] = [2]int{4, (i + 2) % 5} // another pattern
	}
	for id, c := range counts {
		if err := st.PutRun(store.Run{ID: id, RecipeYAML: string(data)}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutEval(id, store.Eval{Step: 3, Counts: c, Tasks: envs.Fingerprint(held[:n]), PassAtK: map[int]float64{1: 0.5, 2: 0.5}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, group := range []string{"level 0", "level 6", "named, taught", "named, untaught"} {
		src := GroupSource{Source: st, Group: group}
		es, err := src.Evals("a")
		if err != nil {
			t.Fatalf("%s: %v", group, err)
		}
		var want [][2]int
		var p1 float64
		for i, tk := range held[:n] {
			if inGroup(tk, group) {
				want = append(want, counts["a"][i])
				p1 += float64(counts["a"][i][1]) / 4
			}
		}
		if len(want) == 0 || len(want) == n {
			t.Fatalf("%s: %d of %d tasks; want a proper part", group, len(want), n)
		}
		e := es[0]
		if len(e.Counts) != len(want) || math.Abs(e.PassAtK[1]-p1/float64(len(want))) > 1e-12 || len(e.PassAtK) != 2 {
			t.Errorf("%s: %d counts, pass@k %v; want %d counts and pass@1 %.4f", group, len(e.Counts), e.PassAtK, len(want), p1/float64(len(want)))
		}
		for i := range want {
			if e.Counts[i] != want[i] {
				t.Fatalf("%s: count %d is %v; want %v", group, i, e.Counts[i], want[i])
			}
		}
		c, err := Runs(src, "a", "b", -1)
		if err != nil || c.Tasks != len(want) || c.Rows[0].A != e.PassAtK[1] {
			t.Errorf("%s: compare %+v, %v", group, c, err)
		}
	}
	if _, err := (GroupSource{Source: st, Group: "level 4"}).Evals("a"); err == nil || !strings.Contains(err.Error(), `"named, untaught"`) || !strings.Contains(err.Error(), `"level 0"`) {
		t.Errorf("a group no task is of: %v", err)
	}
	if err := st.PutEval("b", store.Eval{Step: 5, Counts: counts["b"], Tasks: "other", PassAtK: map[int]float64{1: 0.5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := (GroupSource{Source: st, Group: "level 0"}).Evals("b"); err == nil || !strings.Contains(err.Error(), "step-5 evaluation is not of the held-out tasks") {
		t.Errorf("an evaluation of other tasks: %v", err)
	}
}
