package serve

import (
	"slices"
	"testing"

	"agentrl/engine/rollout"
)

// TestSeeds: a request without a seed samples with one derived from its trajectory's seed and
// its index (same trajectory seed, same tokens; another seed, other tokens); a request's own
// seed wins, unless the trajectory overrides it, and then its sampling policy wins too.
func TestSeeds(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{Sampling: Sampling{Temperature: 1}})
	// run answers one request on a fresh trajectory (finished, so the one slot is free again).
	run := func(o TrajectoryOptions, extra map[string]any) Turn {
		t.Helper()
		key := s.Begin("seeded", o)
		body := map[string]any{"max_tokens": 40, "ignore_eos": true}
		for k, v := range extra {
			body[k] = v
		}
		chatOK(t, base, key, task("What is 12 + 34?", body))
		traj, err := s.Finish(key)
		if err != nil {
			t.Fatal(err)
		}
		tr := traj.Turns[0]
		tr.Messages = nil
		return tr
	}
	a, b, c := run(TrajectoryOptions{Seed: 5}, nil), run(TrajectoryOptions{Seed: 5}, nil), run(TrajectoryOptions{Seed: 6}, nil)
	if a.Seed != requestSeed(5, 0) || a.Content != b.Content || a.Seed != b.Seed {
		t.Errorf("seed 5 twice: seeds %d, %d, replies %q, %q; want %d and the same reply", a.Seed, b.Seed, a.Content, b.Content, requestSeed(5, 0))
	}
	if c.Seed == a.Seed || c.Content == a.Content {
		t.Errorf("seeds 5 and 6 sampled %q and %q with seeds %d, %d; want other seeds and replies", a.Content, c.Content, a.Seed, c.Seed)
	}
	own5, own6 := run(TrajectoryOptions{Seed: 5}, map[string]any{"seed": 42}), run(TrajectoryOptions{Seed: 6}, map[string]any{"seed": 42})
	if own5.Seed != 42 || own6.Seed != 42 || own5.Content != own6.Content {
		t.Errorf("request seed 42 on two trajectories: seeds %d, %d, replies %q, %q; want 42 and the same reply", own5.Seed, own6.Seed, own5.Content, own6.Content)
	}
	greedy := &Sampling{Temperature: 0}
	o5 := run(TrajectoryOptions{Seed: 5, Sampling: greedy, Override: true}, map[string]any{"seed": 42, "temperature": 2})
	o6 := run(TrajectoryOptions{Seed: 6, Sampling: greedy, Override: true}, map[string]any{"seed": 42, "temperature": 2})
	if o5.Seed != requestSeed(5, 0) || o6.Seed != requestSeed(6, 0) || o5.Temperature != 0 || o5.Content != o6.Content {
		t.Errorf("overridden: seeds %d, %d, temperature %v, replies %q, %q; want the trajectories' seeds, greedy, and (greedy) the same reply",
			o5.Seed, o6.Seed, o5.Temperature, o5.Content, o6.Content)
	}
	if !slices.Equal([]float32{a.Temperature, own5.Temperature}, []float32{1, 1}) {
		t.Errorf("temperatures %v, %v; want the server's default 1", a.Temperature, own5.Temperature)
	}
}
