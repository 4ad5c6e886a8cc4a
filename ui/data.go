package ui

import (
	"sort"

	"agentrl/engine/event"
)

// change says which parts of the run data an event touched, so panes redraw only when needed.
type change uint16

const (
	chRun change = 1 << iota
	chPhase
	chTraj
	chMetrics
	chEval
	chCkpt
	chLedger
	chAlarm
	chError
	chControl // paused, stopping, best override: the user's own commands
	chEngines // rollout.engines' state
)

// alarm is one kind of correctness alarm as listed until acknowledged; repeats of the same kind
// while unacknowledged are counted rather than listed again.
type alarm struct {
	event.Alarm
	Count int
	Acked bool
}

// ledgerSample is one point of the memory history.
type ledgerSample struct {
	Ledger, Device, Util float64 // fractions of the budget / device total; util 0..1
}

// runData is everything the panes show, built from the event stream by apply. It is owned by
// the root model and read by the panes; only apply and the root's command results change it.
type runData struct {
	start   event.RunStart
	started bool
	end     *event.RunEnd

	step       int                // the highest step seen
	phaseSecs  map[string]float64 // the last duration of each phase
	stepDone   map[string]bool    // phases finished in the step now running
	stepSecs   map[int]float64    // seconds per step, summed from its phases
	progress   *event.Progress    // within the phase now running, nil when none
	evalLive   *event.Progress    // the evaluation in progress (pass@k so far), nil when none
	runETA     float64            // the engine's latest estimate of the seconds left in the run; 0 none
	etaAtLeast bool               // runETA is a lower bound

	metrics    []event.StepMetrics
	metricStep map[int]map[event.Metric]float64
	trajs      []event.Trajectory
	hinted     []int          // indices into trajs of hinted trajectories
	perStep    map[int][2]int // step → {training trajectories, hinted}
	evalTrajs  int            // evaluation trajectories among trajs
	evals      []event.Eval
	// gens is the latest generation phase of each kind (rollout, eval), how it used the slots
	gens       map[string]event.Generation
	ckpts      []event.Checkpoint
	ledger     *event.Ledger
	ledgerHist []ledgerSample
	engines    *event.Engines // the latest state of rollout.engines, nil without them
	alarms     []alarm
	errs       []string

	// the user's commands as confirmed by the controller; stopping also when the run announced a
	// stop (stopMsg: what it will do)
	paused, stopping bool
	stopMsg          string
	bestOverride     int // step marked best by the user, 0 when none

	// the workbench's own process memory, sampled off the Update path (CPU backend view)
	procRSS  uint64
	procHist []float64
}

// histLen bounds the memory history.
const histLen = 240

func newRunData() *runData {
	return &runData{phaseSecs: map[string]float64{}, stepDone: map[string]bool{}, stepSecs: map[int]float64{},
		metricStep: map[int]map[event.Metric]float64{}, perStep: map[int][2]int{}, gens: map[string]event.Generation{}}
}

