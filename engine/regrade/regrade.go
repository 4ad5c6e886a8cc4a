// Package regrade judges a stored run's trajectories again with a grader (a verifier change,
// another experiment's grader) and reports the verdicts that change.
package regrade

import (
	"encoding/json"
	"fmt"

	"agentrl/engine/event"
	"agentrl/engine/play"
	"agentrl/envs"
	"agentrl/envs/dataset"
	"agentrl/envs/grade"
	"agentrl/envs/mathverify"
	"agentrl/envs/retool"
	"agentrl/recipes"
	"agentrl/store"
)

// Changed is a stored trajectory whose verdict a grader gives differently from the run's.
type Changed struct {
	Step    int    `json:"step"`
	TaskID  string `json:"task_id"`
	Sample  int    `json:"sample"`
	Eval    bool   `json:"eval,omitempty"`
	Truth   string `json:"truth"`
	Answer  string `json:"answer"` // the final answer as the run's parser read it ("" for none)
	Stored  bool   `json:"stored"` // the verdict the run recorded
	Now     bool   `json:"now"`    // the grader's verdict
	Details string `json:"details"`
}

// Run judges every stored trajectory of a run again, training and evaluation ones, with the
// named grader (envs/grade; "" the run's own reward.grader), and returns how many it judged and
// those whose verdict changed: the effect of a verifier or grader change on a run's rewards and
// pass@k, trajectory by trajectory. The verifier judges the final turn's answer as the run's
// parser read it (retool.ParseAs with the run's layout), as the loop does; another grader the
// whole final turn. The task's truth comes from the run's own task sets (dataset.TaskSets).
func Run(st *store.Store, runID, grader string) (int, []Changed, error) {
	run, err := st.GetRun(runID)
	if err != nil {
		return 0, nil, err
	}
	var r recipes.Recipe
	if err := json.Unmarshal([]byte(run.RecipeYAML), &r); err != nil {
		return 0, nil, fmt.Errorf("regrade: the stored recipe of run %s is unreadable: %w", runID, err)
	}
	if grader == "" {
		grader = r.Reward.Grader
	}
	opts := mathverify.Options{LastNumberFallback: r.Reward.LastNumberFallback}
	g, err := grade.New(grader, opts)
	if err != nil {
		return 0, nil, fmt.Errorf("regrade: %w", err)
	}
	train, validation, heldout, err := dataset.TaskSets(&r, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("regrade: the tasks of run %s: %w", runID, err)
	}
	truth := map[string]string{}
	for _, set := range [][]envs.Task{train, validation, heldout} {
		for _, t := range set {
			truth[t.ID] = t.Answer
		}
	}
	f := play.FormatOf(&r)
	var recs []store.TrajectoryRecord
	for _, read := range []func(string, int) ([]store.TrajectoryRecord, error){st.Trajectories, st.EvalTrajectories} {
		got, err := read(runID, -1)
		if err != nil {
			return 0, nil, err
		}
		recs = append(recs, got...)
	}
	n := 0
	var changed []Changed
	for _, rec := range recs {
		var tr event.Trajectory
		if err := json.Unmarshal(rec.Data, &tr); err != nil {
			return n, changed, fmt.Errorf("regrade: run %s step %d task %s: %w", runID, rec.Step, rec.TaskID, err)
		}
		ans, ok := truth[rec.TaskID]
		if !ok || len(tr.Turns) == 0 || tr.Agent != nil {
			continue
		}
		last := tr.Turns[len(tr.Turns)-1].Assistant
		a := retool.ParseAs(f.Layout, last, f.Names)
		var now bool
		details := ""
		if g.Name() == grade.Default {
			now = a.HasAnswer && mathverify.Equal(a.Answer, ans, opts)
			details = "normalized " + mathverify.Normalize(a.Answer) + " / " + mathverify.Normalize(ans)
		} else {
			v := g.Grade(last, ans, 0)
			now, details = v.Correct, "extracted "+v.Extracted
		}
		n++
		if now != rec.Correct {
			changed = append(changed, Changed{Step: rec.Step, TaskID: rec.TaskID, Sample: rec.Sample, Eval: rec.Eval, Truth: ans,
				Answer: a.Answer, Stored: rec.Correct, Now: now, Details: details})
		}
	}
	return n, changed, nil
}
