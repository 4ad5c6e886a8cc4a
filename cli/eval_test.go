package cli

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"agentrl/store"
)

// shrinkEval shrinks the shipped recipe through AGENTRL_* for a short run on the built-in model:
// two held-out tasks of two samples each, evaluated at the start and after every step.
func shrinkEval(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{
		"AGENTRL_ROLLOUT_TASKS_PER_STEP": "2", "AGENTRL_ROLLOUT_GROUP_SIZE": "2", "AGENTRL_EVAL_HELDOUT_TASKS": "2",
		"AGENTRL_EVAL_N_SAMPLES": "2", "AGENTRL_EVAL_KS": "1,2", "AGENTRL_EVAL_EVERY": "1", "AGENTRL_CHECKPOINT_EVERY": "1",
		"AGENTRL_EVAL_VALIDATION_TASKS": "2", "AGENTRL_EVAL_VALIDATION_SAMPLES": "2",
		"AGENTRL_EARLY_STOP_MAX_DROP": "0", "AGENTRL_EARLY_STOP_PATIENCE": "0",
	} {
		t.Setenv(k, v)
	}
}

// storedRun is the one run of kind in the store at path other than those in not.
func storedRun(t *testing.T, path, kind string, not ...string) store.Run {
	t.Helper()
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs()
	if err != nil {
		t.Fatal(err)
	}
	var found []store.Run
	for _, r := range runs {
		if r.Kind == kind && !strings.Contains(strings.Join(not, " "), r.ID) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("runs of kind %q: %+v; want one new one", kind, found)
	}
	return found[0]
}

