package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/attention"
	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/recipes"
	"agentrl/store"
)

// attentionRun builds a one-step run of the tiny model with model.attention asked and probe
// standing in for the backend's fused attention check (nil: the go backend's own answer).
func attentionRun(t *testing.T, asked string, probe attention.Probe) (*Controller, chan event.Event, *model.Model, error) {
	t.Helper()
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(tok)
	policy, err := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reference, err := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	over := noEval(map[string]string{"run.max_steps": "1", "rollout.tasks_per_step": "2", "rollout.group_size": "2", "rollout.max_turns": "1",
		"rollout.max_new_tokens": "8", "rollout.max_total_tokens": "96", "env.tasks.train_size": "8", "env.tasks.heldout_size": "4", "eval.heldout_tasks": "2", "eval.n_samples": "2", "eval.ks": "1,2",
		"eval.validation_tasks": "2", "eval.validation_samples": "2", "checkpoint.every": "0", "model.attention": asked})
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: over})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	events := make(chan event.Event, 1024)
	c, err := New(Options{Recipe: r, RecipePath: "retool.yaml", RunID: "attention", Policy: policy, Reference: reference,
		Tokenizer: tok, Store: st, Events: events, Backend: "go", ModelFiles: map[string][]byte{"config.json": []byte("{}")}, hooks: hooks{fusedProbe: probe}})
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, events, policy, err
}

// TestAttentionOnTheCPU: the recipe's model.attention reaches the models the run trains and
// scores with, and the run's start event says which path and why. The go backend has no fused
// attention: auto says so and runs; fused is refused with the reason; auto where the fused
// program fails to compile (a probe standing in for the GPU's) falls back to chunked and says why;
// chunked and dense run a step as asked.
func TestAttentionOnTheCPU(t *testing.T) {
	failing := func(compute.Backend, *model.Config, dtypes.DType, int) (string, error) {
		return "", errors.New("INTERNAL: no cuDNN engine for this graph")
	}
	for _, tc := range []struct {
		name, asked string
		probe       attention.Probe
		run         bool
		want        model.AttentionKind
		line        string // part of RunStart.Attention, or of New's error
		wantErr     bool
	}{
		{name: "auto on the go backend", asked: "auto", want: model.AttentionAuto, line: "(auto: the go backend has no fused attention op"},
		{name: "auto, fused fails to compile", asked: "auto", probe: failing, run: true, want: model.AttentionChunked,
			line: "chunked, blocks of 256 queries (auto: the fused attention program failed to compile for a 96-token sequence, so chunked: INTERNAL: no cuDNN engine"},
		{name: "fused on the go backend", asked: "fused", line: "model.attention: fused: the go backend has no fused attention op", wantErr: true},
		{name: "chunked", asked: "chunked", run: true, want: model.AttentionChunked, line: "chunked (model.attention: chunked)"},
		{name: "dense", asked: "dense", run: true, want: model.AttentionDense, line: "dense (model.attention: dense)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, events, policy, err := attentionRun(t, tc.asked, tc.probe)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.line) {
					t.Fatalf("New: %v; want an error containing %q", err, tc.line)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := policy.Options().Attention; got != tc.want {
				t.Errorf("the policy attends %q; want %q", got, tc.want)
			}
			if !strings.Contains(c.attention, tc.line) {
				t.Errorf("attention line %q; want it to contain %q", c.attention, tc.line)
			}
			if !tc.run {
				return
			}
			var start event.RunStart
			var trained bool
			for _, e := range runEvents(t, c, events) {
				switch v := e.(type) {
				case event.RunStart:
					start = v
				case event.StepMetrics:
					trained = trained || v.Step == 1
				}
			}
			if start.Attention != c.attention {
				t.Errorf("RunStart.Attention %q; want %q", start.Attention, c.attention)
			}
			if !trained {
				t.Error("the run trained no step")
			}
		})
	}
}
