// Package eta estimates what is left of a run: it times finished training steps and evaluations
// and the pace of generation, and projects them over the steps and evaluations still to come.
package eta

import (
	"sync"

	"agentrl/engine/event"
)

// Clock times a run to estimate what is left of it: finished training steps (their evaluation
// left out), the last evaluation, and the pace of generation, per trajectory. Its zero value is
// ready to use; its methods may be called from any goroutine.
type Clock struct {
	mu       sync.Mutex
	steps    []float64 // seconds of each finished training step without its evaluation
	evalSecs float64   // the last finished evaluation's seconds; 0 before the first
	perTraj  float64   // seconds per trajectory in the latest rollout or evaluation
}

// Shape is what a run still has to do, from the recipe.
type Shape struct {
	MaxSteps, EvalEvery  int
	StepTrajs, EvalTrajs int  // trajectories per training step, per evaluation
	EvalOnly             bool // an evaluation-only run: its one evaluation is all there is
}

// evalsIn counts the evaluations of steps in (from, to].
func (s Shape) evalsIn(from, to int) int {
	if s.EvalEvery <= 0 || to <= from {
		return 0
	}
	return to/s.EvalEvery - max(from, 0)/s.EvalEvery
}

// StepDone records a finished training step's seconds (its evaluation left out).
func (k *Clock) StepDone(secs float64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.steps = append(k.steps, secs)
}

// EvalDone records a finished evaluation's seconds.
func (k *Clock) EvalDone(secs float64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.evalSecs = secs
}

// Pace records the pace of the generation in progress: elapsed seconds for done trajectories.
func (k *Clock) Pace(elapsed float64, done int) {
	if done <= 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.perTraj = elapsed / float64(done)
}

// Left estimates the seconds left in the run from inside step's phase (rollout or eval), which
// has phaseLeft seconds to go and projects to phaseTotal seconds in all. A training step is the
// mean of the last five timed; before the first is timed only its rollout is counted, at the
// generation pace, and atLeast says the estimate is a lower bound. An evaluation is the last
// one timed, else the one in progress, else the generation pace.
func (k *Clock) Left(s Shape, step int, phase string, phaseLeft, phaseTotal float64) (secs float64, atLeast bool) {
	if s.EvalOnly {
		return phaseLeft, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var stepEst float64
	if n := len(k.steps); n > 0 {
		last := k.steps[max(n-5, 0):]
		for _, v := range last {
			stepEst += v
		}
		stepEst /= float64(len(last))
	} else {
		stepEst, atLeast = float64(s.StepTrajs)*k.perTraj, true
	}
	evalEst := k.evalSecs
	switch {
	case evalEst > 0:
	case phase == event.PhaseEval:
		evalEst = phaseTotal
	default:
		evalEst = float64(s.EvalTrajs) * k.perTraj
	}
	secs = phaseLeft
	futureSteps := max(s.MaxSteps-step, 0)
	futureEvals := s.evalsIn(step, s.MaxSteps)
	if phase == event.PhaseRollout {
		secs += max(stepEst-phaseTotal, 0) // the rest of this step
		futureEvals = s.evalsIn(step-1, s.MaxSteps)
	}
	secs += float64(futureSteps)*stepEst + float64(futureEvals)*evalEst
	return secs, atLeast
}