// evalAt is run's evaluation of step in the store at path.
func evalAt(t *testing.T, path, run string, step int) store.Eval {
	t.Helper()
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evals, err := st.Evals(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evals {
		if e.Step == step {
			return e
		}
	}
	t.Fatalf("run %s has no evaluation of step %d: %+v", run, step, evals)
	return store.Eval{}
}

// TestEvalCommand: `eval` of the built-in model gives a training run's step-0 evaluation of the
// same tasks and samples, per task; `eval` of that run's step-1 checkpoint gives its step-1
// evaluation; both are listed as evaluation runs, compared against the training run, and keep
// their trajectories; --samples leaves out the ks it cannot estimate.
func TestEvalCommand(t *testing.T) {
	shrinkEval(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	if out, err := runCmd(t, recipe("retool.yaml"), "--max-steps", "1", "--ui", "plain", "--store", db, "--backend", "go"); err != nil {
		t.Fatalf("training run: %v\n%s", err, out)
	}
	train := storedRun(t, db, store.KindTrain)

	out, err := runCmd(t, "eval", recipe("retool.yaml"), "--store", db, "--backend", "go", "--ui", "json")
	if err != nil {
		t.Fatalf("eval of the built-in model: %v\n%s", err, out)
	}
	for _, want := range []string{`"type":"run_start"`, `"evaluates":"model built-in, heldout"`, `"type":"progress","step":0,"phase":"eval"`,
		`"compile_cache":"compile cache: none (the go backend compiles a program in milliseconds; the cache is XLA's)"`,
		`"type":"trajectory"`, `"eval":true`, `"type":"eval","step":0`, `"type":"run_end","status":"finished","reason":"evaluated model built-in on heldout"`, `"eval_only":true`} {
		if !strings.Contains(out, want) {
			t.Errorf("eval --ui json lacks %s:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"type":"ledger"`) && (strings.Contains(line, "reference weights") || strings.Contains(line, "master weights")) {
			t.Errorf("an evaluation holds more than the inference weights and KV cache: %s", line)
		}
	}
	model := storedRun(t, db, store.KindEval)
	got, want := evalAt(t, db, model.ID, 0), evalAt(t, db, train.ID, 0)
	if !reflect.DeepEqual(got.Counts, want.Counts) || !reflect.DeepEqual(got.PassAtK, want.PassAtK) || got.Tasks != want.Tasks {
		t.Errorf("eval of the built-in model: counts %v, pass@k %v; the training run's step 0: counts %v, pass@k %v", got.Counts, got.PassAtK, want.Counts, want.PassAtK)
	}
	if model.Evaluated != "model built-in" || model.EvalSet != "heldout" || model.Status != "finished" {
		t.Errorf("evaluation run record %+v", model)
	}

	out, err = runCmd(t, "eval", recipe("retool.yaml"), "--store", db, "--run", train.ID, "--step", "1", "--backend", "go", "--ui", "plain")
	if err != nil {
		t.Fatalf("eval of a checkpoint: %v\n%s", err, out)
	}
	for _, want := range []string{"evaluation run ", "checkpoint " + train.ID + " step 1, heldout", "step 1  eval pass@1=", "run finished: evaluated checkpoint " + train.ID + " step 1 on heldout"} {
		if !strings.Contains(out, want) {
			t.Errorf("eval --ui plain lacks %q:\n%s", want, out)
		}
	}
	ckpt := storedRun(t, db, store.KindEval, model.ID)
	got, want = evalAt(t, db, ckpt.ID, 1), evalAt(t, db, train.ID, 1)
	if !reflect.DeepEqual(got.Counts, want.Counts) || got.Tasks != want.Tasks {
		t.Errorf("eval of the step-1 checkpoint: counts %v; the training run's step 1: %v", got.Counts, want.Counts)
	}

	listing, err := runCmd(t, "runs", "--store", db)
	if err != nil || strings.Count(listing, "evaluation finished: ") != 2 || !strings.Contains(listing, "eval@1") {
		t.Errorf("runs: %v\n%s", err, listing)
	}
	for _, tc := range []struct {
		a, b       string
		step       string
		stepA, stB int
	}{
		{model.ID, train.ID, "", 0, 0},
		{train.ID, ckpt.ID, "", 1, 1},
		{train.ID, model.ID, "1", 1, 0}, // the trained step against the model it started from
	} {
		args := []string{"compare", "--store", db, tc.a, tc.b, "--json"}
		if tc.step != "" {
			args = append(args, "--step", tc.step)
		}
		out, err := runCmd(t, args...)
		if err != nil {
			t.Errorf("compare %s %s: %v\n%s", tc.a, tc.b, err, out)
			continue
		}
		var c struct {
			Step, Tasks int
			StepB       int `json:"step_b"`
			PassAtK     []struct {
				K       int
				AMinusB float64 `json:"a_minus_b"`
			} `json:"pass_at_k"`
		}
		if err := json.Unmarshal([]byte(out), &c); err != nil || c.Step != tc.stepA || c.StepB != tc.stB || c.Tasks != 2 || len(c.PassAtK) != 2 {
			t.Errorf("compare %s %s: %v\n%s; want step %d against %d, 2 tasks, 2 ks", tc.a, tc.b, err, out, tc.stepA, tc.stB)
		}
		if tc.stepA == tc.stB {
			for _, r := range c.PassAtK {
				if r.AMinusB != 0 {
					t.Errorf("compare %s %s: pass@%d differs by %v; the same evaluation", tc.a, tc.b, r.K, r.AMinusB)
				}
			}
		}
	}
	out, err = runCmd(t, "compare", "--store", db, model.ID, train.ID)
	if err != nil || !strings.Contains(out, "step 0, 2 held-out tasks") {
		t.Errorf("compare, plain: %v\n%s", err, out)
	}

	st, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for run, steps := range map[string]int{train.ID: 8, model.ID: 4, ckpt.ID: 4} { // 2 tasks × 2 samples per evaluation
		if recs, err := st.EvalTrajectories(run, -1); err != nil || len(recs) != steps {
			t.Errorf("run %s: %d evaluation trajectories stored (%v); want %d", run, len(recs), err, steps)
		}
	}
	st.Close()

	out, err = runCmd(t, "eval", recipe("retool.yaml"), "--store", db, "--backend", "go", "--ui", "json", "--samples", "1", "--eval-set", "validation")
	if err != nil || !strings.Contains(out, `"pass_at_k":{"1":`) || strings.Contains(out, `"2":`) || !strings.Contains(out, "on validation") {
		t.Errorf("eval --samples 1 --eval-set validation: %v; want pass@1 alone, on the validation tasks\n%s", err, out)
	}
}

// TestEvalBadArguments: a command line that cannot say what to evaluate is refused with the
// flag at fault and what to give instead.
func TestEvalBadArguments(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	s, err := store.Open(db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ImportHF(fixture("qwen3-tiny-untied"), "imported", 3); err != nil {
		t.Fatal(err)
	}
	s.PutRun(store.Run{ID: "imported", Name: "import", Status: "finished"})
	s.PutRun(store.Run{ID: "bare", Name: "bare", Status: "finished"})
	s.Close()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no recipe", []string{"eval"}, []string{"give one recipe"}},
		{"--model and --run", []string{"--model", dir, "--store", db, "--run", "imported", "--step", "3"}, []string{"--model and --run", "give --model DIR for a folder, or --store PATH --run RUN --step N"}},
		{"--run without --step", []string{"--store", db, "--run", "imported"}, []string{"--run imported needs --step N", "one of 3"}},
		{"a step without a checkpoint", []string{"--store", db, "--run", "imported", "--step", "7"}, []string{"--step 7: run imported has no checkpoint at step 7; give --step one of 3"}},
		{"a run without checkpoints", []string{"--store", db, "--run", "bare", "--step", "1"}, []string{"--run bare has no checkpoint to evaluate"}},
		{"an unknown run", []string{"--store", db, "--run", "nope", "--step", "1"}, []string{"--run nope", "agentrl-tui runs --store"}},
		{"--step without --run", []string{"--step", "3"}, []string{"--step 3 names a checkpoint step, but no --run; add --run RUN"}},
		{"--run without --store", []string{"--run", "imported", "--step", "3"}, []string{"--run imported needs --store PATH"}},
		{"an unknown set", []string{"--store", filepath.Join(dir, "eval.db"), "--backend", "go", "--ui", "plain", "--eval-set", "gsm8k"},
			[]string{`--eval-set "gsm8k" is not an evaluation set of this recipe; give one of heldout, validation, e.g. --eval-set heldout`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name != "no recipe" {
				args = append([]string{"eval", recipe("retool.yaml")}, args...)
			}
			out, err := runCmd(t, args...)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
