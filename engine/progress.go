package engine

import (
	"sync"
	"time"

	"agentrl/engine/batch"
	"agentrl/engine/eta"
	"agentrl/engine/event"
	"agentrl/envs"
)

// tracker reports a generation phase's progress as its trajectories finish: one event.Progress
// each, with the time left in the phase and the run; for an evaluation, the trajectory itself
// (marked Eval) and pass@k over the held-out tasks whose samples have all finished.
type tracker struct {
	c     *Controller
	step  int
	phase string
	total int
	start time.Time

	mu   sync.Mutex // orders the events: done counts up on the stream
	done int
	// evaluation only: per task (samples finished, correct), the samples each task needs, the
	// tasks complete and the sum of their pass@k
	counts    [][2]int
	need      int
	tasksDone int
	sums      map[int]float64
}

func (c *Controller) newTracker(step int, phase string, trajs []*batch.Trajectory) *tracker {
	tk := &tracker{c: c, step: step, phase: phase, total: len(trajs), start: time.Now()}
	if phase == event.PhaseEval {
		tk.need, tk.sums = c.recipe.Eval.NSamples, map[int]float64{}
		for _, t := range trajs {
			for t.Group >= len(tk.counts) {
				tk.counts = append(tk.counts, [2]int{})
			}
		}
	}
	return tk
}

// shape is what the recipe has the run do, for the ETA.
func (c *Controller) shape() eta.Shape {
	r := c.recipe
	if c.opts.Eval != nil {
		return eta.Shape{EvalOnly: true}
	}
	return eta.Shape{MaxSteps: r.Run.MaxSteps, EvalEvery: r.Eval.Every, StepTrajs: r.BatchSize(),
		EvalTrajs: min(r.Eval.HeldoutTasks, len(c.heldout))*r.Eval.NSamples + len(c.validation)*r.Eval.ValidationSamples}
}

// finished reports trajectory t done.
func (tk *tracker) finished(t *batch.Trajectory) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	c := tk.c
	tk.done++
	elapsed := time.Since(tk.start).Seconds()
	c.clock.Pace(elapsed, tk.done)
	p := event.Progress{Step: tk.step, Phase: tk.phase, Done: tk.done, Total: tk.total}
	perTraj := elapsed / float64(tk.done)
	phaseTotal := perTraj * float64(tk.total)
	p.ETA = perTraj * float64(tk.total-tk.done)
	p.RunETA, p.RunETAAtLeast = c.clock.Left(c.shape(), tk.step, tk.phase, p.ETA, phaseTotal)
	if tk.counts != nil {
		n := &tk.counts[t.Group]
		n[0]++
		if t.Summary.Correct {
			n[1]++
		}
		if n[0] == tk.need {
			tk.tasksDone++
			for _, k := range c.recipe.Eval.Ks {
				if v, err := envs.PassAtK(n[0], n[1], k); err == nil {
					tk.sums[k] += v
				}
			}
			c.stop.NoteEval(tk.tasksDone, len(tk.counts))
		}
		p.Tasks, p.TasksDone = len(tk.counts), tk.tasksDone
		if tk.tasksDone > 0 {
			p.PassAtK = make(map[int]float64, len(tk.sums))
			for k, v := range tk.sums {
				p.PassAtK[k] = v / float64(tk.tasksDone)
			}
		}
		c.emit(c.trajectoryEvent(tk.step, t, true))
	}
	c.emit(p)
}
