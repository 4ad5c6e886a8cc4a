package ledger

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

// TestRemoteRollout: with rollout.engines the rollout phase holds no inference copy, KV cache or
// sampler (only what waits for the update), there is no eval phase, and the reference, PRM and
// train phases are the plan's without engines; whatever still generates here (a policy PRM, the
// self hinter) keeps the local engine, and then the plan is the one without engines.
func TestRemoteRollout(t *testing.T) {
	const engines = "serve http://10.0.0.5:8001,serve http://10.0.0.6:8001"
	for _, tc := range []struct {
		name  string
		over  map[string]string
		want  bool   // Settings.RemoteRollout
		local string // Settings.LocalEngine, a part of it
	}{
		{name: "engines", over: map[string]string{"rollout.engines": engines}, want: true},
		{name: "no engines"},
		{name: "engines and a longer evaluation", over: map[string]string{"rollout.engines": engines, "eval.max_total_tokens": "2048"}, want: true},
		{name: "engines and a PRM on the reference", over: map[string]string{"rollout.engines": engines, "prm.kind": "model", "prm.model": "reference", "hinter.kind": "none"}, want: true},
		{name: "engines and a PRM on the policy", over: map[string]string{"rollout.engines": engines, "prm.kind": "model", "prm.model": "policy", "hinter.kind": "none"},
			local: "prm.model: policy"},
		{name: "engines and the self hinter", over: map[string]string{"rollout.engines": engines, "hinter.kind": "self"}, local: "hinter.kind: self"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			over := map[string]string{"rollout.max_total_tokens": "1024"}
			maps.Copy(over, tc.over)
			r := loadRecipe(t, over)
			p, err := PlanFor(Request{Recipe: r, ShapeName: "qwen3-0.6b", VRAM: "24GiB"})
			if err != nil {
				t.Fatal(err)
			}
			delete(over, "rollout.engines")
			lp, err := PlanFor(Request{Recipe: loadRecipe(t, over), ShapeName: "qwen3-0.6b", VRAM: "24GiB"})
			if err != nil {
				t.Fatal(err)
			}
			st := p.Settings
			if st.RemoteRollout != tc.want || !strings.Contains(st.LocalEngine, tc.local) || (tc.local == "") != (st.LocalEngine == "") {
				t.Fatalf("remote rollout %v, local engine %q; want %v and %q", st.RemoteRollout, st.LocalEngine, tc.want, tc.local)
			}
			if !p.Fits {
				t.Fatalf("does not fit: %s", p.Reason)
			}
			if !tc.want { // the local plan, unchanged
				if p.KVSlots != lp.KVSlots || p.Total != lp.Total || !maps.Equal(p.Rollout.Holds, lp.Rollout.Holds) || p.KVSlots == 0 {
					t.Errorf("%d slots, peak %d, rollout %v; want the local plan's %d, %d, %v", p.KVSlots, p.Total, p.Rollout.Holds, lp.KVSlots, lp.Total, lp.Rollout.Holds)
				}
				return
			}
			for _, n := range []string{InferenceWeights, KVCache, SamplerWorkspace} {
				if b, ok := p.Rollout.Holds[n]; ok {
					t.Errorf("rollout holds %s (%d bytes); want none: the engines generate", n, b)
				}
				if _, ok := p.Components[n]; ok && (n != SamplerWorkspace || st.PRM == nil) {
					t.Errorf("components list %s; want it left out", n)
				}
			}
			want := RuntimeReserve + p.Rollout.Holds[MasterWeights] + p.Rollout.Holds[OptimizerMoments]
			if p.KVSlots != 0 || p.Rollout.Bytes != want || p.Rollout.Bytes >= lp.Rollout.Bytes {
				t.Errorf("%d KV slots, rollout %d bytes (%v); want 0 slots and %d (the runtime and what waits), below the local %d",
					p.KVSlots, p.Rollout.Bytes, p.Rollout.Holds, want, lp.Rollout.Bytes)
			}
			if lp.Eval.Bytes == 0 && tc.over["eval.max_total_tokens"] != "" {
				t.Errorf("the local plan has no eval phase for eval.max_total_tokens 2048: the case tests nothing")
			}
			if p.Eval.Bytes != 0 || st.Eval != nil {
				t.Errorf("eval phase %d bytes; want none: evaluations generate on the engines", p.Eval.Bytes)
			}
			if p.MicroBatch != lp.MicroBatch || !maps.Equal(p.Train.Holds, lp.Train.Holds) {
				t.Errorf("train %v at micro-batch %d; want the local plan's %v at %d", p.Train.Holds, p.MicroBatch, lp.Train.Holds, lp.MicroBatch)
			}
			for _, n := range []string{ReferenceWeights, Activations} {
				if p.Reference.Holds[n] != lp.Reference.Holds[n] {
					t.Errorf("reference phase %s %d; want the local plan's %d", n, p.Reference.Holds[n], lp.Reference.Holds[n])
				}
			}
			if lp.PRM.Bytes > 0 && (p.PRMSlots != lp.PRMSlots || p.PRM.Holds[PRMKVCache] != lp.PRM.Holds[PRMKVCache] || p.PRM.Holds[ReferenceWeights] == 0) {
				t.Errorf("PRM phase %v with %d slots; want the local plan's %v with %d", p.PRM.Holds, p.PRMSlots, lp.PRM.Holds, lp.PRMSlots)
			}
			table := p.Table()
			for _, w := range []string{"rollout: remote: the 2 engines of rollout.engines generate", "fits: no KV slots (rollout on the engines)"} {
				if !strings.Contains(table, w) {
					t.Errorf("table lacks %q:\n%s", w, table)
				}
			}
			if strings.Contains(table, " kv_cache ") || strings.Contains(table, "inference_weights") {
				t.Errorf("table shows the rollout engine's parts:\n%s", table)
			}
			var js struct {
				KVSlots       int  `json:"kv_slots"`
				Engines       int  `json:"engines"`
				RemoteRollout bool `json:"remote_rollout"`
			}
			data, _ := json.Marshal(p)
			if err := json.Unmarshal(data, &js); err != nil || js.KVSlots != 0 || js.Engines != 2 || !js.RemoteRollout {
				t.Errorf("JSON %s; want kv_slots 0, engines 2, remote_rollout true", data)
			}
		})
	}
	// The line for an engine kept local.
	r := loadRecipe(t, map[string]string{"rollout.engines": engines, "hinter.kind": "self"})
	p, err := PlanFor(Request{Recipe: r, ShapeName: "qwen3-0.6b", VRAM: "24GiB"})
	if err != nil {
		t.Fatal(err)
	}
	if w := "but the local engine stays for hinter.kind: self (the hints): its inference copy and KV cache are counted"; !strings.Contains(p.Table(), w) {
		t.Errorf("table lacks %q:\n%s", w, p.Table())
	}
}

