package rollout

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPhaseStatsArithmetic: the four numbers from scripted counts whose answers are worked by hand.
func TestPhaseStatsArithmetic(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	// Ten sessions: the ninth (⌈0.9·10⌉) ends at 900 ms, the last at 2400 ms; order does not matter.
	if got, want := TailOf(ms(2400, 100, 200, 300, 400, 500, 600, 700, 800, 900)), 1500*time.Millisecond; got != want {
		t.Errorf("tail of ten: got %v; want %v", got, want)
	}
	// Twenty: the eighteenth ends at 1800 ms, the last at 2000 ms.
	var twenty []int
	for i := 1; i <= 20; i++ {
		twenty = append(twenty, 100*i)
	}
	if got, want := TailOf(ms(twenty...)), 200*time.Millisecond; got != want {
		t.Errorf("tail of twenty: got %v; want %v", got, want)
	}
	if got := TailOf(ms(700)); got != 0 {
		t.Errorf("tail of one: got %v; want 0", got)
	}
	p := PhaseStats{Slots: 4, Steps: 6, BusySlotSteps: 18, Busy: []int{4, 4, 4, 3, 2, 1},
		StepTime: 900 * time.Millisecond, Stall: 100 * time.Millisecond}
	if got, want := p.Occupancy(), 18.0/24; got != want {
		t.Errorf("occupancy: got %v; want %v", got, want)
	}
	if got, want := p.StallShare(), 0.1; got != want {
		t.Errorf("stall share: got %v; want %v", got, want)
	}
	tr, every := p.Trace(4) // 6 steps in 4 points: 2 steps a point, the last point of 2
	if want := []float64{1, 0.875, 0.375}; every != 2 || !slices.Equal(tr, want) {
		t.Errorf("trace: got %v every %d; want %v every 2", tr, every, want)
	}
	if (PhaseStats{}).Occupancy() != 0 || (PhaseStats{}).StallShare() != 0 {
		t.Error("an empty phase must read 0, not NaN")
	}
}

// TestPhaseStatsScripted runs a schedule whose steps are known through a lockstep generator of
// two slots: three one-token prompts decoded greedily, session 0 for 4 tokens, session 1 for 2,
// then a tool call whose one-token result it appends for 2 more, session 2 for 3. Session 1's
// tool returns only once the loop stands still waiting for it, 20 ms later.
//
// Steps: 1-2 sessions 0 and 1 (1's first turn ends); the loop waits for 1's tool with 0's
// request in hand: the stall. 3: a prefill of 1's second turn (its last sampled token and the
// tool's), which samples its first token; 0 waits for the decode step, busy. 4: both; 1 is done
// and closes, and session 2 takes its slot. 5: 0's last token and 2's first. 6-7: session 2
// alone. Busy slot-steps 2·5 + 2 = 12 of 2·7.
func TestPhaseStatsScripted(t *testing.T) {
	m, _ := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 2, MaxLen: 64, Buckets: []int{64}, Lockstep: true})
	stalled := make(chan struct{})
	var once sync.Once
	g.mu.Lock()
	g.onStall = func() { once.Do(func() { close(stalled) }) }
	g.mu.Unlock()
	const tool = 20 * time.Millisecond

	steps := traceSteps(g)
	meter := g.Measure()
	base := g.Reserve(3)
	turns := [][]int{{4}, {2, 2}, {3}}
	var wg sync.WaitGroup
	for i, news := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := WithTicket(context.Background(), base+int64(i))
			s, err := g.Open(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			for turn, n := range news {
				if turn > 0 { // the tool: returns once the batch waits for it, and then late
					<-stalled
					time.Sleep(tool)
				}
				if _, err := s.Generate(ctx, Request{Append: []int32{int32(3 + i)}, MaxNew: n}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ps := meter.Stop()
	t.Logf("steps:\n%s", strings.Join(*steps, "\n"))
	if ps.Steps != 7 || ps.BusySlotSteps != 12 || !slices.Equal(ps.Busy, []int{2, 2, 2, 2, 2, 1, 1}) {
		t.Errorf("steps %d, busy slot-steps %d %v; want 7, 12 [2 2 2 2 2 1 1]", ps.Steps, ps.BusySlotSteps, ps.Busy)
	}
	if got, want := ps.Occupancy(), 12.0/14; got != want {
		t.Errorf("occupancy %v; want %v", got, want)
	}
	if ps.Stall < tool {
		t.Errorf("stall %v; want at least the %v the batch waited for the late tool", ps.Stall, tool)
	}
	if got, want := ps.StallShare(), ps.Stall.Seconds()/(ps.Stall+ps.StepTime).Seconds(); got != want {
		t.Errorf("stall share %v; want %v", got, want)
	}
	if len(ps.Done) != 3 || !slices.IsSorted(ps.Done) || ps.Tail() != ps.Done[2]-ps.Done[2] {
		t.Errorf("done %v, tail %v: want three ends and the tail from the third (⌈0.9·3⌉) to the last, 0", ps.Done, ps.Tail())
	}
}