// apply folds one event into the data and says what changed.
func (d *runData) apply(e event.Event) change {
	switch v := e.(type) {
	case event.RunStart:
		d.start, d.started = v, true
		if v.MarkedBest > 0 {
			d.bestOverride = v.MarkedBest
		}
		return chRun
	case event.Phase:
		if v.Step > d.step {
			d.step, d.stepDone = v.Step, map[string]bool{}
		}
		if v.Step == d.step {
			d.stepDone[v.Phase] = true
		}
		d.phaseSecs[v.Phase] = v.Seconds
		d.stepSecs[v.Step] += v.Seconds
		if d.progress != nil && d.progress.Phase == v.Phase {
			d.progress = nil
		}
		if v.Phase == event.PhaseEval {
			d.evalLive = nil
		}
		return chPhase
	case event.Progress:
		if v.Step > d.step {
			d.step, d.stepDone = v.Step, map[string]bool{}
		}
		p := v
		d.progress = &p
		if v.Phase == event.PhaseEval && d.start.Kind != "sft" { // an SFT run's is its held-out loss: no pass@k
			d.evalLive = &p
		}
		if v.RunETA > 0 {
			d.runETA, d.etaAtLeast = v.RunETA, v.RunETAAtLeast
		}
		if v.Phase == event.PhaseEval {
			return chPhase | chEval
		}
		return chPhase
	case event.Stopping:
		d.stopping, d.stopMsg = true, v.Message
		return chControl
	case event.Trajectory:
		d.trajs = append(d.trajs, v)
		if v.Eval {
			d.evalTrajs++
			return chTraj
		}
		c := d.perStep[v.Step]
		c[0]++
		if v.Hint != "" {
			c[1]++
			d.hinted = append(d.hinted, len(d.trajs)-1)
		}
		d.perStep[v.Step] = c
		return chTraj
	case event.StepMetrics:
		d.metrics = append(d.metrics, v)
		d.metricStep[v.Step] = v.Metrics
		if v.Step > d.step {
			d.step, d.stepDone = v.Step, map[string]bool{}
		}
		return chMetrics
	case event.Generation:
		d.gens[v.Phase] = v
		return chMetrics
	case event.Eval:
		d.evals = append(d.evals, v)
		return chEval
	case event.Checkpoint:
		for i := range d.ckpts {
			if d.ckpts[i].Step == v.Step {
				d.ckpts[i] = v
				return chCkpt
			}
		}
		d.ckpts = append(d.ckpts, v)
		sort.Slice(d.ckpts, func(i, j int) bool { return d.ckpts[i].Step < d.ckpts[j].Step })
		return chCkpt
	case event.Ledger:
		l := v
		d.ledger = &l
		var s ledgerSample
		var sum int64
		for _, b := range v.Components {
			sum += b
		}
		if v.Budget > 0 {
			s.Ledger = float64(sum) / float64(v.Budget)
		}
		if v.DeviceTotal > 0 {
			s.Device = float64(v.DeviceUsed) / float64(v.DeviceTotal)
		}
		s.Util = float64(v.UtilPct) / 100
		d.ledgerHist = append(d.ledgerHist, s)
		if len(d.ledgerHist) > histLen {
			d.ledgerHist = d.ledgerHist[len(d.ledgerHist)-histLen:]
		}
		return chLedger
	case event.Engines:
		d.engines = &v
		return chEngines
	case event.Alarm:
		for i := range d.alarms {
			if a := &d.alarms[i]; a.Kind == v.Kind && !a.Acked {
				a.Alarm = v
				a.Count++
				return chAlarm
			}
		}
		d.alarms = append(d.alarms, alarm{Alarm: v, Count: 1})
		return chAlarm
	case event.RunEnd:
		end := v
		d.end, d.progress, d.evalLive, d.paused, d.stopping = &end, nil, nil, false, false
		if v.Marked {
			d.bestOverride = v.BestStep
		}
		return chRun | chPhase
	case event.Error:
		d.errs = append(d.errs, v.Message)
		return chError
	}
	return 0
}

// sampleProc records one process-memory sample.
func (d *runData) sampleProc(rss uint64) {
	d.procRSS = rss
	d.procHist = append(d.procHist, float64(rss))
	if len(d.procHist) > histLen {
		d.procHist = d.procHist[len(d.procHist)-histLen:]
	}
}

// unacked returns the alarms not yet acknowledged, oldest first.
func (d *runData) unacked() []*alarm {
	var out []*alarm
	for i := range d.alarms {
		if !d.alarms[i].Acked {
			out = append(out, &d.alarms[i])
		}
	}
	return out
}

// ack acknowledges the oldest unacknowledged alarm, or all of them; it reports whether any was.
func (d *runData) ack(all bool) bool {
	any := false
	for i := range d.alarms {
		if !d.alarms[i].Acked {
			d.alarms[i].Acked, any = true, true
			if !all {
				break
			}
		}
	}
	return any
}

// currentPhase guesses the phase in progress: the one with progress, else the first of the step's
// phases not finished yet ("" when the run has ended or not started).
func (d *runData) currentPhase() string {
	if d.end != nil || !d.started {
		return ""
	}
	if d.progress != nil {
		return d.progress.Phase
	}
	if d.start.Kind == "sft" { // training, then the step's end (held-out loss, record, checkpoint)
		if d.stepDone[event.PhaseTrain] && !d.stepDone[event.PhaseSave] {
			return event.PhaseSave
		}
		return event.PhaseTrain
	}
	for _, p := range d.phases() {
		if !d.stepDone[p] {
			if _, ever := d.phaseSecs[p]; ever || p == event.PhaseRollout {
				return p
			}
		}
	}
	return ""
}

