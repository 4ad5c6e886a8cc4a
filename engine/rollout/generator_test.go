package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/gomlx/compute/gobackend"

	"agentrl/engine/device"
	"agentrl/engine/model"
)

type goldenCase struct {
	InputIDs           []int32 `json:"input_ids"`
	GreedyContinuation []int32 `json:"greedy_continuation"`
}

func loadFixture(t testing.TB, name string) (*model.Model, []goldenCase) {
	t.Helper()
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "testdata", "fixtures", name)
	m, err := model.Load(backend, dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Cases []goldenCase }
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return m, g.Cases
}

func newGen(t testing.TB, m *model.Model, cfg Config) *Generator {
	t.Helper()
	g, err := New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// waitTokens blocks until the generator has sampled at least n tokens in total.
func waitTokens(t *testing.T, g *Generator, n int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for g.Stats().Tokens < n {
		if time.Now().After(deadline) {
			t.Fatalf("generator stuck at %d tokens; waiting for %d", g.Stats().Tokens, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGreedyMatchesFixtures runs every fixture case at once through 4 slots, in small prefill
// chunks, with later requests arriving while earlier ones are mid-decode: each continuation must
// equal HF's greedy continuation exactly.
// Prefill lanes: 1 and 2 name their slots (indexed prefill steps), 4 carries every slot.
func TestGreedyMatchesFixtures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lanes int
	}{{"qwen3-tiny", 1}, {"qwen3-tiny", 2}, {"qwen3-tiny", 4}, {"qwen3-tiny-untied", 1}, {"qwen2-tiny", 2}} {
		name := tc.name
		t.Run(fmt.Sprintf("%s/lanes=%d", name, tc.lanes), func(t *testing.T) {
			m, cases := loadFixture(t, name)
			g := newGen(t, m, Config{Slots: 4, MaxLen: 64, Buckets: []int{16, 32, 64}, Chunks: []int{4}, PrefillLanes: tc.lanes})
			ctx := context.Background()
			results := make([]Result, len(cases))
			errs := make([]error, len(cases))
			var wg sync.WaitGroup
			for i, c := range cases {
				if i > 0 {
					waitTokens(t, g, int64(3*i)) // the earlier requests are decoding now
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = g.Generate(ctx, Request{Append: c.InputIDs, MaxNew: len(c.GreedyContinuation)})
				}()
			}
			wg.Wait()
			for i, c := range cases {
				if errs[i] != nil {
					t.Fatalf("case %d: %v", i, errs[i])
				}
				if !slices.Equal(results[i].IDs, c.GreedyContinuation) {
					t.Errorf("case %d: got %v; want %v", i, results[i].IDs, c.GreedyContinuation)
				}
				if results[i].Stop != StopMaxNew {
					t.Errorf("case %d: stop %q; want %q", i, results[i].Stop, StopMaxNew)
				}
			}
		})
	}
}

// TestSampledLogProbsMatchScore checks that the log-prob recorded for each sampled token equals a
// teacher-forced pass over the same sequence (temperature 1, no truncation), within 1e-4.
func TestSampledLogProbsMatchScore(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 2, MaxLen: 64, Buckets: []int{32, 64}})
	prompt := cases[1].InputIDs
	res, err := g.Generate(context.Background(), Request{Append: prompt, MaxNew: 30, Sampling: Sampling{Temperature: 1, Seed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	seq := append(append([]int32{}, prompt...), res.IDs...)
	s, err := m.Score([][]int32{seq})
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range res.LogProbs {
		want := s.NextLogProbs[0][len(prompt)-1+i]
		if d := math.Abs(float64(lp - want)); d > 1e-4 {
			t.Errorf("token %d (%d): rollout log-prob %.6f; teacher-forced %.6f", i, res.IDs[i], lp, want)
		}
	}
}

// TestTruncatedSamplingLogProbs checks top-k sampling: every token is among the k most likely and
// its log-prob is that of the renormalised top-k distribution at the given temperature.
func TestTruncatedSamplingLogProbs(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 1, MaxLen: 64, Buckets: []int{64}, TopKMax: 16, Truncation: true})
	prompt := cases[1].InputIDs
	const temp, k = 0.7, 5
	res, err := g.Generate(context.Background(), Request{Append: prompt, MaxNew: 10, Sampling: Sampling{Temperature: temp, TopK: k, Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	seq := append(append([]int32{}, prompt...), res.IDs...)
	logits, err := m.Logits(seq)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range res.IDs {
		row := logits[len(prompt)-1+i]
		// Host reference: top-k of logits/T, renormalised.
		idx := topKIndices(row, k)
		var z float64
		found := false
		for _, j := range idx {
			z += math.Exp(float64(row[j]) / temp)
			found = found || int32(j) == id
		}
		if !found {
			t.Fatalf("token %d = %d is not among the top %d %v", i, id, k, idx)
		}
		want := float64(row[id])/temp - math.Log(z)
		if d := math.Abs(float64(res.LogProbs[i]) - want); d > 1e-4 {
			t.Errorf("token %d: log-prob %.6f; want %.6f", i, res.LogProbs[i], want)
		}
	}
}

func topKIndices(row []float32, k int) []int {
	idx := make([]int, 0, k)
	used := map[int]bool{}
	for len(idx) < k {
		best := -1
		for j, v := range row {
			if !used[j] && (best < 0 || v > row[best]) {
				best = j
			}
		}
		used[best] = true
		idx = append(idx, best)
	}
	return idx
}

// TestSeedReproducible: the same request and seed give the same tokens, also when other requests
// share the batch.
func TestSeedReproducible(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 3, MaxLen: 64, Buckets: []int{64}, Truncation: true})
	req := Request{Append: cases[1].InputIDs, MaxNew: 20, Sampling: Sampling{Temperature: 1, TopP: 0.9, TopK: 40, Seed: 42}}
	alone, err := g.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var crowded Result
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				crowded, _ = g.Generate(context.Background(), req)
				return
			}
			_, _ = g.Generate(context.Background(), Request{Append: cases[2].InputIDs, MaxNew: 15, Sampling: Sampling{Temperature: 1, Seed: uint64(i)}})
		}()
	}
	wg.Wait()
	if !slices.Equal(alone.IDs, crowded.IDs) {
		t.Errorf("same seed, different tokens:\nalone   %v\ncrowded %v", alone.IDs, crowded.IDs)
	}
	other, _ := g.Generate(context.Background(), Request{Append: req.Append, MaxNew: 20, Sampling: Sampling{Temperature: 1, Seed: 43}})
	if slices.Equal(alone.IDs, other.IDs) {
		t.Errorf("seeds 42 and 43 sampled the same 20 tokens %v", alone.IDs)
	}
}

