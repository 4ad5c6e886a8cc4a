// Package record is the one mapping between the controller's events and the store's records:
// a run is kept by recording the events it emits (Recorder), and a stored run is replayed as the
// events that would have produced it (Replay), which the workbench shows as it shows a live run.
package record

import (
	"encoding/json"
	"fmt"
	"sort"

	"agentrl/engine/event"
	"agentrl/store"
)

// Recorder keeps what the store keeps of a run's events: a step's metrics (event.StepMetrics),
// its trajectories (event.Trajectory: a training step's, and an evaluation's, marked Eval, which
// the store keeps apart), evaluations (event.Eval with its per-task counts) and phase times
// (event.Phase, summed per step and written by Phases). Which trajectories are kept is the
// caller's choice: the controller records an evaluation's only with eval.store_trajectories on.
// A nil Recorder, a run without a store, keeps nothing.
type Recorder struct {
	st        *store.Store
	run       string
	groupSize int // the samples per task: a stored trajectory's index within its step's tasks
	phaseStep int
	phases    map[string]float64
}

// New records run's events in st; nil when st is nil.
func New(st *store.Store, run string, groupSize int) *Recorder {
	if st == nil {
		return nil
	}
	return &Recorder{st: st, run: run, groupSize: groupSize}
}

// Observe gathers what needs no write yet: phase times, summed per step until Phases.
func (r *Recorder) Observe(e event.Event) {
	if r == nil {
		return
	}
	if p, ok := e.(event.Phase); ok {
		if r.phases == nil || r.phaseStep != p.Step {
			r.phases, r.phaseStep = map[string]float64{}, p.Step
		}
		r.phases[p.Phase] += p.Seconds
	}
}

