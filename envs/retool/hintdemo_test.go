package retool

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"agentrl/envs"
	"agentrl/envs/sandbox"
)

// TestFlawedAttemptHint: every flaw gets the rules hinter's bridge thought for it, the name error
// quoting the interpreter's own message, and the hint sits where the controller puts hints.
func TestFlawedAttemptHint(t *testing.T) {
	s, err := (&sandbox.Starlark{}).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	task := envs.Task{ID: "t", Prompt: "What is 77 + 87?", Answer: "164"}
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]string{"wrong_copy": "copy the printed number, 164,", "computed_else": "computed something else",
		"guessed": "Do not guess", "name_error": "undefined_name", "no_answer": "Finish by giving", "format": "Write code between",
		"timeout": "ran too long"}
	for _, flaw := range Flaws {
		h, err := FlawedAttemptHint(context.Background(), task, flaw, s, rng)
		if err != nil || !strings.Contains(h, want[flaw]) {
			t.Errorf("%s: %q, %v; want a hint containing %q", flaw, h, err, want[flaw])
		}
	}
	if _, err := FlawedAttemptHint(context.Background(), task, "typo", s, rng); err == nil {
		t.Error("an unknown flaw gave no error")
	}
	if got := WithHint("Q?", "Do it."); got != "Hint: Do it.\n\nQ?" {
		t.Errorf("WithHint: %q", got)
	}
}