// TestToolWaitDoesNotStallOthers: trajectory A stops at turn 1 and "runs a tool" that only returns
// once every other trajectory has finished; they can only finish if decoding goes on while A holds
// its slot. A's second turn must then equal the same two-turn trajectory run with no wait.
func TestToolWaitDoesNotStallOthers(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 4, MaxLen: 128, Buckets: []int{64, 128}, Chunks: []int{8}})
	ctx := context.Background()
	obs := []int32{5, 6, 7, 8, 9}
	turn := func(s *Session, ids []int32) Result {
		r, err := s.Generate(ctx, Request{Append: ids, MaxNew: 10, Sampling: Sampling{Temperature: 1, Seed: 11}})
		if err != nil {
			t.Error(err)
		}
		return r
	}
	// Reference: the two turns back to back.
	ref, err := g.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref1 := turn(ref, cases[1].InputIDs)
	ref2 := turn(ref, obs)
	ref.Close()

	othersDone := make(chan struct{})
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var wg sync.WaitGroup
	var a1, a2 Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := g.Open(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer s.Close()
		a1 = turn(s, cases[1].InputIDs)
		note("A waits for its tool")
		<-othersDone // the tool blocks until everyone else is done
		note("A resumes")
		a2 = turn(s, obs)
	}()
	var others sync.WaitGroup
	for i := 0; i < 6; i++ { // more trajectories than the 3 free slots: some queue
		others.Add(1)
		go func() {
			defer others.Done()
			_, err := g.Generate(ctx, Request{Append: cases[2].InputIDs, MaxNew: 8, Sampling: Sampling{Temperature: 1, Seed: uint64(100 + i)}})
			if err != nil {
				t.Error(err)
			}
			note("other done")
		}()
	}
	others.Wait()
	close(othersDone)
	wg.Wait()
	if order[len(order)-1] != "A resumes" {
		t.Errorf("order %v: A resumed before the others finished", order)
	}
	if !slices.Equal(a1.IDs, ref1.IDs) || !slices.Equal(a2.IDs, ref2.IDs) {
		t.Errorf("A after waiting: %v / %v; without waiting: %v / %v", a1.IDs, a2.IDs, ref1.IDs, ref2.IDs)
	}
}

