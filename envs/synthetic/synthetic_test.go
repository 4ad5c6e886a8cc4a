package synthetic

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"agentrl/envs/mathverify"
	"agentrl/envs/sandbox"
)

// TestSyntheticTasks: the splits are deterministic for a seed and disjoint, every reference
// program prints its task's answer in both executors, and a level past MaxLevel is refused.
func TestSyntheticTasks(t *testing.T) {
	s := Tasks{Levels: []int{1, 2, 3, 4, 5, NamedOpLevel}, Seed: 7}
	train, held, err := s.Split(200, 40)
	if err != nil {
		t.Fatal(err)
	}
	train2, held2, _ := s.Split(200, 40)
	prompts := map[string]bool{}
	for i, tk := range train {
		if tk.Prompt != train2[i].Prompt {
			t.Fatal("not deterministic for a seed")
		}
		prompts[tk.Prompt] = true
	}
	for i, tk := range held {
		if held2[i].Prompt != tk.Prompt {
			t.Fatal("held-out not deterministic")
		}
		if prompts[tk.Prompt] {
			t.Fatalf("held-out task %q is also in train", tk.Prompt)
		}
	}
	// Every reference solution runs in both executors and prints the answer.
	st := &sandbox.Starlark{}
	py, perr := sandbox.NewPython(sandbox.Limits{Timeout: 5 * time.Second}, false)
	for _, tk := range append(train[:30], held[:10]...) {
		if r := run(t, st, tk.Meta["code"]); r.Status != sandbox.StatusOK || !mathverify.Equal(r.Output, tk.Answer, mathverify.Options{}) {
			t.Errorf("starlark: %q printed %q (%s); answer %s", tk.Prompt, r.Output, r.Status, tk.Answer)
		}
		if perr == nil {
			if r := run(t, py, tk.Meta["code"]); r.Status != sandbox.StatusOK || !mathverify.Equal(r.Output, tk.Answer, mathverify.Options{}) {
				t.Errorf("python: %q printed %q (%s); answer %s", tk.Prompt, r.Output, r.Status, tk.Answer)
			}
		}
	}
	if _, _, err := (Tasks{Levels: []int{9}}).Split(1, 1); err == nil || !strings.Contains(err.Error(), "level 9") {
		t.Errorf("bad level: %v", err)
	}
}

// TestValidationTasks: validation tasks are disjoint from the training and held-out ones,
// deterministic for the seed, and asking for them leaves both splits as they were.
func TestValidationTasks(t *testing.T) {
	s := Tasks{Levels: []int{0, 1}, Seed: 7}
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
	if _, err := (Tasks{Levels: []int{0}, Seed: 7}).Validation(20000, train); err == nil || !strings.Contains(err.Error(), "lower eval.validation_tasks") {
		t.Errorf("more validation tasks than the levels have: %v", err)
	}
}

// TestNamedOpLevel: each word of NamedOps gives the hand-computed answer of its operation for the
// same operands, the one wording only differs in the word, and Reword keeps numbers, answer and
// program while refusing what is not a named-operation problem.
func TestNamedOpLevel(t *testing.T) {
	want := map[string]string{"sum": "60", "product": "611", "difference": "34", "remainder": "8", "quotient": "3"}
	for _, op := range NamedOps {
		if op.Op != "+" && op.Op != "*" && op.Op != "-" && op.Op != "%" && op.Op != "//" {
			t.Fatalf("operation %q", op.Op)
		}
		if got := strconv.FormatInt(namedOpValue(op.Op, 47, 13), 10); got != want[op.Word] {
			t.Errorf("the %s of 47 and 13 = %s; want %s", op.Word, got, want[op.Word])
		}
	}
	train, held, err := Tasks{Levels: []int{NamedOpLevel}, Seed: 3}.Split(400, 60)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	st := &sandbox.Starlark{}
	for _, tk := range append(train, held...) {
		word := tk.Meta["op_word"]
		seen[word]++
		var a, b int64
		var w string
		if n, err := fmt.Sscanf(tk.Prompt, "What is the %s of %d and %d?", &w, &a, &b); n != 3 || err != nil || w != word || a < b || b < 10 || a > 99 {
			t.Fatalf("%q: %d fields, %v; word %q, operands %d and %d", tk.Prompt, n, err, w, a, b)
		}
		if r := run(t, st, tk.Meta["code"]); r.Status != sandbox.StatusOK || !mathverify.Equal(r.Output, tk.Answer, mathverify.Options{}) {
			t.Errorf("%q: %q printed %q; answer %s", tk.Prompt, tk.Meta["code"], r.Output, tk.Answer)
		}
		for _, to := range append([]string{"zibo"}, "sum", "remainder") {
			p := strings.Replace(tk.Prompt, "the "+word+" of", "the "+to+" of", 1)
			r, ok := Reword(tk, to)
			if ok == heldOut(p) {
				t.Errorf("Reword(%q, %q): ok %v, yet %q held out: %v", tk.Prompt, to, ok, p, heldOut(p))
			}
			if ok && (r.Prompt != p || r.Answer != tk.Answer || r.Meta["code"] != tk.Meta["code"] || r.Meta["op_word"] != to || tk.Meta["op_word"] != word) {
				t.Errorf("Reword(%q, %q) = %q %v, original now %v", tk.Prompt, to, r.Prompt, r.Meta, tk.Meta)
			}
		}
	}
	for _, op := range NamedOps {
		if seen[op.Word] < 40 {
			t.Errorf("%q drawn %d times in 460 problems; want about 92", op.Word, seen[op.Word])
		}
	}
	arith, _, _ := Tasks{Levels: []int{0}, Seed: 3}.Split(1, 0)
	if _, ok := Reword(arith[0], "zibo"); ok {
		t.Errorf("Reword(%q) took a problem without a named operation", arith[0].Prompt)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		w := NonceWord(rng)
		if len(w) < 5 || len(w) > 7 || slices.ContainsFunc(NamedOps, func(o NamedOp) bool { return o.Word == w }) {
			t.Fatalf("NonceWord gave %q", w)
		}
	}
}

// run executes code once in a new session of ex.
func run(t *testing.T, ex sandbox.Executor, code string) sandbox.Result {
	t.Helper()
	s, err := ex.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.Run(context.Background(), code)
}
