package rollout

import (
	"fmt"
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

// TestPhaseStatsScripted runs schedules whose steps are known through a lockstep generator of
// two slots: three one-token prompts decoded greedily, session 0 for 6 tokens; session 1 until
// its second token, which completes the stop string "xx" (every token decodes to "x"): a tool
// call, whose one-token result it appends for 2 more tokens; session 2, admitted when a slot
// frees, for 3. Session 1's tool returns only once the loop stands still waiting for it, 20 ms
// later, so it is late whatever the schedule.
//
// ToolReturnSteps 0 (every slot waits for every tool): steps 1-2 both slots; the loop waits for
// the tool with session 0's request in hand: the stall. 3: a prefill of session 1's second turn
// (its last sampled token and the tool's), which samples its first token; session 0 waits for
// the decode step, busy. 4: both; session 1 is done, and session 2 takes its slot at the next
// step. 5-7: sessions 0 and 2. Seven steps, every slot busy in each.
//
// ToolReturnSteps 2: session 1's second turn is due two steps after its first ended, so steps
// 3-4 run session 0 alone while session 1 is away; at step 5 the result is late and the loop
// waits (the stall), then the prefill; 6: both, session 1 done; 7: session 1's close is taken,
// session 2 takes slot 1 beside session 0's last token; 8-9: session 2. Busy slot-steps 14 of 18.
func TestPhaseStatsScripted(t *testing.T) {
	for _, tc := range []struct {
		toolSteps int
		steps     []string
		busy      []int
	}{
		{0, []string{"1/64: s0@0+1 s1@0+1", "1/64: s0@1+1 s1@1+1", "64/64: s1@2+2", "1/64: s0@2+1 s1@4+1",
			"1/64: s0@3+1 s1@0+1", "1/64: s0@4+1 s1@1+1", "1/64: s0@5+1 s1@2+1"}, []int{2, 2, 2, 2, 2, 2, 2}},
		{2, []string{"1/64: s0@0+1 s1@0+1", "1/64: s0@1+1 s1@1+1", "1/64: s0@2+1", "1/64: s0@3+1", "64/64: s1@2+2",
			"1/64: s0@4+1 s1@4+1", "1/64: s0@5+1 s1@0+1", "1/64: s1@1+1", "1/64: s1@2+1"}, []int{2, 2, 1, 1, 2, 2, 2, 1, 1}},
	} {
		t.Run(fmt.Sprintf("tool_return_steps=%d", tc.toolSteps), func(t *testing.T) {
			m, _ := loadFixture(t, "qwen3-tiny")
			g := newGen(t, m, Config{Slots: 2, MaxLen: 64, Buckets: []int{64}, Lockstep: true, ToolReturnSteps: tc.toolSteps,
				Decode: func(ids []int32) string { return strings.Repeat("x", len(ids)) }})
			stalled := make(chan struct{})
			var once sync.Once
			g.mu.Lock()
			g.onStall = func() { // the loop stands still for session 1's second turn
				if s := g.slots[1]; s.held && s.gen == nil && s.pos > 0 && s.due <= g.tick {
					once.Do(func() { close(stalled) })
				}
			}
			g.mu.Unlock()
			const tool = 20 * time.Millisecond
			steps := traceSteps(g)

			meter := g.Measure()
			base := g.Reserve(3)
			turns := [][]Request{
				{{Append: []int32{3}, MaxNew: 6}},
				{{Append: []int32{4}, MaxNew: 10, StopStrings: []string{"xx"}}, {Append: []int32{9}, MaxNew: 2}},
				{{Append: []int32{5}, MaxNew: 3}},
			}
			runTickets(t, g, base, turns, func(_, turn int) {
				if turn > 0 { // the tool: returns once the batch waits for it, and then late
					<-stalled
					time.Sleep(tool)
				}
			})
			ps := meter.Stop()
			if got := strings.Join(*steps, "\n"); got != strings.Join(tc.steps, "\n") {
				t.Errorf("steps:\n%s\nwant:\n%s", got, strings.Join(tc.steps, "\n"))
			}
			busy := 0
			for _, b := range tc.busy {
				busy += b
			}
			if ps.Steps != int64(len(tc.busy)) || ps.BusySlotSteps != int64(busy) || !slices.Equal(ps.Busy, tc.busy) {
				t.Errorf("steps %d, busy slot-steps %d %v; want %d, %d %v", ps.Steps, ps.BusySlotSteps, ps.Busy, len(tc.busy), busy, tc.busy)
			}
			if got, want := ps.Occupancy(), float64(busy)/float64(2*len(tc.busy)); got != want {
				t.Errorf("occupancy %v; want %v", got, want)
			}
			if ps.Stall < tool {
				t.Errorf("stall %v; want at least the %v the batch waited for the late tool", ps.Stall, tool)
			}
			if got, want := ps.StallShare(), ps.Stall.Seconds()/(ps.Stall+ps.StepTime).Seconds(); got != want {
				t.Errorf("stall share %v; want %v", got, want)
			}
			if len(ps.Done) != 3 || !slices.IsSorted(ps.Done) || ps.Tail() != 0 {
				t.Errorf("done %v, tail %v: want three ends and no tail (the third of three is ⌈0.9·3⌉)", ps.Done, ps.Tail())
			}
		})
	}
}