// TestNoLeaksAfterManyRequests pushes 10,000 short requests (a quarter of them cancelled) through 8
// slots and checks that every slot is free and exactly the caches' device buffers remain.
func TestNoLeaksAfterManyRequests(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	m, _ := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 8, MaxLen: 32, Buckets: []int{32}, Chunks: []int{4}})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	var mu sync.Mutex
	cancelled, finished := 0, 0
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithCancel(context.Background())
			if i%4 == 0 {
				cancel() // cancelled before or while it runs
			}
			defer cancel()
			_, err := g.Generate(ctx, Request{Append: []int32{int32(i % 500), 3}, MaxNew: 2, Sampling: Sampling{Temperature: 1, Seed: uint64(i)}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				finished++
			case errors.Is(err, context.Canceled):
				cancelled++
			default:
				t.Errorf("request %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	st := g.Stats()
	if st.Busy != 0 || st.Queued != 0 {
		t.Errorf("after %d requests: %d slots busy, %d queued; want 0 and 0", n, st.Busy, st.Queued)
	}
	if want := 2 * m.Config.NumLayers; st.LiveCacheTensor != want {
		t.Errorf("live cache tensors %d; want %d", st.LiveCacheTensor, want)
	}
	if finished+cancelled != n || finished < n/2 {
		t.Errorf("finished %d, cancelled %d of %d", finished, cancelled, n)
	}
	t.Logf("%d finished, %d cancelled, %d steps, %d tokens", finished, cancelled, st.Steps, st.Tokens)
}

// TestReleaseAndRestoreCache frees the KV cache as the training phase does, checks that no
// session can open meanwhile and that an open session blocks the release, then restores it: the
// greedy continuations still equal HF's.
func TestReleaseAndRestoreCache(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 2, MaxLen: 64, Buckets: []int{32, 64}})
	ctx := context.Background()
	s, err := g.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ReleaseCache(); err == nil {
		t.Fatal("ReleaseCache with a session open: got no error; want one naming the held slot")
	}
	s.Close()
	for round := 0; round < 2; round++ {
		if err := g.ReleaseCache(); err != nil {
			t.Fatal(err)
		}
		if got := g.Stats().LiveCacheTensor; got != 0 {
			t.Fatalf("after ReleaseCache: %d cache tensors live; want 0", got)
		}
		if _, err := g.Open(ctx); !errors.Is(err, ErrReleased) {
			t.Fatalf("Open while released: got %v; want ErrReleased", err)
		}
		if err := g.RestoreCache(); err != nil {
			t.Fatal(err)
		}
		if got, want := g.Stats().LiveCacheTensor, 2*m.Config.NumLayers; got != want {
			t.Fatalf("after RestoreCache: %d cache tensors live; want %d", got, want)
		}
		for i, c := range cases {
			res, err := g.Generate(ctx, Request{Append: c.InputIDs, MaxNew: len(c.GreedyContinuation)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.IDs, c.GreedyContinuation) {
				t.Errorf("round %d case %d: got %v; want %v", round, i, res.IDs, c.GreedyContinuation)
			}
		}
	}
}

// traceSteps records each step g runs as "chunk/bucket: s<slot>@<pos>+<fed> …".
func traceSteps(g *Generator) *[]string {
	var steps []string
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trace = func(k stepKey, active []stepSlot) {
		line := fmt.Sprintf("%d/%d:", k.chunk, k.bucket)
		for _, a := range active {
			line += fmt.Sprintf(" s%d@%d+%d", a.slot.id, a.slot.pos, a.fed)
		}
		steps = append(steps, line)
	}
	return &steps
}

// TestLockstepIsReproducible runs ten three-turn sessions through three slots twice, with tool
// calls of random length, sessions arriving in random order and giving their slots back after a
// random delay (so several may be freed in any order), and checks that a lockstep
// generator runs the very same steps (same shapes, same slots, same positions) and samples the
// same tokens both times. Without lockstep the step sequence follows the tools' timing.
func TestLockstepIsReproducible(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	run := func(jitter int64) (string, [][]int32) {
		g := newGen(t, m, Config{Slots: 3, MaxLen: 128, Buckets: []int{64, 128}, Chunks: []int{8}, Lockstep: true})
		steps := traceSteps(g)
		rng := rand.New(rand.NewPCG(uint64(jitter), 0))
		delays := make([]time.Duration, 40)
		for i := range delays {
			delays[i] = time.Duration(rng.Int64N(3000)) * time.Microsecond
		}
		const n = 10
		base := g.Reserve(n)
		out := make([][]int32, n)
		var wg sync.WaitGroup
		for i := n - 1; i >= 0; i-- { // started in reverse: tickets, not arrival, set the order
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer g.Skip(base + int64(i))
				time.Sleep(delays[i])
				ctx := WithTicket(context.Background(), base+int64(i))
				s, err := g.Open(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				next := cases[i%len(cases)].InputIDs
				for turn := 0; turn < 3; turn++ {
					r, err := s.Generate(ctx, Request{Append: next, MaxNew: 6 + i%4, Sampling: Sampling{Temperature: 1, Seed: uint64(10*i + turn)}})
					if err != nil {
						t.Error(err)
						return
					}
					out[i] = append(out[i], r.IDs...)
					time.Sleep(delays[10+3*i%30]) // the "tool"
					next = []int32{5, 6, int32(7 + turn)}
				}
				time.Sleep(delays[(7*i+1)%40]) // scoring before the slot is given back
			}()
		}
		wg.Wait()
		// A one-shot request without a ticket takes the next one on arrival.
		if _, err := g.Generate(context.Background(), Request{Append: cases[0].InputIDs, MaxNew: 2, Sampling: Sampling{Temperature: 1, Seed: 1}}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(*steps, "\n"), out
	}
	steps1, out1 := run(1)
	steps2, out2 := run(2)
	if steps1 != steps2 {
		t.Errorf("lockstep step sequences differ:\n%s\n--- vs ---\n%s", steps1, steps2)
	}
	for i := range out1 {
		if !slices.Equal(out1[i], out2[i]) {
			t.Errorf("session %d sampled %v, then %v", i, out1[i], out2[i])
		}
	}
	if n := strings.Count(steps1, "\n") + 1; n < 30 {
		t.Errorf("only %d steps: the workload is too small to mean anything", n)
	}
}

// TestLockstepSlotsDoNotFollowCloseOrder: two sessions finish in the same step and give their
// slots back in one order, then in the other; the third ticket must get the same slot (the
// lowest) both times, so that every trajectory runs in the same slot whatever the goroutines'
// timing. Admitting it as soon as the first slot frees gave it that one.
func TestLockstepSlotsDoNotFollowCloseOrder(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	run := func(firstToClose int) string {
		g := newGen(t, m, Config{Slots: 2, MaxLen: 64, Buckets: []int{64}, Chunks: []int{8}, Lockstep: true})
		steps := traceSteps(g)
		base := g.Reserve(3)
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer g.Skip(base + int64(i))
				ctx := WithTicket(context.Background(), base+int64(i))
				s, err := g.Open(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				// The same prompt, length and seed: sessions 0 and 1 finish in the same step.
				if _, err := s.Generate(ctx, Request{Append: cases[0].InputIDs, MaxNew: 4, Sampling: Sampling{Temperature: 1, Seed: 7}}); err != nil {
					t.Error(err)
				}
				if i < 2 && i != firstToClose {
					time.Sleep(20 * time.Millisecond)
				}
				s.Close()
			}()
		}
		wg.Wait()
		return strings.Join(*steps, "\n")
	}
	a, b := run(0), run(1)
	if a != b {
		t.Errorf("the step sequence follows which session gave its slot back first:\n%s\n--- vs ---\n%s", a, b)
	}
	if !strings.Contains(a, "s0@0+") || strings.Count(a, "\n") < 4 {
		t.Errorf("the third session did not run in slot 0 after the first two:\n%s", a)
	}
}

func TestLockstepSkipAndCancel(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 1, MaxLen: 64, Buckets: []int{64}, Lockstep: true})
	base := g.Reserve(3)
	// Ticket base never comes; base+1 is cancelled while it waits; base+2 must still be served.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := g.Open(WithTicket(ctx, base+1))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait returned %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.Generate(WithTicket(context.Background(), base+2), Request{Append: cases[0].InputIDs, MaxNew: 3, Sampling: Sampling{Temperature: 1}})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("ticket %d served before ticket %d was skipped (err %v)", base+2, base, err)
	case <-time.After(50 * time.Millisecond):
	}
	g.Skip(base)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := g.Open(WithTicket(context.Background(), base+1)); err == nil || !strings.Contains(err.Error(), "already used or skipped") {
		t.Errorf("reusing a skipped ticket: %v", err)
	}
}

