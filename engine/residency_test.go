package engine

import (
	"path/filepath"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// A run whose master weights, AdamW moments and reference copy wait in host memory between
// phases (memory.*_offload: host; the reference always) trains exactly the run that keeps them on
// the device; and 8-bit moments go into the checkpoint as I8 and a resumed run continues exactly.
func TestOffloadedRunsMatch(t *testing.T) {
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(tok)
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run := func(id string, over map[string]string, resume *store.Checkpoint, stopAfter int) map[int]map[event.Metric]float64 {
		all := map[string]string{"run.max_steps": "2", "rollout.tasks_per_step": "2", "rollout.group_size": "2",
			"rollout.max_turns": "2", "rollout.max_new_tokens": "10", "rollout.max_total_tokens": "128", "eval.every": "0",
			"checkpoint.every": "1", "checkpoint.keep_best": "0", "early_stop.patience": "0", "early_stop.max_drop": "0",
			"env.tasks.train_size": "8", "env.tasks.heldout_size": "4", "eval.heldout_tasks": "2", "eval.n_samples": "2",
			"eval.ks": "1,2", "eval.at_start": "false", "train.lr": "0.01"}
		for k, v := range over {
			all[k] = v
		}
		r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: all})
		if err != nil {
			t.Fatal(err)
		}
		policy, _ := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
		reference, _ := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
		events := make(chan event.Event, 1024)
		c, err := New(Options{Recipe: r, RunID: id, Policy: policy, Reference: reference, Tokenizer: tok, Store: st, Events: events, Resume: resume})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if l := c.ledger(); over["memory.master_offload"] == "host" && (l.Components["master weights (host)"] == 0 || l.Components["master weights"] != 0) {
			t.Errorf("%s: the engine's ledger before rollout: %v; want the master weights on the host", id, l.Components)
		}
		if l := c.ledger(); l.Components["reference weights"] != 0 {
			t.Errorf("%s: the reference weights are on the device during rollout: %v", id, l.Components)
		}
		return runStoppedAfter(t, c, events, stopAfter, nil)
	}
	same := func(what string, a, b map[int]map[event.Metric]float64) {
		for _, k := range []event.Metric{"loss", "reward_mean", "grad_norm", "logprob_diff_max", "sync_diff_max"} {
			if a[2][k] != b[2][k] {
				t.Errorf("%s: step 2 %s %v and %v; want identical", what, k, a[2][k], b[2][k])
			}
		}
	}
	onDevice := run("device", map[string]string{"memory.master_offload": "device", "memory.optimizer_offload": "device"}, nil, 0)
	onHost := run("host", map[string]string{"memory.master_offload": "host", "memory.optimizer_offload": "host"}, nil, 0)
	same("offloaded vs resident", onDevice, onHost)

	bits8 := map[string]string{"train.optimizer_bits": "8", "memory.master_offload": "host"}
	straight := run("8bit", bits8, nil, 0)
	run("8bit-stopped", bits8, nil, 1)
	cp, err := st.LoadCheckpoint("8bit-stopped", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Moments) == 0 || cp.Moments[0].DType != safetensors.I8 {
		t.Fatalf("the 8-bit run's checkpoint holds %d moments (first %v); want I8", len(cp.Moments), cp.Moments)
	}
	same("8-bit resumed vs uninterrupted", straight, run("8bit-stopped", bits8, cp, 0))
}