// stepsDone counts finished steps: steps whose save phase (the last of a step) was reported.
func (d *runData) stepsDone() int {
	n := d.step
	if !d.stepDone[event.PhaseSave] {
		n--
	}
	return max(n, 0)
}

// runLeft is the seconds left in the run as shown: the engine's latest estimate (atLeast: a lower
// bound, no training step timed yet), else eta's; -1 when unknown or the run has ended.
func (d *runData) runLeft() (secs float64, atLeast bool) {
	if d.end != nil {
		return -1, false
	}
	if d.runETA > 0 {
		return d.runETA, d.etaAtLeast
	}
	return d.eta(), false
}

// phaseLeft is the phase in progress and the seconds left in it, from its progress ("" when none).
func (d *runData) phaseLeft() (string, float64) {
	if p := d.progress; p != nil && p.ETA > 0 && d.end == nil {
		return p.Phase, p.ETA
	}
	return "", -1
}

// stopNote is what the run does about the stop asked for.
func (d *runData) stopNote() string {
	if d.stopMsg != "" {
		return d.stopMsg
	}
	return "stopping"
}

// eta estimates the seconds left from the mean duration of the last five finished steps
// (-1 when unknown).
func (d *runData) eta() float64 {
	done := d.stepsDone()
	if d.end != nil || d.start.TotalSteps == 0 || done == 0 {
		return -1
	}
	var sum float64
	n := 0
	for s := done; s >= 1 && n < 5; s-- {
		if secs, ok := d.stepSecs[s]; ok {
			sum += secs
			n++
		}
	}
	if n == 0 {
		return -1
	}
	return sum / float64(n) * float64(max(d.start.TotalSteps-done, 0))
}

// lastMetric returns the latest value of a step metric.
func (d *runData) lastMetric(name event.Metric) (float64, bool) {
	for i := len(d.metrics) - 1; i >= 0; i-- {
		if v, ok := d.metrics[i].Metrics[name]; ok {
			return v, true
		}
	}
	return 0, false
}

// evalAt returns the evaluation of a step.
func (d *runData) evalAt(step int) (event.Eval, bool) {
	for i := len(d.evals) - 1; i >= 0; i-- {
		if d.evals[i].Step == step {
			return d.evals[i], true
		}
	}
	return event.Eval{}, false
}

// ks returns every k evaluated, increasing.
func (d *runData) ks() []int {
	seen := map[int]bool{}
	var ks []int
	for _, e := range d.evals {
		for k := range e.PassAtK {
			if !seen[k] {
				seen[k] = true
				ks = append(ks, k)
			}
		}
	}
	sort.Ints(ks)
	return ks
}

// bestStep is the checkpoint step shown as best: the user's override, else the latest checkpoint
// the controller flagged best, else the run end's best step, else the checkpoint with the highest
// pass@(smallest k); 0 when there is none.
func (d *runData) bestStep() (step int, manual bool) {
	if d.bestOverride > 0 {
		return d.bestOverride, true
	}
	for i := len(d.ckpts) - 1; i >= 0; i-- {
		if d.ckpts[i].Best {
			return d.ckpts[i].Step, false
		}
	}
	if d.end != nil && d.end.BestStep > 0 {
		return d.end.BestStep, false
	}
	ks := d.ks()
	best, bestV := 0, -1.0
	for _, c := range d.ckpts {
		if e, ok := d.evalAt(c.Step); ok && len(ks) > 0 {
			if v := e.PassAtK[ks[0]]; v > bestV {
				best, bestV = c.Step, v
			}
		}
	}
	return best, false
}

// phases are the phases a step of this run shows: event.Phases, less the model PRM's until the
// run has had one (prm.kind model).
func (d *runData) phases() []string {
	var out []string
	if d.start.Kind == "sft" { // a supervised run trains, evaluates its held-out share and saves
		for _, p := range []string{event.PhaseTrain, event.PhaseEval, event.PhaseSave} {
			if _, ever := d.phaseSecs[p]; ever || p == event.PhaseTrain {
				out = append(out, p)
			}
		}
		return out
	}
	for _, p := range event.Phases() {
		if _, ever := d.phaseSecs[p]; p != event.PhasePRM || ever || d.progress != nil && d.progress.Phase == p {
			out = append(out, p)
		}
	}
	return out
}