// TestToolAwayKeepsOthersDecoding: with ToolReturnSteps 5, session 1 leaves the batch when its
// turn ends on a stop string and its tool returns at once; session 0 decodes the five steps
// alone, and session 1's next turn is taken exactly at the fifth step after, not earlier (its
// request came early and was held) and not later.
func TestToolAwayKeepsOthersDecoding(t *testing.T) {
	m, _ := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 2, MaxLen: 64, Buckets: []int{64}, Lockstep: true, ToolReturnSteps: 5,
		Decode: func(ids []int32) string { return strings.Repeat("x", len(ids)) }})
	steps := traceSteps(g)
	base := g.Reserve(2)
	turns := [][]Request{
		{{Append: []int32{3}, MaxNew: 12}},
		{{Append: []int32{4}, MaxNew: 10, StopStrings: []string{"xx"}}, {Append: []int32{9}, MaxNew: 2}},
	}
	runTickets(t, g, base, turns, nil)
	want := []string{"1/64: s0@0+1 s1@0+1", "1/64: s0@1+1 s1@1+1", // session 1's first turn ends on "xx"
		"1/64: s0@2+1", "1/64: s0@3+1", "1/64: s0@4+1", "1/64: s0@5+1", "1/64: s0@6+1", // away for five steps
		"64/64: s1@2+2", "1/64: s0@7+1 s1@4+1", // back: the prefill of its second turn, then both decode
		"1/64: s0@8+1", "1/64: s0@9+1", "1/64: s0@10+1", "1/64: s0@11+1"}
	if got := strings.Join(*steps, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// TestLockstepToolReturnIsReproducible runs ten three-turn sessions through three slots with
// ToolReturnSteps 3 on two modelled tool workers, three times, each time with other wall-clock timing: a turn ends on a tool
// call when it samples a token whose text is "q" (about one token in eight), and the tool then
// returns at once, after a random sleep, or only once the loop stands still waiting for it (late,
// then a random sleep more); sessions arrive in random order and close after a random delay. The
// step sequence, the tokens and their log-probs must be the same to the bit every time.
func TestLockstepToolReturnIsReproducible(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	decode := func(ids []int32) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteByte("abcdefgq"[id%8])
		}
		return b.String()
	}
	type outcome struct {
		ids  []int32
		lps  []uint32
		tool int // turns that ended on a tool call
	}
	run := func(jitter uint64) (string, []outcome, Stats, PhaseStats, int) {
		g := newGen(t, m, Config{Slots: 3, MaxLen: 128, Buckets: []int{64, 128}, Chunks: []int{8}, Lockstep: true, ToolReturnSteps: 3, ToolWorkers: 2, Decode: decode})
		steps := traceSteps(g)
		rng := rand.New(rand.NewPCG(jitter, 0))
		var rngMu sync.Mutex
		random := func(n int64) int64 { rngMu.Lock(); defer rngMu.Unlock(); return rng.Int64N(n) }
		var lateMu sync.Mutex
		late := 0
		// waitLate blocks until the loop stands still for session s (due, and it has not asked).
		waitLate := func(s *Session) {
			for {
				g.mu.Lock()
				sl := s.slot
				stuck := sl.held && sl.gen == nil && sl.due <= g.tick
				g.mu.Unlock()
				if stuck {
					lateMu.Lock()
					late++
					lateMu.Unlock()
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
		const n = 10
		meter := g.Measure()
		base := g.Reserve(n)
		out := make([]outcome, n)
		var wg sync.WaitGroup
		for i := n - 1; i >= 0; i-- {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer g.Skip(base + int64(i))
				time.Sleep(time.Duration(random(2000)) * time.Microsecond)
				ctx := WithTicket(context.Background(), base+int64(i))
				s, err := g.Open(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				next := cases[i%len(cases)].InputIDs
				for turn := 0; turn < 3; turn++ {
					r, err := s.Generate(ctx, Request{Append: next, MaxNew: 6 + i%4, StopStrings: []string{"q"}, Sampling: Sampling{Temperature: 1, Seed: uint64(10*i + turn)}})
					if err != nil {
						t.Error(err)
						return
					}
					out[i].ids = append(out[i].ids, r.IDs...)
					for _, lp := range r.LogProbs {
						out[i].lps = append(out[i].lps, math.Float32bits(lp))
					}
					if r.Stop == StopString {
						out[i].tool++
						switch random(3) { // the tool
						case 0:
						case 1:
							time.Sleep(time.Duration(random(4000)) * time.Microsecond)
						case 2:
							waitLate(s)
							time.Sleep(time.Duration(random(2000)) * time.Microsecond)
						}
					}
					next = []int32{5, 6, int32(7 + turn)}
				}
				time.Sleep(time.Duration(random(3000)) * time.Microsecond) // scoring before the slot is given back
			}()
		}
		wg.Wait()
		// A second phase, reserved as soon as the first has closed: it starts from every slot
		// free whether or not the loop has taken the last closes yet.
		next := g.Reserve(4)
		for j := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := WithTicket(context.Background(), next+int64(j))
				r, err := g.Generate(ctx, Request{Append: cases[j%len(cases)].InputIDs, MaxNew: 3 + j, Sampling: Sampling{Temperature: 1, Seed: uint64(100 + j)}})
				if err != nil {
					t.Error(err)
				}
				out[j].ids = append(out[j].ids, r.IDs...)
			}()
		}
		wg.Wait()
		return strings.Join(*steps, "\n"), out, g.Stats(), meter.Stop(), late
	}
	steps1, out1, _, ps1, late1 := run(1)
	tools := 0
	for _, o := range out1 {
		tools += o.tool
	}
	if tools < 5 {
		t.Fatalf("only %d turns ended on a tool call: the workload is too small to mean anything", tools)
	}
	for _, jitter := range []uint64{2, 3} {
		steps, out, _, ps, late := run(jitter)
		if steps != steps1 {
			t.Errorf("jitter %d: the step sequences differ:\n%s\n--- vs ---\n%s", jitter, steps1, steps)
		}
		for i := range out1 {
			if !slices.Equal(out1[i].ids, out[i].ids) || !slices.Equal(out1[i].lps, out[i].lps) {
				t.Errorf("jitter %d: session %d sampled %v (log-prob bits %x), then %v (%x)", jitter, i, out1[i].ids, out1[i].lps, out[i].ids, out[i].lps)
			}
		}
		if ps.Occupancy() != ps1.Occupancy() || ps.Steps != ps1.Steps {
			t.Errorf("jitter %d: occupancy %v over %d steps; first run %v over %d", jitter, ps.Occupancy(), ps.Steps, ps1.Occupancy(), ps1.Steps)
		}
		t.Logf("jitter %d: %d tool calls, %d of them late, stall %v", jitter, tools, late, ps.Stall)
	}
	t.Logf("jitter 1: %d late, stall %v, %d steps, occupancy %.2f", late1, ps1.Stall, ps1.Steps, ps1.Occupancy())
}

