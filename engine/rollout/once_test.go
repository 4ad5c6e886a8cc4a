package rollout

import (
	"context"
	"slices"
	"testing"
)

// TestGenerateOnce: one greedy request through GenerateOnce's own one-slot generator gives HF's
// greedy continuation of the fixture case, stopped by MaxNew.
func TestGenerateOnce(t *testing.T) {
	m, cases := loadFixture(t, "qwen3-tiny")
	c := cases[0]
	res, err := GenerateOnce(context.Background(), m, nil, c.InputIDs, len(c.GreedyContinuation), Sampling{Temperature: 0, TopP: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, c.GreedyContinuation) || res.Stop != StopMaxNew {
		t.Errorf("got %v (stop %q); want %v (stop %q)", res.IDs, res.Stop, c.GreedyContinuation, StopMaxNew)
	}
}
