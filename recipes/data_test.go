package recipes

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDataSection reads data.eval as a list in its written order (and from an override), and
// reports what is wrong with the section by file, line and field.
func TestDataSection(t *testing.T) {
	dir := t.TempDir()
	train := filepath.Join(dir, "train.jsonl")
	if err := os.WriteFile(train, []byte(`{"problem":"1+1","answer":"2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := "data:\n  train: " + train + ":train\n  eval:\n    - {name: zeta, path: " + train + ", size: 3}\n    - {name: alpha, path: " + train + "}\n" +
		"  fields: {Answer: reward_model.ground_truth}\n  prompt_template: 'Q: {problem}'\n  train_size: 5\n"
	r, msg := loadInline(t, good, Options{IgnoreEnv: true})
	if msg != "" {
		t.Fatal(msg)
	}
	want := []EvalSet{{Name: "zeta", Path: train, Size: 3}, {Name: "alpha", Path: train}}
	if !reflect.DeepEqual(r.Data.Eval, want) || r.Data.Fields["Answer"] != "reward_model.ground_truth" || r.Data.TrainSize != 5 || !r.Data.Shuffle {
		t.Errorf("data %+v; want the sets %+v in order, the field mapping, train_size 5, shuffle on", r.Data, want)
	}
	r, msg = loadInline(t, good, Options{IgnoreEnv: true, Overrides: map[string]string{"data.eval": "b=" + train + "@7,a=" + train}})
	if msg != "" {
		t.Fatal(msg)
	}
	if want := []EvalSet{{Name: "b", Path: train, Size: 7}, {Name: "a", Path: train}}; !reflect.DeepEqual(r.Data.Eval, want) {
		t.Errorf("override: %+v; want %+v", r.Data.Eval, want)
	}
	if d, _ := loadInline(t, "run:\n  seed: 2\n", Options{IgnoreEnv: true}); d.Hash() == r.Hash() {
		t.Errorf("a recipe with data hashes as one without")
	}

	tests := []struct{ name, yaml, want string }{
		{"eval is not a list", "data:\n  train: " + train + "\n  eval: {aime: x}\n",
			"bad.yaml:3: data.eval: is a mapping; want a list of sets such as [{name: aime24, path: data/aime24, size: 0}]"},
		{"unknown key in a set", "data:\n  train: " + train + "\n  eval:\n    - {name: a, path: " + train + ", n: 3}\n",
			"bad.yaml:4: data.eval[0].n: unknown field; a set has name, path and size"},
		{"size not a number", "data:\n  train: " + train + "\n  eval:\n    - {name: a, path: " + train + ", size: all}\n",
			`bad.yaml:4: data.eval[0].size: "all" is a string; want an integer`},
		{"missing files", "data:\n  train: nowhere.parquet\n  eval:\n    - {name: a, path: gone:test}\n",
			"bad.yaml:2: data.train: \"nowhere.parquet\" does not exist (relative paths are relative to the current directory)\n" +
				"bad.yaml:3: data.eval: \"gone\" does not exist (relative paths are relative to the current directory)"},
		{"names", "data:\n  train: " + train + "\n  eval:\n    - {name: a b, path: " + train + "}\n    - {path: " + train + "}\n",
			"bad.yaml:3: data.eval: data.eval[0]: name \"a b\": want letters, digits, '.', '_' and '-' (such as aime24)\n" +
				"bad.yaml:3: data.eval: data.eval[1]: name \"\": want letters, digits, '.', '_' and '-' (such as aime24)"},
		{"eval without train", "data:\n  eval:\n    - {name: a, path: " + train + "}\n",
			"bad.yaml:2: data.eval: is set but data.train is empty; give the training data in data.train (evaluation sets go with it)"},
		{"template without the problem", "data:\n  train: " + train + "\n  prompt_template: Solve it.\n",
			`bad.yaml:3: data.prompt_template: "Solve it." has no {problem}; the template must say where the problem goes`},
		{"unknown part in fields", "data:\n  train: " + train + "\n  fields: {solution: x}\n",
			`bad.yaml:3: data.fields: "solution" is not a part of a task; name the field of id, prompt, answer or split`},
		{"two sources", "env:\n  tasks:\n    source: jsonl\n    jsonl: {path: " + train + "}\ndata:\n  train: " + train + "\n",
			"bad.yaml:6: data.train: \"" + train + "\" and env.tasks.source jsonl both give the tasks; keep one (data.train reads JSONL too)"},
	}
	// plan and doctor load with NoDataFiles: a recipe is planned before its datasets are there.
	if r, msg := loadInline(t, "data:\n  train: nowhere.parquet\n  eval:\n    - {name: a, path: gone:test}\n", Options{IgnoreEnv: true, NoDataFiles: true}); msg != "" || r.Data.Train != "nowhere.parquet" {
		t.Errorf("NoDataFiles: %q, %+v; want the recipe loaded with its paths as written", msg, r)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got := loadInline(t, tt.yaml, Options{IgnoreEnv: true})
			if got = strings.ReplaceAll(got, dir+string(filepath.Separator), ""); got != strings.ReplaceAll(tt.want, dir+string(filepath.Separator), "") {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