// TestToolWorkersQueueReturns: sessions 1 and 2 call a tool in the same step, with one modelled
// worker and ToolReturnSteps 3: session 1's call ends 3 steps later, session 2's, served after
// it, 6 steps later, as one sandbox worker would return them, while session 0 keeps decoding.
func TestToolWorkersQueueReturns(t *testing.T) {
	m, _ := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 3, MaxLen: 64, Buckets: []int{64}, Lockstep: true, ToolReturnSteps: 3, ToolWorkers: 1,
		Decode: func(ids []int32) string { return strings.Repeat("x", len(ids)) }})
	steps := traceSteps(g)
	base := g.Reserve(3)
	call := []Request{{Append: []int32{4}, MaxNew: 10, StopStrings: []string{"xx"}}, {Append: []int32{9}, MaxNew: 2}}
	turns := [][]Request{{{Append: []int32{3}, MaxNew: 14}}, call, call}
	runTickets(t, g, base, turns, nil)
	want := []string{"1/64: s0@0+1 s1@0+1 s2@0+1", "1/64: s0@1+1 s1@1+1 s2@1+1", // both calls made at the end of step 2
		"1/64: s0@2+1", "1/64: s0@3+1", "1/64: s0@4+1",
		"64/64: s1@2+2", "1/64: s0@5+1 s1@4+1", // session 1's call ended: 3 steps
		"1/64: s0@6+1",
		"64/64: s2@2+2", "1/64: s0@7+1 s2@4+1", // session 2's, after it on the one worker: 6 steps
		"1/64: s0@8+1", "1/64: s0@9+1", "1/64: s0@10+1", "1/64: s0@11+1", "1/64: s0@12+1", "1/64: s0@13+1"}
	if got := strings.Join(*steps, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// runTickets runs session i of turns on lockstep ticket base+i, each in its own goroutine, one
// request after another, and waits for all of them; before(i, turn), when given, runs before each
// request (the "tool" between turns).
func runTickets(t *testing.T, g *Generator, base int64, turns [][]Request, before func(i, turn int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i, reqs := range turns {
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
			for turn, req := range reqs {
				if before != nil {
					before(i, turn)
				}
				if _, err := s.Generate(ctx, req); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestDefaultChunksAndBuckets: a generator compiles prefill chunk 64 alone, on the CPU as on a GPU,
// and a chunk list given is kept; its attention lengths are the powers of two from 64 up to the
// slot length, at most five of them for long slots (from the power of two at or above a
// sixteenth), the slot length last even when it is not a power of two; a bucket list given is
// kept.
func TestDefaultChunksAndBuckets(t *testing.T) {
	m, _ := loadFixture(t, "qwen3-tiny")
	for _, tc := range []struct {
		name           string
		chunks, bucket []int
		wantC, wantB   []int
	}{
		{"defaults", nil, nil, []int{1, 64}, []int{64}},
		{"given", []int{32}, []int{32, 64}, []int{1, 32}, []int{32, 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGen(t, m, Config{Slots: 2, MaxLen: 64, Chunks: tc.chunks, Buckets: tc.bucket})
			if got := g.Config().Chunks; !slices.Equal(got, tc.wantC) {
				t.Errorf("chunks %v; want %v", got, tc.wantC)
			}
			if got := g.Config().Buckets; !slices.Equal(got, tc.wantB) {
				t.Errorf("buckets %v; want %v", got, tc.wantB)
			}
		})
	}
	for _, tc := range []struct {
		maxLen int
		want   []int
	}{
		{64, []int{64}},
		{512, []int{64, 128, 256, 512}},
		{1024, []int{64, 128, 256, 512, 1024}},
		{1500, []int{128, 256, 512, 1024, 1500}},
		{2048, []int{128, 256, 512, 1024, 2048}},
		{16384, []int{1024, 2048, 4096, 8192, 16384}},
		{32768, []int{2048, 4096, 8192, 16384, 32768}},
	} {
		if got := DefaultBuckets(tc.maxLen); !slices.Equal(got, tc.want) {
			t.Errorf("DefaultBuckets(%d) = %v; want %v", tc.maxLen, got, tc.want)
		}
	}
}