// Record writes evs: each step's metrics and evaluation as it comes, the trajectories among evs
// in one transaction after them. A training trajectory is kept as sample Group×group size +
// Sample of its task; an evaluation's as Group×n + Sample, n the samples per task among evs
// (one evaluation's trajectories are recorded together), so that tasks sharing an id stay apart.
func (r *Recorder) Record(evs ...event.Event) error {
	if r == nil {
		return nil
	}
	evalSamples := 0
	for _, e := range evs {
		if t, ok := e.(event.Trajectory); ok && t.Eval {
			evalSamples = max(evalSamples, t.Sample+1)
		}
	}
	var recs []store.TrajectoryRecord
	for _, e := range evs {
		switch e := e.(type) {
		case event.StepMetrics:
			if err := r.st.PutMetrics(r.run, e.Step, storedMetrics(e.Metrics)); err != nil {
				return err
			}
		case event.Eval:
			if err := r.st.PutEval(r.run, store.Eval{Step: e.Step, PassAtK: e.PassAtK, ByLevel: e.ByLevel, BySet: e.BySet, Counts: e.Counts, Tasks: e.Tasks, Validation: e.Validation}); err != nil {
				return err
			}
		case event.Trajectory:
			data, _ := json.Marshal(e)
			n := r.groupSize
			if e.Eval {
				n = evalSamples
			}
			recs = append(recs, store.TrajectoryRecord{Step: e.Step, TaskID: e.TaskID, Sample: e.Group*n + e.Sample,
				Reward: e.Reward.Total, Correct: e.Correct, Hinted: e.Hint != "", Eval: e.Eval, Data: data})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return r.st.PutTrajectories(r.run, recs)
}

// Phases writes the phase times of step gathered so far (nothing when none were).
func (r *Recorder) Phases(step int) error {
	if r == nil || r.phaseStep != step || len(r.phases) == 0 {
		return nil
	}
	return r.st.PutPhases(r.run, step, r.phases)
}

// Replay rebuilds a stored run's events for the read-only view: RunStart from the run,
// then step by step its phase times, metrics, training trajectories, the evaluation's
// trajectories (marked Eval) and the evaluation, and the checkpoint (the run's best step flagged
// Best), and RunEnd when the run has an end status. Ledgers and alarms are not stored and so
// not shown.
func Replay(st *store.Store, runID string) ([]event.Event, error) {
	run, err := st.GetRun(runID)
	if err != nil {
		return nil, err
	}
	metrics, err := st.Metrics(runID)
	if err != nil {
		return nil, err
	}
	evals, err := st.Evals(runID)
	if err != nil {
		return nil, err
	}
	cps, err := st.Checkpoints(runID)
	if err != nil {
		return nil, err
	}
	trajs, err := st.Trajectories(runID, -1)
	if err != nil {
		return nil, err
	}
	evalTrajs, err := st.EvalTrajectories(runID, -1)
	if err != nil {
		return nil, err
	}
	phases, err := st.Phases(runID)
	if err != nil {
		return nil, err
	}
	type stepEvents struct {
		phases  map[string]float64
		metrics map[event.Metric]float64
		trajs   []event.Event
		evTrajs []event.Event // the evaluation's
		eval    *store.Eval
		ckpt    *store.Manifest
	}
	steps := map[int]*stepEvents{}
	at := func(s int) *stepEvents {
		if steps[s] == nil {
			steps[s] = &stepEvents{}
		}
		return steps[s]
	}
	for s, m := range metrics {
		at(s).metrics = eventMetrics(m)
	}
	for s, p := range phases {
		at(s).phases = p
	}
	for i := range evals {
		at(evals[i].Step).eval = &evals[i]
	}
	for i := range cps {
		at(cps[i].Step).ckpt = &cps[i]
	}
	for _, r := range trajs {
		at(r.Step).trajs = append(at(r.Step).trajs, Trajectory(r))
	}
	for _, r := range evalTrajs {
		at(r.Step).evTrajs = append(at(r.Step).evTrajs, Trajectory(r))
	}
	order := make([]int, 0, len(steps))
	for s := range steps {
		order = append(order, s)
	}
	sort.Ints(order)

	start := event.RunStart{RunID: run.ID, Name: run.Name, Recipe: run.Recipe, TotalSteps: run.TotalSteps}
	var rc struct { // the stored recipe's reward weights (an SFT run's spec has none)
		Reward *event.RewardWeights `json:"reward"`
	}
	if json.Unmarshal([]byte(run.RecipeYAML), &rc) == nil {
		start.Reward = rc.Reward
	}
	if run.Kind == store.KindSFT {
		start.Kind = store.KindSFT
	}
	if run.Kind == store.KindEval { // as the evaluation run announced itself
		start.Evaluates = run.Evaluated + ", " + run.EvalSet
	}
	evs := []event.Event{start}
	var first *store.Eval // the first evaluation with per-task counts, as the controller compares
	for _, s := range order {
		se := steps[s]
		for _, name := range event.Phases() {
			if sec, ok := se.phases[name]; ok {
				evs = append(evs, event.Phase{Step: s, Phase: name, Seconds: sec})
			}
		}
		if se.metrics != nil {
			evs = append(evs, event.StepMetrics{Step: s, Metrics: se.metrics})
		}
		evs = append(evs, se.trajs...)
		evs = append(evs, se.evTrajs...)
		if se.eval != nil {
			ev := event.Eval{Step: s, PassAtK: se.eval.PassAtK, ByLevel: se.eval.ByLevel, BySet: se.eval.BySet, Counts: se.eval.Counts, Tasks: se.eval.Tasks, Best: run.BestStep > 0 && s == run.BestStep}
			switch {
			case se.eval.Counts == nil:
			case first == nil:
				first = se.eval
			case first.Tasks == se.eval.Tasks:
				ev.Since, ev.Change = first.Step, event.ChangeSince(first.Counts, se.eval.Counts, ev.Ks())
			}
			evs = append(evs, ev)
		}
		if c := se.ckpt; c != nil {
			var weights int64
			for _, t := range c.Tensors {
				weights += t.Bytes
			}
			evs = append(evs, event.Checkpoint{Step: s, ID: fmt.Sprintf("%s/%d", runID, s), Bytes: c.Bytes, WeightBytes: weights, Metrics: c.Metrics,
				Best: run.BestStep > 0 && s == run.BestStep})
		}
	}
	switch run.Status {
	case "", "running":
	default:
		end := event.RunEnd{Status: run.Status, Reason: run.StopReason, BestStep: run.BestStep, Marked: run.BestPinned,
			Detail: run.StopDetail, Evaluations: len(evals), EvalOnly: run.Kind == store.KindEval, SFT: run.Kind == store.KindSFT}
		for _, s := range order {
			if steps[s].metrics != nil {
				end.Step = s
			}
		}
		if n := len(cps); n > 0 {
			end.Checkpoint = cps[n-1].Step
		}
		evs = append(evs, end)
	}
	return evs, nil
}

// storedMetrics is a step's metrics as the store keeps them, by their names as strings; eventMetrics
// is the way back. They are the one place the event's typed names (event.Metric) meet the store's.
func storedMetrics(m map[event.Metric]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

func eventMetrics(m map[string]float64) map[event.Metric]float64 {
	if m == nil {
		return nil
	}
	out := make(map[event.Metric]float64, len(m))
	for k, v := range m {
		out[event.Metric(k)] = v
	}
	return out
}

// Trajectory decodes a stored trajectory (the engine's JSON of event.Trajectory), falling back
// to the record's index fields when its data does not decode.
func Trajectory(r store.TrajectoryRecord) event.Trajectory {
	var t event.Trajectory
	if len(r.Data) > 0 && json.Unmarshal(r.Data, &t) == nil {
		return t
	}
	t = event.Trajectory{Step: r.Step, TaskID: r.TaskID, Sample: r.Sample, Correct: r.Correct, Eval: r.Eval}
	t.Reward.Total = r.Reward
	if r.Hinted {
		t.Hint = "(hinted; the bridge thought was not stored)"
	}
	return t
}
