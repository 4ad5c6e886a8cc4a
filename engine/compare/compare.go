// Package compare sets stored runs' held-out evaluations side by side, the side job behind
// `agentrl-tui compare`: two runs (Runs), two recipes over several seeds (Seeds), runs kept in
// several stores (Stores), and a comparison on one kind of task only (GroupSource, of a
// synthetic.TaskGroup). It reads runs through a Source and never imports the engine that made
// them.
package compare

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"agentrl/envs"
	"agentrl/store"
)

// Comparison sets two runs' evaluations of the same held-out tasks side by side. Step is the
// step of A's evaluation and StepB of B's: the same step for two training runs; an evaluation
// run's (agentrl-tui eval) is the step of its one evaluation.
type Comparison struct {
	A     string `json:"a"`
	B     string `json:"b"`
	Step  int    `json:"step"`
	StepB int    `json:"step_b"`
	Tasks int    `json:"tasks"`
	Rows  []Row  `json:"pass_at_k"`
	// Graders are what judged each run's answers (store.Run.Grader, name@version); Warning says
	// when they differ, since pass@k under two graders is not one measure.
	Graders [2]string `json:"graders"`
	Warning string    `json:"warning,omitempty"`
}

// graderOf is a run's recorded grader; runs from before graders were recorded used the verifier.
func graderOf(r store.Run) string {
	if r.Grader == "" {
		return "verifier (not recorded)"
	}
	return r.Grader
}

// sameGrader reports whether two recorded graders are the same function: an unrecorded grader is
// the verifier of its day, the same name as any verifier.
func sameGrader(a, b string) bool {
	name := func(g string) string {
		n, _, _ := strings.Cut(g, "@")
		n, _, _ = strings.Cut(n, " ")
		return n
	}
	return a == b || name(a) == name(b) && name(a) == "verifier"
}

// Row is one k: each run's pass@k and A − B with its paired standard error.
type Row struct {
	K    int     `json:"k"`
	A    float64 `json:"a"`
	B    float64 `json:"b"`
	Diff float64 `json:"a_minus_b"`
	SE   float64 `json:"se"`
}

// Runs compares runs a and b of st at evaluation step (negative: the last step both evaluated):
// pass@k of each and A − B with its paired standard error (per task, A's pass@k minus B's; their
// standard deviation over √tasks). Runs evaluated on other tasks are refused.
//
// An evaluation run (store.KindEval) has one evaluation, and it is compared whatever its step:
// against a training run's evaluation at step, or (step negative) at the evaluation run's own
// step when the training run evaluated that step, else at the training run's last evaluation.
func Runs(st Source, a, b string, step int) (*Comparison, error) {
	c, err := runsAt(st, a, b, step)
	if err != nil {
		return nil, err
	}
	for i, id := range []string{a, b} {
		run, err := st.GetRun(id)
		if err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		c.Graders[i] = graderOf(run)
	}
	if !sameGrader(c.Graders[0], c.Graders[1]) {
		c.Warning = fmt.Sprintf("the runs were graded differently (A: %s; B: %s): their pass@k are not one measure; `agentrl-tui regrade --grader NAME` judges a run's trajectories with the other's grader", c.Graders[0], c.Graders[1])
	}
	return c, nil
}

