package rollout

import (
	"math"
	"slices"
	"time"
)

// Meter measures one generation phase (a rollout, an evaluation): how busy the slots were, how
// long the batch stood still on tools, and when each session ended. Measure starts one, Stop
// ends it; several may run at once (each sees every step while it runs).
type Meter struct {
	g     *Generator
	start time.Time
	ps    PhaseStats
}

// PhaseStats is what a Meter measured.
type PhaseStats struct {
	Slots int   // the generator's slots
	Steps int64 // decode and prefill steps run
	// BusySlotSteps is Σ over steps of the slots that had a request in progress (being decoded or
	// prefilled, or waiting for the other kind of step). A slot whose session is between requests
	// (running its tool) or that no session holds is idle.
	BusySlotSteps int64
	StepTime      time.Duration // device time in steps
	// Stall is the time the loop stood still, with requests to decode, because lockstep made it
	// wait for a held slot whose session had not yet sent its next request (a tool still
	// running, a session about to close) or for the next ticket to arrive.
	Stall time.Duration
	// Done is when each session that closed during the phase did so, since the start, in order.
	Done []time.Duration
	// Busy is each step's busy slots, in order.
	Busy []int
}

// Measure starts measuring the steps and sessions from now on.
func (g *Generator) Measure() *Meter {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := &Meter{g: g, start: time.Now(), ps: PhaseStats{Slots: g.cfg.Slots}}
	g.meters = append(g.meters, m)
	return m
}

// Stop ends the measurement and returns it. Stopping twice returns the same stats.
func (m *Meter) Stop() PhaseStats {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	g.meters = slices.DeleteFunc(g.meters, func(o *Meter) bool { return o == m })
	return m.ps
}

// step records one step that ran for dt with busy slots at work; g.mu held.
func (g *Generator) meterStep(busy int, dt time.Duration) {
	for _, m := range g.meters {
		m.ps.Steps++
		m.ps.BusySlotSteps += int64(busy)
		m.ps.StepTime += dt
		m.ps.Busy = append(m.ps.Busy, busy)
	}
}

// meterStall records a wait of d with work to do; g.mu held.
func (g *Generator) meterStall(d time.Duration) {
	for _, m := range g.meters {
		m.ps.Stall += d
	}
}

// meterDone records a session's end; g.mu held.
func (g *Generator) meterDone() {
	now := time.Now()
	for _, m := range g.meters {
		m.ps.Done = append(m.ps.Done, now.Sub(m.start))
	}
}

// Occupancy is the share of slot-steps that carried work: BusySlotSteps ÷ (Slots × Steps); 0
// without steps.
func (p PhaseStats) Occupancy() float64 {
	if p.Steps == 0 || p.Slots == 0 {
		return 0
	}
	return float64(p.BusySlotSteps) / float64(p.Steps*int64(p.Slots))
}

// StallShare is the share of the phase's decode time that the batch stood still waiting for
// tools: Stall ÷ (StepTime + Stall); 0 when neither happened.
func (p PhaseStats) StallShare() float64 {
	if t := p.StepTime + p.Stall; t > 0 {
		return p.Stall.Seconds() / t.Seconds()
	}
	return 0
}

// Tail is the time from the moment 90 % of the phase's sessions had ended to the end of the last
// one (see TailOf).
func (p PhaseStats) Tail() time.Duration { return TailOf(p.Done) }

// TailOf is, for the end times of n sessions, the time from the ⌈0.9·n⌉-th end to the last; 0
// for fewer than two.
func TailOf(done []time.Duration) time.Duration {
	if len(done) < 2 {
		return 0
	}
	d := slices.Clone(done)
	slices.Sort(d)
	i := int(math.Ceil(0.9*float64(len(d)))) - 1
	return d[len(d)-1] - d[i]
}

// Trace is the occupancy over the phase in at most points points, each the mean over every
// consecutive steps (the last point may cover fewer); nil without steps.
func (p PhaseStats) Trace(points int) (trace []float64, every int) {
	if len(p.Busy) == 0 || points <= 0 || p.Slots == 0 {
		return nil, 0
	}
	every = (len(p.Busy) + points - 1) / points
	for i := 0; i < len(p.Busy); i += every {
		chunk := p.Busy[i:min(i+every, len(p.Busy))]
		sum := 0
		for _, b := range chunk {
			sum += b
		}
		trace = append(trace, float64(sum)/float64(len(chunk)*p.Slots))
	}
	return trace, every
}
