package engine

import (
	"path/filepath"
	"slices"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/recipes"
)

// builtinRun is a controller for a one-step run of the ReTool recipe on the built-in model
// (which, unlike the random tiny one, writes code the executor runs), without a store or
// evaluations; extra overrides recipe fields. It skips the test when the recipe's executor
// cannot start here (the python sandbox needs user namespaces).
func builtinRun(t *testing.T, extra map[string]string) (*Controller, chan event.Event) {
	t.Helper()
	return builtinRunWith(t, extra, func(*Options) {})
}

// builtinRunWith is builtinRun with the controller's options changed by opts before it is built.
func builtinRunWith(t *testing.T, extra map[string]string, opts func(*Options)) (*Controller, chan event.Event) {
	t.Helper()
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", model.BuiltinSourceDir)
	policy, err := model.Load(backend, dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reference, err := model.Load(backend, dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	over := noEval(map[string]string{"run.max_steps": "1", "rollout.tasks_per_step": "2", "rollout.group_size": "6",
		"env.sandbox.workers": "2", "checkpoint.every": "0"})
	for k, v := range extra {
		over[k] = v
	}
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: over})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.Event, 4096)
	o := Options{Recipe: r, RecipePath: "retool.yaml", RunID: "builtin", Policy: policy, Reference: reference, Tokenizer: tok, Events: events, Backend: "go"}
	opts(&o)
	c, err := New(o)
	if err != nil {
		if r.Env.Executor == "python" {
			t.Skipf("the python executor cannot start here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, events
}

// TestSameSeedSameRunPython runs one step of the default recipe with the python executor (a
// sandboxed interpreter per call: tens of milliseconds, the timing of each call its own) on the
// built-in model twice, and checks that the two runs sample the same trajectories token for
// token and compute the same metrics to the bit, as rollout.deterministic promises now that a
// trajectory running its tool leaves the batch instead of holding it. Timings are the only
// numbers allowed to differ.
func TestSameSeedSameRunPython(t *testing.T) {
	run := func() (p runPrint, tools int, gen event.Generation) {
		c, events := builtinRun(t, map[string]string{"env.executor": "python"})
		evs := runEvents(t, c, events)
		for _, e := range evs {
			switch v := e.(type) {
			case event.Trajectory:
				for _, turn := range v.Turns {
					if turn.ToolStatus != "" {
						tools++
					}
				}
			case event.Generation:
				gen = v
			}
		}
		return printOf(evs), tools, gen
	}
	p1, tools, g1 := run()
	p2, _, g2 := run()
	if len(p1.trajs) != 12 || tools < 6 {
		t.Fatalf("%d trajectories with %d tool calls; want 12 that use the tool", len(p1.trajs), tools)
	}
	sameRun(t, p1, p2)
	if g1.Steps != g2.Steps || g1.Occupancy != g2.Occupancy || !slices.Equal(g1.Trace, g2.Trace) {
		t.Errorf("the schedules differ: %d steps, occupancy %v, then %d, %v", g1.Steps, g1.Occupancy, g2.Steps, g2.Occupancy)
	}
	t.Logf("%d tool calls; tool stall %.1f%% and %.1f%%, occupancy %.2f", tools, 100*g1.ToolStallShare, 100*g2.ToolStallShare, g1.Occupancy)
}