func runsAt(st Source, a, b string, step int) (*Comparison, error) {
	ids := [2]string{a, b}
	evals := [2]map[int]store.Eval{}
	evalOnly := [2]bool{}
	uncounted := false // a run has evaluations, none with per-task counts
	for i, id := range ids {
		run, err := st.GetRun(id)
		if err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		evalOnly[i] = run.Kind == store.KindEval
		es, err := st.Evals(id)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return nil, fmt.Errorf("compare: run %s has no evaluation: a run evaluates its held-out tasks only with eval.every: N (after every N-th step) or eval.at_start: true (before step 1); run its recipe again with them, e.g. --set eval.at_start=true --set eval.every=5", id)
		}
		evals[i] = map[int]store.Eval{}
		for _, e := range es {
			if e.Counts != nil {
				evals[i][e.Step] = e
			}
		}
		uncounted = uncounted || len(evals[i]) == 0
	}
	if evalOnly[0] || evalOnly[1] {
		return againstEvalRun(ids, evals, evalOnly, step)
	}
	if step < 0 {
		for s := range evals[0] {
			if _, ok := evals[1][s]; ok && s > step {
				step = s
			}
		}
		if step < 0 && uncounted {
			return nil, fmt.Errorf("compare: runs %s and %s have no evaluation step in common with per-task counts (runs made before this version store none)", a, b)
		}
		if step < 0 {
			return nil, fmt.Errorf("compare: runs %s and %s have no evaluation step in common (%s: steps %s; %s: steps %s); evaluate both at the same steps (the same eval.every and eval.at_start)", a, b, a, stepList(evals[0]), b, stepList(evals[1]))
		}
	}
	for i, id := range ids {
		if _, ok := evals[i][step]; !ok {
			return nil, fmt.Errorf("compare: run %s has no evaluation with per-task counts at step %d; leave out --step for the last step both have", id, step)
		}
	}
	return paired(a, b, evals[0][step], evals[1][step])
}

// againstEvalRun compares when one run or both are evaluation runs (see Runs): an evaluation
// run's one evaluation, the training run's at step or the step Runs picks.
func againstEvalRun(ids [2]string, evals [2]map[int]store.Eval, evalOnly [2]bool, step int) (*Comparison, error) {
	var chosen [2]store.Eval
	for i, id := range ids {
		if evalOnly[i] {
			if len(evals[i]) != 1 {
				return nil, fmt.Errorf("compare: evaluation run %s has %d evaluations with per-task counts; want 1", id, len(evals[i]))
			}
			for _, e := range evals[i] {
				chosen[i] = e
			}
		}
	}
	for i, id := range ids {
		if evalOnly[i] {
			continue
		}
		if len(evals[i]) == 0 {
			return nil, fmt.Errorf("compare: run %s has no evaluation with per-task counts (runs made before this version store none)", id)
		}
		other := chosen[1-i]
		s := step
		if s < 0 {
			if _, ok := evals[i][other.Step]; ok {
				s = other.Step
			} else {
				for t := range evals[i] {
					s = max(s, t)
				}
			}
		}
		e, ok := evals[i][s]
		if !ok {
			return nil, fmt.Errorf("compare: run %s has no evaluation with per-task counts at step %d (its evaluations: steps %s); give --step one of them", id, s, stepList(evals[i]))
		}
		chosen[i] = e
	}
	return paired(ids[0], ids[1], chosen[0], chosen[1])
}

// paired compares evaluation ea of run a with eb of run b, task by task.
func paired(a, b string, ea, eb store.Eval) (*Comparison, error) {
	if ea.Tasks != eb.Tasks || len(ea.Counts) != len(eb.Counts) {
		return nil, fmt.Errorf("compare: runs %s and %s evaluated different held-out tasks (%d and %d of them); compare runs with the same env.tasks and eval.heldout_tasks", a, b, len(ea.Counts), len(eb.Counts))
	}
	c := &Comparison{A: a, B: b, Step: ea.Step, StepB: eb.Step, Tasks: len(ea.Counts)}
	for k, pa := range ea.PassAtK {
		pb, ok := eb.PassAtK[k]
		if !ok {
			continue
		}
		d, se, err := envs.PassAtKChange(eb.Counts, ea.Counts, k)
		if err != nil {
			return nil, fmt.Errorf("compare: pass@%d: %w", k, err)
		}
		c.Rows = append(c.Rows, Row{k, pa, pb, d, se})
	}
	sort.Slice(c.Rows, func(i, j int) bool { return c.Rows[i].K < c.Rows[j].K })
	return c, nil
}

// stepList is the evaluated steps of evals, in order: "0, 5, 10".
func stepList(evals map[int]store.Eval) string {
	steps := make([]int, 0, len(evals))
	for s := range evals {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = strconv.Itoa(s)
	}
	return strings.Join(out, ", ")
}
