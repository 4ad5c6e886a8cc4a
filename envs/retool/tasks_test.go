package retool

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"agentrl/envs"
)

// TestValidationTasks: validation tasks are disjoint from the training and held-out ones,
// deterministic for the seed, and asking for them leaves both splits as they were.
func TestValidationTasks(t *testing.T) {
	s := Synthetic{Levels: []int{0, 1}, Seed: 7}
	train, held, err := s.Split(512, 128)
	if err != nil {
		t.Fatal(err)
	}
	val, err := s.Validation(64, train)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.Validation(64, train)
	inTrain, inHeld := map[string]bool{}, map[string]bool{}
	for _, tk := range train {
		inTrain[tk.Prompt] = true
	}
	for _, tk := range held {
		inHeld[tk.Prompt] = true
	}
	seen := map[string]bool{}
	for i, tk := range val {
		switch {
		case inTrain[tk.Prompt], inHeld[tk.Prompt]:
			t.Errorf("validation task %q is also a training or held-out task", tk.Prompt)
		case seen[tk.Prompt]:
			t.Errorf("validation task %q twice", tk.Prompt)
		case again[i].Prompt != tk.Prompt:
			t.Fatal("validation tasks not deterministic for a seed")
		}
		seen[tk.Prompt] = true
	}
	train2, held2, _ := s.Split(512, 128)
	if train2[511].Prompt != train[511].Prompt || held2[127].Prompt != held[127].Prompt {
		t.Error("the splits changed")
	}
	if _, err := (Synthetic{Levels: []int{0}, Seed: 7}).Validation(20000, train); err == nil || !strings.Contains(err.Error(), "lower eval.validation_tasks") {
		t.Errorf("more validation tasks than the levels have: %v", err)
	}
}

// TestFlawedAttemptHint: every flaw gets the rules hinter's bridge thought for it, the name error
// quoting the interpreter's own message, and the hint sits where the controller puts hints.
func TestFlawedAttemptHint(t *testing.T) {
	s, err := (&Starlark{}).NewSession()
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
