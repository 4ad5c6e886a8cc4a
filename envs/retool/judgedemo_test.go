package retool

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
)

// TestJudgeDemonstration: every kind of attempt gives a judge demonstration whose reply the PRM
// phase's own parser reads back (ParsePRM) to the checked verdicts and bridge thought; the
// attempts that end right need no hint (\boxed{-1}) and end on a correct step, the flawed ones get
// the rules hinter's bridge thought and end on a wrong one; the steps the environment knows to be
// wrong (a failed run, another computation, a malformed turn) are judged wrong.
func TestJudgeDemonstration(t *testing.T) {
	tmpl, err := os.ReadFile("../../testdata/builtin/prm_prompt.txt")
	if err != nil {
		t.Fatal(err)
	}
	tasks, _, err := synthetic.Tasks{Levels: []int{0, 1, synthetic.NamedOpLevel}, Seed: 7}.Split(12, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		steps []float64
		hint  bool
	}{
		"tool":                  {[]float64{1, 1}, false},
		"recover":               {[]float64{0, 1, 1}, false},
		"direct":                {[]float64{1}, false},
		"format":                {[]float64{0, 1, 1}, false},
		"wrong_copy":            {[]float64{1, 0}, true},
		"computed_else":         {[]float64{0, 0}, true},
		"guessed":               {[]float64{0}, true},
		"name_error":            {[]float64{0, 0}, true},
		"no_answer":             {[]float64{0}, true},
		"recover_wrong_copy":    {[]float64{0, 1, 0}, true},
		"recover_computed_else": {[]float64{0, 0, 0}, true},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	exec := &sandbox.Starlark{}
	for _, task := range tasks {
		for _, kind := range JudgeKinds {
			d, err := JudgeDemonstration(context.Background(), task, kind, exec, rng, string(tmpl))
			if err != nil {
				t.Fatalf("%s on %q: %v", kind, task.Prompt, err)
			}
			w := want[kind]
			if len(d.Verdicts) != len(w.steps) {
				t.Fatalf("%s: %d steps %v; want %v", kind, len(d.Verdicts), d.Verdicts, w.steps)
			}
			for k := range w.steps {
				if d.Verdicts[k] != w.steps[k] {
					t.Errorf("%s on %q: verdicts %v; want %v", kind, task.Prompt, d.Verdicts, w.steps)
					break
				}
			}
			if (d.Hint != "") != w.hint {
				t.Errorf("%s on %q: hint %q; want one: %v", kind, task.Prompt, d.Hint, w.hint)
			}
			shown := make([]int, len(d.Verdicts))
			for k := range shown {
				shown[k] = k + 1
			}
			pr := ParsePRM(d.Reply, len(d.Verdicts), shown, task.Answer, 8*128)
			if !pr.OK || pr.Hint != d.Hint {
				t.Errorf("%s: the reply %q reads back as %+v", kind, d.Reply, pr)
			}
			for k, v := range pr.Verdicts {
				if math.IsNaN(v) || v != d.Verdicts[k] {
					t.Errorf("%s: the reply's verdicts %v; want %v", kind, pr.Verdicts, d.Verdicts)
					break
				}
			}
			if !strings.Contains(d.Prompt, task.Prompt) || !strings.Contains(d.Prompt, "Step 1:") {
				t.Errorf("%s: the prompt does not hold the problem and the steps:\n%s", kind, d.Prompt)
			}
		}
	}
	d, _ := JudgeDemonstration(context.Background(), tasks[0], "computed_else", exec, rng, string(tmpl))
	t.Logf("a demonstration:\n%s\n---\n%s", d.Prompt, d.Reply)
}
