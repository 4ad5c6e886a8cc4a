package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/engine/model"
	"agentrl/engine/torchref"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// TestExportedCheckpointLoadsAndMatches: a model imported into the store and exported again loads
// in the model loader and gives the fixture's logits.
func TestExportedCheckpointLoadsAndMatches(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "runs.db")
	s, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ImportHF(fixture("qwen3-tiny-untied"), "imported", 3); err != nil {
		t.Fatal(err)
	}
	s.PutRun(store.Run{ID: "imported", Name: "import", Status: "finished"})
	s.Close()
	out := filepath.Join(t.TempDir(), "exported")
	if _, err := runCmd(t, "export", "--store", dbPath, "--run", "imported", out); err != nil {
		t.Fatal(err)
	}
	listing, err := runCmd(t, "runs", "--store", dbPath)
	if err != nil || !strings.Contains(listing, "imported") {
		t.Fatalf("runs: %q %v", listing, err)
	}
	data, _ := os.ReadFile(filepath.Join(fixture("qwen3-tiny-untied"), "golden.json"))
	var g goldenModel
	json.Unmarshal(data, &g)
	c := g.Cases[2]
	got, err := runCmd(t, "score", "--model", out, "--ids", idsArg(c.InputIDs), "--backend", "go")
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		NextTokenLogprobs []float64 `json:"next_token_logprobs"`
	}
	json.Unmarshal([]byte(got), &sc)
	for i, want := range c.NextTokenLogprobs {
		if math.Abs(sc.NextTokenLogprobs[i]-want) > 1e-4 {
			t.Fatalf("exported model: log-prob %d = %v; want %v", i, sc.NextTokenLogprobs[i], want)
		}
	}
	// In bf16, in shards of 64 KiB: the folder loads through its index, within bf16's rounding
	// (the GPU parity tolerance, 0.05).
	half := filepath.Join(t.TempDir(), "bf16")
	if _, err := runCmd(t, "export", "--store", dbPath, "--run", "imported", "--dtype", "bf16", "--shard-size", "64KiB", half); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(half, "model-*-of-*.safetensors")); len(m) < 2 {
		t.Errorf("--shard-size 64KiB wrote %d shards; want several", len(m))
	}
	got, err = runCmd(t, "score", "--model", half, "--ids", idsArg(c.InputIDs), "--backend", "go")
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(got), &sc)
	for i, want := range c.NextTokenLogprobs {
		if math.Abs(sc.NextTokenLogprobs[i]-want) > 0.05 {
			t.Fatalf("bf16 export: log-prob %d = %v; want %v within 0.05", i, sc.NextTokenLogprobs[i], want)
		}
	}
	// The same shards in PyTorch (the torch reference of engine/torchref, HF's parameter names, its
	// own safetensors reader taking every shard of the folder): the bf16 export loads outside this
	// project too, within bf16's rounding of transformers' golden log-probs.
	if python, skipped := torchref.Find(context.Background(), "/usr/bin/python3"); python == "" {
		t.Log("torch side skipped: " + skipped)
	} else {
		cfg, err := model.ReadConfig(half)
		if err != nil {
			t.Fatal(err)
		}
		spec := torchref.NewSpec(cfg, 1)
		spec.Weights, spec.CheckIDs = half, c.InputIDs
		r, err := torchref.Run(context.Background(), python, spec)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range c.NextTokenLogprobs {
			if math.Abs(r.CheckLogProbs[i]-want) > 0.05 {
				t.Fatalf("bf16 export in torch: log-prob %d = %v; want %v within 0.05", i, r.CheckLogProbs[i], want)
			}
		}
	}
	for _, args := range [][]string{
		{"--dtype", "int8"},
		{"--peft", "--dtype", "bf16"},
		{"--shard-size", "lots"},
	} {
		a := append([]string{"export", "--store", dbPath, "--run", "imported"}, args...)
		if _, err := runCmd(t, append(a, filepath.Join(t.TempDir(), "x"))...); err == nil {
			t.Errorf("export %v gave no error", args)
		}
	}

	// --model DIR: the same folder, exported straight from its files, is the stored checkpoint's
	// export byte for byte (one path writes both).
	direct := filepath.Join(t.TempDir(), "direct")
	if _, err := runCmd(t, "export", "--model", fixture("qwen3-tiny-untied"), "--dtype", "bf16", "--shard-size", "64KiB", direct); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(half, "*"))
	for _, f := range files {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(direct, filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("export --model: %s differs from the stored checkpoint's export (%v)", filepath.Base(f), err)
		}
	}
	for _, args := range [][]string{
		{"--model", fixture("qwen3-tiny-untied"), "--run", "imported"},
		{"--model", fixture("qwen3-tiny-untied"), "--peft"},
		{"--model", fixture("qwen3-tiny-untied"), "--step", "1"},
		{"--model", t.TempDir()},
	} {
		if _, err := runCmd(t, append(append([]string{"export"}, args...), filepath.Join(t.TempDir(), "x"))...); err == nil {
			t.Errorf("export %v gave no error", args)
		}
	}
}

