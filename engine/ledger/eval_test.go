package ledger

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"agentrl/recipes"
)

// TestEvalPhase: an evaluation longer than rollout's context is a phase of its own that holds the
// inference weights and a KV cache of its own length in place of rollout's, with the most slots
// that fit; without it (or in an evaluation-only plan) there is no such phase.
func TestEvalPhase(t *testing.T) {
	tinySt := func(e *EvalSettings, evalOnly bool) Settings {
		return Settings{ComputeBytes: 2, SeqLen: 10, KVSlots: 3, MicroBatch: 1, Offload: OffloadDevice, Reference: true,
			Attention: AttentionDense, Eval: e, EvalOnly: evalOnly}
	}
	big := func(evalLen int) Settings {
		st := realistic() // 4096-token rollout
		st.Eval = &EvalSettings{SeqLen: evalLen, MaxKVSlots: 480}
		return st
	}
	sh4b, _ := KnownShape("qwen3-4b")
	for _, tc := range []struct {
		name      string
		shape     Shape
		st        Settings
		budget    int64
		phases    []string
		evalKV    int64 // the eval phase's KV cache; -1: not checked
		evalSlots int   // -1: the most that fit (checked against one more)
		fits      bool
		reason    string
	}{
		{name: "no eval phase", shape: tiny(), st: tinySt(nil, false), phases: []string{"rollout", "reference", "train"}, fits: true},
		// 2 (K and V) · 2 layers · 1 kv head · head_dim 4 · 20 tokens · 5 slots · 2 bytes = 3200.
		{name: "own context, no budget", shape: tiny(), st: tinySt(&EvalSettings{SeqLen: 20, MaxKVSlots: 5}, false),
			phases: []string{"rollout", "eval", "reference", "train"}, evalKV: 3200, evalSlots: 5, fits: true},
		{name: "evaluation-only plan", shape: tiny(), st: tinySt(&EvalSettings{SeqLen: 20, MaxKVSlots: 5}, true), phases: []string{"rollout"}, fits: true},
		{name: "4B, 32K evaluation in 96 GiB", shape: sh4b, st: big(32768), budget: 96 << 30,
			phases: []string{"rollout", "eval", "reference", "train"}, evalKV: -1, evalSlots: -1, fits: true},
		{name: "4B, 1M-token evaluation", shape: sh4b, st: big(1 << 20), budget: 96 << 30,
			phases: []string{"rollout", "eval", "reference", "train"}, evalKV: -1, reason: "the eval phase needs", fits: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compute(tc.shape, tc.st, tc.budget)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, ph := range p.phases() {
				names = append(names, ph.Name)
			}
			if !reflect.DeepEqual(names, tc.phases) || p.Fits != tc.fits || !strings.Contains(p.Reason, tc.reason) {
				t.Fatalf("phases %v, fits %v (%s); want %v, fits %v, a reason saying %q", names, p.Fits, p.Reason, tc.phases, tc.fits, tc.reason)
			}
			if !slices.Contains(tc.phases, "eval") {
				if p.Eval.Bytes != 0 || p.EvalSlots != 0 || p.Components[EvalKVCache] != 0 {
					t.Errorf("eval phase %d bytes, %d slots, KV %d; want none", p.Eval.Bytes, p.EvalSlots, p.Components[EvalKVCache])
				}
				return
			}
			ev := p.Eval
			if _, ok := ev.Holds[KVCache]; ok || ev.Holds[InferenceWeights] != p.Rollout.Holds[InferenceWeights] {
				t.Errorf("eval phase holds %v; want the inference weights and its own KV cache, not rollout's", ev.Holds)
			}
			if tc.evalKV >= 0 && ev.Holds[EvalKVCache] != tc.evalKV {
				t.Errorf("eval KV cache %d; want %d", ev.Holds[EvalKVCache], tc.evalKV)
			}
			if p.Total < ev.Bytes || p.Components[EvalKVCache] != ev.Holds[EvalKVCache] {
				t.Errorf("total %d, component %d; want the peak to count the eval phase (%d) and its KV cache listed", p.Total, p.Components[EvalKVCache], ev.Bytes)
			}
			switch {
			case !tc.fits:
				if p.EvalSlots != 0 {
					t.Errorf("%d eval slots; want 0 when not even one fits", p.EvalSlots)
				}
			case tc.evalSlots >= 0:
				if p.EvalSlots != tc.evalSlots {
					t.Errorf("%d eval slots; want %d", p.EvalSlots, tc.evalSlots)
				}
			default: // the most that fit: within the budget, and one more would not be
				more := tc.st
				e := *more.Eval
				e.MaxKVSlots = p.EvalSlots + 1
				more.Eval = &e
				q, _ := Compute(tc.shape, more, tc.budget)
				if p.EvalSlots < 1 || ev.Bytes > tc.budget || q.EvalSlots != p.EvalSlots {
					t.Errorf("%d eval slots (%d bytes of %d); with room for one more it chose %d; want the most that fit", p.EvalSlots, ev.Bytes, tc.budget, q.EvalSlots)
				}
			}
		})
	}
}

