package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agentrl/engine/model"
)

// TestGOMLXBackendGoRunsRecipe: GOMLX_BACKEND=go (GoMLX's parallel op scheduler with its default,
// bounded worker pool) hung the binary for good in the first train step of the real recipe,
// silently. The hang needs the real sizes and depends on timing, so a tiny run cannot reproduce
// it; what this checks is that GOMLX_BACKEND=go runs the unbounded configuration that cannot
// deadlock, says so on the backend line, and takes a recipe through a train step to its end.
func TestGOMLXBackendGoRunsRecipe(t *testing.T) {
	for k, v := range map[string]string{
		"AGENTRL_ROLLOUT_TASKS_PER_STEP": "2", "AGENTRL_ROLLOUT_GROUP_SIZE": "4", "AGENTRL_EVAL_HELDOUT_TASKS": "2",
		"AGENTRL_EVAL_N_SAMPLES": "2", "AGENTRL_EVAL_KS": "1,2", "AGENTRL_CHECKPOINT_EVERY": "1",
		"AGENTRL_EVAL_VALIDATION_TASKS": "2", "AGENTRL_EVAL_VALIDATION_SAMPLES": "2",
	} {
		t.Setenv(k, v)
	}
	t.Setenv("GOMLX_BACKEND", "go")
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run([]string{recipe("retool.yaml"), "--max-steps", "1", "--ui", "plain", "--store", filepath.Join(t.TempDir(), "runs.db")},
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Builtin: os.DirFS(filepath.Join("..", model.BuiltinSourceDir))})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v\n%s\n%s", err, errb.String(), out.String())
		}
	case <-time.After(5 * time.Minute): // a deadlock, not a slow machine: the run takes seconds
		t.Fatal("GOMLX_BACKEND=go: the run did not end in 5 minutes (deadlocked?)")
	}
	for _, want := range []string{"step 1  train", "run finished"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if want := "GOMLX_BACKEND=go runs GoMLX's parallel op scheduler with a bounded worker pool"; !strings.Contains(errb.String(), want) ||
		!strings.Contains(errb.String(), "go:parallelism=-1") {
		t.Errorf("the backend line does not say what ran instead of GOMLX_BACKEND=go:\n%s", errb.String())
	}
}