// TestRecipeRunJSON runs the real binary path of `agentrl-tui RECIPE --model DIR --ui json` for one
// step on a tiny random model that uses the Qwen3 tokenizer, with the recipe shrunk through
// AGENTRL_* overrides, and checks the JSON Lines stream and the store.
func TestRecipeRunJSON(t *testing.T) {
	dir := t.TempDir()
	modelDir := filepath.Join(dir, "model")
	tokSrc, _ := os.ReadFile(filepath.Join(fixture("qwen3-tokenizer"), "tokenizer.json.gz"))
	os.MkdirAll(modelDir, 0o755)
	os.WriteFile(filepath.Join(modelDir, "tokenizer.json.gz"), tokSrc, 0o644)
	cfg := &model.Config{Family: model.Qwen3, VocabSize: 151669, HiddenSize: 16, IntermediateSize: 32, NumLayers: 1,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, DType: "float32"}
	if err := model.RandomParams(cfg, 1, 0.02).Save(modelDir, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AGENTRL_ROLLOUT_TASKS_PER_STEP": "2", "AGENTRL_ROLLOUT_GROUP_SIZE": "2", "AGENTRL_ROLLOUT_MAX_NEW_TOKENS": "12",
		"AGENTRL_ROLLOUT_MAX_TOTAL_TOKENS": "128", "AGENTRL_EVAL_HELDOUT_TASKS": "2", "AGENTRL_EVAL_N_SAMPLES": "2",
		"AGENTRL_EVAL_KS": "1,2", "AGENTRL_ENV_TASKS_TRAIN_SIZE": "8", "AGENTRL_ENV_TASKS_HELDOUT_SIZE": "4",
		"AGENTRL_EVAL_VALIDATION_TASKS": "2", "AGENTRL_EVAL_VALIDATION_SAMPLES": "2",
		// Two validation tasks of two samples move by 0.25 on one sample: early stopping (tested on
		// its own) would end a run this short on noise.
		"AGENTRL_EARLY_STOP_MAX_DROP": "0", "AGENTRL_EARLY_STOP_PATIENCE": "0",
	} {
		t.Setenv(k, v)
	}
	dbPath := filepath.Join(dir, "runs.db")
	out, err := runCmd(t, recipe("retool.yaml"), "--model", modelDir, "--max-steps", "1", "--ui", "json", "--store", dbPath, "--backend", "go")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	types := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var head struct {
			Type    string             `json:"type"`
			PassAtK map[string]float64 `json:"pass_at_k"`
		}
		if err := json.Unmarshal([]byte(line), &head); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		types[head.Type]++
		if head.Type == "eval" && len(head.PassAtK) != 2 {
			t.Errorf("eval line %s: want pass_at_k for k = 1, 2", line)
		}
	}
	for _, want := range []string{"run_start", "phase", "trajectory", "metrics", "eval", "run_end"} {
		if types[want] == 0 {
			t.Errorf("no %s event in the stream: %v", want, types)
		}
	}
	listing, err := runCmd(t, "runs", "--store", dbPath, "--json")
	if err != nil || !strings.Contains(listing, `"status":"finished"`) {
		t.Fatalf("runs after the run: %s %v", listing, err)
	}
	var runs []struct {
		ID          string `json:"id"`
		Checkpoints []int  `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(listing), &runs); err != nil || len(runs) != 1 || len(runs[0].Checkpoints) == 0 {
		t.Fatalf("runs --json: %s (%v)", listing, err)
	}
	// Resume reads the stored recipe and the latest checkpoint; with every step done it ends at once.
	out, err = runCmd(t, "resume", "--store", dbPath, "--ui", "json", runs[0].ID)
	if err != nil || !strings.Contains(out, `"type":"run_end","status":"finished"`) {
		t.Errorf("resume: %v\n%s", err, out)
	}
}

// TestBuiltinRecipeShortRun runs both shipped recipes end to end on the built-in model (no --model):
// the real tokenizer, model, generator, Starlark sandbox, hinter and trainer, for two short steps
// with an evaluation at the start and at the end.
func TestBuiltinRecipeShortRun(t *testing.T) {
	for k, v := range map[string]string{
		"AGENTRL_ROLLOUT_TASKS_PER_STEP": "2", "AGENTRL_ROLLOUT_GROUP_SIZE": "4", "AGENTRL_EVAL_HELDOUT_TASKS": "4",
		"AGENTRL_EVAL_N_SAMPLES": "2", "AGENTRL_EVAL_KS": "1,2", "AGENTRL_EVAL_EVERY": "2", "AGENTRL_CHECKPOINT_EVERY": "1",
		"AGENTRL_EVAL_VALIDATION_TASKS": "2", "AGENTRL_EVAL_VALIDATION_SAMPLES": "2",
		// Two validation tasks of two samples move by 0.25 on one sample: early stopping (tested on
		// its own) would end a run this short on noise.
		"AGENTRL_EARLY_STOP_MAX_DROP": "0", "AGENTRL_EARLY_STOP_PATIENCE": "0",
	} {
		t.Setenv(k, v)
	}
	dbPath := filepath.Join(t.TempDir(), "runs.db")
	final := map[string]string{} // recipe → its step-2 eval line
	for _, name := range []string{"retool.yaml", "retool-baseline.yaml"} {
		t.Run(name, func(t *testing.T) {
			out, err := runCmd(t, recipe(name), "--max-steps", "2", "--ui", "plain", "--store", dbPath, "--backend", "go")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "step 2  eval pass@1=") {
					final[name] = line
				}
			}
			for _, want := range []string{"step 0  eval pass@1=", "step 2  eval pass@1=", "step 2  eval change since step 0", "step 2  train", "step 2  checkpoint", "run finished"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in the run's output:\n%s", want, out)
				}
			}
			if name == "retool-baseline.yaml" && !strings.Contains(out, "hinted_share=0 ") {
				t.Errorf("the baseline recipe (hinter none) hinted trajectories:\n%s", out)
			}
		})
	}

	// compare sets the two runs side by side: its A and B columns are the runs' own step-2
	// pass@k, and A − B is their difference (the mean of per-task differences).
	listing, err := runCmd(t, "runs", "--store", dbPath, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var runs []store.RunSummary
	if err := json.Unmarshal([]byte(listing), &runs); err != nil || len(runs) != 2 {
		t.Fatalf("runs: %v\n%s", err, listing)
	}
	ids := map[string]string{}
	for _, r := range runs {
		ids[filepath.Base(r.Recipe)] = r.ID
	}
	out, err := runCmd(t, "compare", "--store", dbPath, ids["retool.yaml"], ids["retool-baseline.yaml"], "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var cmp struct {
		Step, Tasks int
		PassAtK     []struct {
			K       int
			A, B    float64
			AMinusB float64 `json:"a_minus_b"`
			SE      float64
		} `json:"pass_at_k"`
	}
	if err := json.Unmarshal([]byte(out), &cmp); err != nil || cmp.Step != 2 || cmp.Tasks != 4 || len(cmp.PassAtK) != 2 {
		t.Fatalf("compare: %v\n%s", err, out)
	}
	for _, r := range cmp.PassAtK {
		for name, v := range map[string]float64{"retool.yaml": r.A, "retool-baseline.yaml": r.B} {
			if want := fmt.Sprintf("pass@%d=%.3f", r.K, v); !strings.Contains(final[name], want) {
				t.Errorf("compare says %s for %s; its run printed %q", want, name, final[name])
			}
		}
		if math.Abs(r.AMinusB-(r.A-r.B)) > 1e-12 || r.SE < 0 {
			t.Errorf("pass@%d: A − B = %v ± %v for A %v, B %v", r.K, r.AMinusB, r.SE, r.A, r.B)
		}
	}
}

// TestCompareErrors: compare refuses what it cannot compare, and says which run and what to do.
func TestCompareErrors(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "runs.db")
	st, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		id, tasks string
		n         int
	}{{"a", "f1", 2}, {"b", "f2", 2}, {"c", "f1", 3}, {"old", "", 0}} {
		name := map[string]string{"a": "hybrid", "b": "twin", "c": "twin"}[r.id] // names as runs prints them
		if err := st.PutRun(store.Run{ID: r.id, Name: name}); err != nil {
			t.Fatal(err)
		}
		e := store.Eval{Step: 5, PassAtK: map[int]float64{1: 0.5}, Tasks: r.tasks}
		for range r.n {
			e.Counts = append(e.Counts, [2]int{2, 1})
		}
		if err := st.PutEval(r.id, e); err != nil {
			t.Fatal(err)
		}
	}
	// A run made by this version with evaluation off (eval.every: 0, eval.at_start: false).
	if err := st.PutRun(store.Run{ID: "noeval"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"a"}, "compare takes two run ids"},
		{[]string{"a", "noeval"}, "run noeval has no evaluation: a run evaluates its held-out tasks only with eval.every: N (after every N-th step) or eval.at_start: true"},
		{[]string{"noeval", "a", "--step", "5"}, "run noeval has no evaluation:"},
		{[]string{"a", "nope"}, "nope"},
		{[]string{"a", "b"}, "evaluated different held-out tasks (2 and 2 of them)"},
		{[]string{"a", "c"}, "evaluated different held-out tasks (2 and 3 of them)"},
		{[]string{"a", "old"}, "have no evaluation step in common with per-task counts"},
		{[]string{"a", "c", "--step", "4"}, "run a has no evaluation with per-task counts at step 4"},
	} {
		_, err := runCmd(t, append([]string{"compare", "--store", dbPath}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("compare %v: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
	out, err := runCmd(t, "compare", "--store", dbPath, "a", "a")
	if err != nil || !strings.Contains(out, "pass@1     0.500   0.500  +0.000 ± 0.000") {
		t.Errorf("a run against itself: %v\n%s", err, out)
	}
	// A run's name, as runs prints it beside the id, names it too when one run has it.
	if named, err := runCmd(t, "compare", "--store", dbPath, "hybrid", "a"); err != nil || !strings.HasPrefix(named, "A hybrid\n") ||
		!strings.Contains(named, "pass@1     0.500   0.500  +0.000 ± 0.000") {
		t.Errorf("compare by the name hybrid: %v\n%s\nwant the figures of run a:\n%s", err, named, out)
	}
	if _, err := runCmd(t, "compare", "--store", dbPath, "twin", "a"); err == nil || !strings.Contains(err.Error(), `2 runs are named "twin" (b, c): give one of their ids`) {
		t.Errorf("a name two runs share: %v", err)
	}
}

// TestCompareSeedsCommand: comma-separated run lists compare seed by seed and print the n-seed
// means; a per-run row and the summary come from the same stored counts. The seed-1 runs are in
// one store and the seed-2 runs in another (as runs made at the same time are): compare reads
// each run from the store given that has it, and names a run no store has.
func TestCompareSeedsCommand(t *testing.T) {
	dbPaths := []string{filepath.Join(t.TempDir(), "seed1.db"), filepath.Join(t.TempDir(), "seed2.db")}
	for i, ids := range [][]string{{"a1", "b1"}, {"a2", "b2"}} {
		st, err := store.Open(dbPaths[i], store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			correct := map[string]int{"a1": 2, "a2": 1, "b1": 1, "b2": 1}[id]
			if err := st.PutRun(store.Run{ID: id}); err != nil {
				t.Fatal(err)
			}
			for step, c := range map[int]int{0: 0, 5: correct} {
				e := store.Eval{Step: step, PassAtK: map[int]float64{1: float64(c) / 2}, Tasks: "f",
					Counts: [][2]int{{2, c}, {2, c}}}
				if err := st.PutEval(id, e); err != nil {
					t.Fatal(err)
				}
			}
		}
		st.Close()
	}
	dbPath := dbPaths[0]
	out, err := runCmd(t, "compare", "--store", dbPaths[0], "--store", dbPaths[1], "a1,a2", "b1,b2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Pair 1: 1.0 − 0.5; pair 2: 0.5 − 0.5. Mean +0.250, spread/√2 = 0.354/1.414 = 0.250.
	for _, want := range []string{
		"seed pair 1: A a1, B b1, step 5, 2 held-out tasks",
		"pass@1     1.000   0.500  +0.500 ± 0.000   +1.000 ± 0.000   +0.500 ± 0.000",
		"mean of 2 seeds ± spread / √2",
		"pass@1   0.750 ± 0.250    0.500 ± 0.000    +0.250 ± 0.250   +0.750 ± 0.250   +0.500 ± 0.000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("compare a1,a2 b1,b2: no line with %q in\n%s", want, out)
		}
	}
	if _, err := runCmd(t, "compare", "--store", dbPath, "a1,a2", "b1"); err == nil || !strings.Contains(err.Error(), "2 A runs and 1 B runs") {
		t.Errorf("unequal lists: %v", err)
	}
	if _, err := runCmd(t, "compare", "--store", dbPath, "a1,a2", "b1,b2"); err == nil || !strings.Contains(err.Error(), `no run "a2"`) {
		t.Errorf("a run in a store not given: %v; want an error naming it", err)
	}
	if _, err := runCmd(t, "compare", "--store", dbPaths[0]+","+dbPaths[1], "a1,a2", "b1,b2"); err != nil {
		t.Errorf("a comma-separated store list: %v", err)
	}
	// A run id in two of the stores given is refused, not read from the first.
	twin := filepath.Join(t.TempDir(), "twin.db")
	st, err := store.Open(twin, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutRun(store.Run{ID: "a2"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := runCmd(t, "compare", "--store", dbPaths[0], "--store", dbPaths[1], "--store", twin, "a1,a2", "b1,b2"); err == nil ||
		!strings.Contains(err.Error(), `run "a2" is in 2 of the stores given`) || !strings.Contains(err.Error(), "name the store before the id, as "+dbPaths[1]+":a2") {
		t.Errorf("a run id in two stores: %v; want it refused, naming both and the way to name one", err)
	}
	// Named with its store, the id is read from that store only: the same figures as without the twin.
	again, err := runCmd(t, "compare", "--store", dbPaths[0], "--store", dbPaths[1], "--store", twin, "a1,"+dbPaths[1]+":a2", "b1,b2")
	if err != nil {
		t.Fatalf("a run named with its store: %v", err)
	}
	if want := "pass@1   0.750 ± 0.250    0.500 ± 0.000    +0.250 ± 0.250   +0.750 ± 0.250   +0.500 ± 0.000"; !strings.Contains(again, want) {
		t.Errorf("a run named with its store: no line with %q in\n%s", want, again)
	}
	if _, err := runCmd(t, "compare", "--store", dbPaths[0], "--store", dbPaths[1], "--store", twin, "a1,"+twin+":a2", "b1,b2"); err == nil ||
		!strings.Contains(err.Error(), "no evaluation") {
		t.Errorf("a2 named in the twin store (which has no evaluations): %v; want the twin's a2 read", err)
	}
}

// TestRunsTableOneLinePerRun: the runs table keeps one line per run, its STATUS carrying only the
// first line of a multi-line stop reason, and heads the checkpoint column CHECKPOINT STEPS (it
// lists steps, not a count); --json keeps the whole stop reason.
func TestRunsTableOneLinePerRun(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "runs.db")
	st, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reason := "failed at step 3: out of memory\n  phase train, micro-batch 8\n  try memory.vram or a smaller micro-batch"
	if err := st.PutRun(store.Run{ID: "r1", Name: "multi", Status: "failed", StopReason: reason, TotalSteps: 5}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRun(store.Run{ID: "r2", Name: "plain", Status: "finished", TotalSteps: 5}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, err := runCmd(t, "runs", "--store", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("runs table has %d lines; want a header and one line per run:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[0], "CHECKPOINT STEPS") {
		t.Errorf("header %q: want a CHECKPOINT STEPS column", lines[0])
	}
	var multi string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "r1") {
			multi = l
		}
	}
	if !strings.Contains(multi, "failed (failed at step 3: out of memory …)") || strings.Contains(multi, "micro-batch") {
		t.Errorf("STATUS of the multi-line stop reason: %q", multi)
	}
	js, err := runCmd(t, "runs", "--store", dbPath, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var runs []store.RunSummary
	if err := json.Unmarshal([]byte(js), &runs); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == "r1" && r.StopReason != reason {
			t.Errorf("runs --json stop_reason %q; want the whole text %q", r.StopReason, reason)
		}
	}
}