// TestRemoteRolloutHandComputed: on the tiny shape with everything on the device, remote rollout
// is the runtime, the float32 master weights and the two float32 moments, and evaluation-only
// plans ignore it (an evaluation's one generator).
func TestRemoteRolloutHandComputed(t *testing.T) {
	st := Settings{ComputeBytes: 2, SeqLen: 10, MaxKVSlots: 4, MicroBatch: 1, Offload: OffloadDevice, Attention: AttentionDense,
		RemoteRollout: true, Engines: 1}
	p, err := Compute(tiny(), st, 0)
	if err != nil {
		t.Fatal(err)
	}
	params := tiny().Params()
	if want := RuntimeReserve + params*4 + 2*params*4; p.Rollout.Bytes != want || p.KVSlots != 0 {
		t.Errorf("rollout %d bytes, %d slots; want %d (runtime + master + moments) and 0", p.Rollout.Bytes, p.KVSlots, want)
	}
	st.EvalOnly = true
	p, err = Compute(tiny(), st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Settings.RemoteRollout || p.KVSlots != 4 || p.Rollout.Holds[KVCache] == 0 {
		t.Errorf("evaluation only: remote %v, %d slots; want the local generator's 4 slots", p.Settings.RemoteRollout, p.KVSlots)
	}
}
