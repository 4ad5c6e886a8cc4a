package engine

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/recipes"
)

// TestHostPlanSizesCPURuns: on the CPU a real model's run takes its KV slots and micro-batch from
// the same plan that sets its heap limit, as a GPU run takes them from its device's; the built-in
// model keeps the recipe's own sizes. Before, a Qwen3-0.6B run set its heap limit for the plan's
// micro-batch 3 and then trained 8-row micro-batches, and was killed for memory in its update.
// Only config.json is read (ledger.ReadShape), so the folders hold nothing else.
func TestHostPlanSizesCPURuns(t *testing.T) {
	if device.HostBudget() == 0 {
		t.Skip("this machine's memory cannot be read (/proc/meminfo): the go backend has no budget to plan in")
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	t.Setenv("GOMEMLIMIT", "")
	config := func(hidden, layers, vocab int) string {
		dir := t.TempDir()
		c := `{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": ` + strconv.Itoa(hidden) +
			`, "intermediate_size": ` + strconv.Itoa(3*hidden) + `, "num_hidden_layers": ` + strconv.Itoa(layers) +
			`, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": ` + strconv.Itoa(vocab) +
			`, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true}`
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true,
		Overrides: map[string]string{"model.dtype": "f32", "rollout.max_total_tokens": "256", "backend.kind": "go"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		dir      string
		wantPlan bool
	}{
		{"Qwen3-0.6B's shape", config(1024, 28, 151936), true},
		{"a small model (under device.SequentialOpsFrom)", config(256, 2, 4096), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			l := Launch{Recipe: r, Log: &log}
			choice, hostPlan, err := openBackend(l, tc.dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer choice.Backend.Finalize()
			plan, err := memoryPlan(l, choice, hostPlan, nil, tc.dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.wantPlan {
				if plan != nil {
					t.Errorf("a plan (micro-batch %d) for a model the recipes' own sizes are measured on", plan.MicroBatch)
				}
				return
			}
			rc := *r
			rc.Backend.Kind = device.Go
			want, err := ledger.PlanFor(ledger.Request{Recipe: &rc, ModelDir: tc.dir, DetectedVRAM: device.HostBudget()})
			if err != nil {
				t.Fatal(err)
			}
			if plan == nil {
				t.Fatalf("no plan for a real model on the CPU; log:\n%s", log.String())
			}
			if plan.MicroBatch != want.MicroBatch || plan.KVSlots != want.KVSlots || plan.Budget != want.Budget {
				t.Errorf("run sized %d slots, micro-batch %d in %d bytes; plan says %d, %d in %d", plan.KVSlots, plan.MicroBatch, plan.Budget,
					want.KVSlots, want.MicroBatch, want.Budget)
			}
			for _, line := range []string{"heap limit: ", "memory plan: " + strconv.Itoa(want.KVSlots) + " KV slots, micro-batch " + strconv.Itoa(want.MicroBatch)} {
				if !strings.Contains(log.String(), line) {
					t.Errorf("log lacks %q:\n%s", line, log.String())
				}
			}
		})
	}
}