// TestEvalPhaseFromRecipe: eval.max_total_tokens longer than rollout's gives the plan its eval
// phase (the reference recipe: 32,768 against 16,384, shown in the table and the JSON); 0 or a
// shorter one gives none; an evaluation-only plan sizes its one phase at the evaluation's length.
func TestEvalPhaseFromRecipe(t *testing.T) {
	seed, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool-qwen3-4b.yaml"), recipes.Options{IgnoreEnv: true, NoDataFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		r        *recipes.Recipe
		evalOnly bool
		evalLen  int // Settings.Eval's length; 0: none
		seqLen   int
	}{
		{name: "reference recipe", r: seed, evalLen: 32768, seqLen: 16384},
		{name: "reference recipe, evaluation only", r: seed, evalOnly: true, seqLen: 32768},
		{name: "retool.yaml", r: loadRecipe(t, nil), seqLen: 512},
		{name: "shorter evaluation", r: loadRecipe(t, map[string]string{"eval.max_total_tokens": "256"}), seqLen: 512},
		{name: "longer evaluation", r: loadRecipe(t, map[string]string{"eval.max_total_tokens": "1024"}), evalLen: 1024, seqLen: 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanFor(Request{Recipe: tc.r, ShapeName: "qwen3-4b", VRAM: "96GiB", EvalOnly: tc.evalOnly})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if p.Settings.Eval != nil {
				got = p.Settings.Eval.SeqLen
			}
			if got != tc.evalLen || p.Settings.SeqLen != tc.seqLen || (p.Eval.Bytes > 0) != (tc.evalLen > 0) {
				t.Fatalf("eval phase of %d tokens (%d bytes), sequences of %d; want %d and %d", got, p.Eval.Bytes, p.Settings.SeqLen, tc.evalLen, tc.seqLen)
			}
			if tc.evalLen == 0 {
				return
			}
			table := p.Table()
			n := strconv.Itoa(tc.evalLen)
			for _, want := range []string{"(evaluation: " + n + ")", "eval_kv_cache", "× " + n + " tokens: the evaluation's context", "evaluation slots of " + n + " tokens"} {
				if !strings.Contains(table, want) {
					t.Errorf("table lacks %q:\n%s", want, table)
				}
			}
			var js struct {
				Phases    map[string]int64 `json:"phases"`
				EvalSlots int              `json:"eval_slots"`
			}
			data, _ := json.Marshal(p)
			if err := json.Unmarshal(data, &js); err != nil || js.Phases["eval"] != p.Eval.Bytes || js.EvalSlots != p.EvalSlots || js.EvalSlots < 1 {
				t.Errorf("JSON phases %v, eval_slots %d (%v); want the eval phase's %d bytes and %d slots", js.Phases, js.EvalSlots, err, p.Eval.Bytes, p.EvalSlots)
			}
		})
	}
}
