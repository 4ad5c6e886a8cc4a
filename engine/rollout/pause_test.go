package rollout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestPauseWhenLockstep: six sessions on three lockstep slots, of 4, 6 and 40 new tokens in
// turn; the rule pauses the phase once two sessions have ended. The two short sessions end
// whole; the running ones come back StopPaused with the tokens sampled so far, the ones never
// admitted get ErrPaused, and which is which, and how many tokens the paused ones had, is the
// same whatever the goroutines' timing (a jitter before each call). After PauseWhen(nil) the
// generator runs a phase whole.
func TestPauseWhenLockstep(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	g := newGen(t, m, Config{Slots: 3, MaxLen: 128, Buckets: []int{64, 128}, Chunks: []int{8}, Lockstep: true})
	lens := []int{4, 6, 40, 40, 4, 40}
	run := func(jitter uint64) string {
		var mu sync.Mutex
		ended := 0
		g.PauseWhen(func(int64) bool { mu.Lock(); defer mu.Unlock(); ended++; return ended == 2 })
		defer g.PauseWhen(nil)
		rng := rand.New(rand.NewPCG(jitter, 1))
		delays := make([]time.Duration, len(lens))
		for i := range delays {
			delays[i] = time.Duration(rng.Int64N(2000)) * time.Microsecond
		}
		base := g.Reserve(len(lens))
		out := make([]string, len(lens))
		var wg sync.WaitGroup
		for i, n := range lens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer g.Skip(base + int64(i))
				time.Sleep(delays[i])
				ctx := WithTicket(context.Background(), base+int64(i))
				s, err := g.Open(ctx)
				if errors.Is(err, ErrPaused) {
					out[i] = "not started"
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				res, err := s.Generate(ctx, Request{Append: cases[0].InputIDs, MaxNew: n, Sampling: Sampling{Temperature: 1, Seed: uint64(i)}})
				if err != nil {
					t.Error(err)
					return
				}
				out[i] = fmt.Sprintf("%s %d %v", res.Stop, len(res.IDs), res.IDs)
				if res.Stop == StopPaused { // a later request of a paused session does not run
					if again, err := s.Generate(ctx, Request{Append: []int32{1}, MaxNew: 2}); err != nil || again.Stop != StopPaused || len(again.IDs) != 0 {
						t.Errorf("request after the pause: %+v, %v; want StopPaused with no tokens", again, err)
					}
				}
			}()
		}
		wg.Wait()
		return fmt.Sprint(out)
	}
	first := run(1)
	t.Log(first)
	for _, want := range []string{"max_new 4 ", "max_new 6 ", "paused ", "not started"} {
		if !containsPrefix(first, want) {
			t.Fatalf("outcomes %s; want one starting %q", first, want)
		}
	}
	if again := run(2); again != first {
		t.Fatalf("the pause depends on timing:\n%s\n%s", first, again)
	}
	// A phase after the pause runs whole.
	s, err := g.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res, err := s.Generate(context.Background(), Request{Append: cases[0].InputIDs, MaxNew: 5}); err != nil || res.Stop != StopMaxNew {
		t.Fatalf("after PauseWhen(nil): %+v, %v; want 5 tokens", res, err)
	}
}

func containsPrefix(list, prefix string) bool {
	for i := 0; i+len(prefix) <= len(list); i++ {
		if list[i:i+len(prefix)] == prefix && (i == 1 || list[i-1] == ' ') {
			return true
		}
	}
	return false
}
