package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample is a file of testdata/data from this package's folder.
func sample(name string) string { return filepath.Join("..", "testdata", "data", name) }

// data inspect on each sample layout: the count, the fields used and the first task as the
// environment sees it, in JSON and in text.
func TestDataInspect(t *testing.T) {
	tests := []struct {
		path, recipe string
		tasks        int
		fields       map[string]string
		id, answer   string
		userTurn     string // its start
	}{
		{sample("dapo-verl.parquet"), "", 20, map[string]string{"prompt": "prompt", "answer": "reward_model.ground_truth", "id": "extra_info.index"},
			"5a3e0000-1000-4000-a000-00002b7c0000", "100", "Solve the following math problem step by step."},
		{sample("dapo-slime.jsonl"), "", 12, map[string]string{"prompt": "prompt", "answer": "label", "id": ""},
			"line-1", "720", "Solve the following math problem step by step."},
		{sample("aime2024"), "", 10, map[string]string{"prompt": "Problem", "answer": "Answer", "id": "ID"},
			"sample-I-1", "130", "Find the number of positive integers less than $1000$"},
		{sample("aime2024") + ":train", "templated", 10, map[string]string{"prompt": "Problem", "answer": "Answer", "id": "ID"},
			"sample-I-1", "130", "Solve, then give the final answer as \\boxed{N}.\n\nFind the number"},
	}
	dir := t.TempDir()
	templated := filepath.Join(dir, "templated.yaml")
	if err := os.WriteFile(templated, []byte("data:\n  prompt_template: \"Solve, then give the final answer as \\\\boxed{N}.\\n\\n{problem}\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.path+tt.recipe, func(t *testing.T) {
			args := []string{"data", "inspect", tt.path, "--json"}
			if tt.recipe != "" {
				args = append(args, "--recipe", templated)
			}
			out, err := runCmd(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var rep dataInspect
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if rep.Tasks != tt.tasks || rep.First.ID != tt.id || rep.First.Answer != tt.answer || !strings.HasPrefix(rep.First.UserTurn, tt.userTurn) {
				t.Errorf("got %d tasks, first %+v; want %d, id %q, answer %q, user turn %q…", rep.Tasks, rep.First, tt.tasks, tt.id, tt.answer, tt.userTurn)
			}
			for k, v := range tt.fields {
				if rep.Fields[k] != v {
					t.Errorf("field %s from %q; want %q", k, rep.Fields[k], v)
				}
			}
			text, err := runCmd(t, args[:3]...)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"tasks    " + itoa(tt.tasks), "answer ← " + tt.fields["answer"], "first task " + tt.id} {
				if !strings.Contains(text, want) {
					t.Errorf("text output lacks %q:\n%s", want, text)
				}
			}
		})
	}
	_, err := runCmd(t, "data", "inspect", sample("bad/wrong-type.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "wrong-type.jsonl:2: field answer: is an object {value}") {
		t.Errorf("bad file: %v; want the file, row and field", err)
	}
	if _, err := runCmd(t, "data", "inspect"); err == nil || !strings.Contains(err.Error(), "needs one PATH") {
		t.Errorf("no path: %v", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestDataInspectFixesAsTyped: the fix a missing-answer error names works in data inspect as
// typed, with and without a recipe; a conversation file is told apart from a task file and
// pointed at sft --data; --set without a recipe takes the data fields only.
func TestDataInspectFixesAsTyped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "solutions.jsonl")
	if err := os.WriteFile(path, []byte(`{"problem": "Compute $1+1$.", "solution": "2"}`+"\n"+`{"problem": "Compute $2+2$.", "solution": "4"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, "data", "inspect", path); err == nil || !strings.Contains(err.Error(), "name the answer's field in data.fields.answer") {
		t.Fatalf("no answer field: %v", err)
	}
	for _, args := range [][]string{
		{"data", "inspect", path, "--set", "data.fields.answer=solution", "--json"},
		{"data", "inspect", path, "--recipe", recipe("retool.yaml"), "--set", "data.fields.answer=solution", "--json"},
	} {
		out, err := runCmd(t, args...)
		if err != nil || !strings.Contains(out, `"tasks":2`) || !strings.Contains(out, `"answer":"solution"`) {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	if _, err := runCmd(t, "data", "inspect", path, "--set", "train.lr=1"); err == nil || !strings.Contains(err.Error(), "without --recipe, --set takes data.fields.PART=FIELD") {
		t.Errorf("--set of another field without a recipe: %v", err)
	}
	if _, err := runCmd(t, "data", "inspect", sample("retool-sft.jsonl")); err == nil ||
		!strings.Contains(err.Error(), "a conversation (a messages list), not a task") || !strings.Contains(err.Error(), "agentrl-tui sft --data") {
		t.Errorf("a conversation file: %v", err)
	}
}
