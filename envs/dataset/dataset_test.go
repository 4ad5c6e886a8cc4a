package dataset

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"agentrl/envs"
	"agentrl/recipes"
)

// Each sample reads with no mapping: the count, the fields used and the first task as the
// environment sees it.
func TestReadSamples(t *testing.T) {
	tests := []struct {
		spec        string
		tasks       int
		used        Fields
		repeats     int
		id, answer  string
		promptStart string
	}{
		{sampleDir + "/dapo-verl.parquet", 20, Fields{ID: "extra_info.index", Prompt: "prompt", Answer: "reward_model.ground_truth"}, 2,
			DAPOIndex(0), "100", DAPOBefore + "Let $x$ and $y$"},
		{sampleDir + "/dapo-slime.jsonl", 12, Fields{Prompt: "prompt", Answer: "label"}, 0,
			"line-1", "720", DAPOBefore + "Find the sum of the interior angles"},
		{sampleDir + "/aime2024", 10, Fields{ID: "ID", Prompt: "Problem", Answer: "Answer"}, 0,
			"sample-I-1", "130", "Find the number of positive integers less than $1000$"},
		{sampleDir + "/aime2024:train", 10, Fields{ID: "ID", Prompt: "Problem", Answer: "Answer"}, 0,
			"sample-I-1", "130", "Find the number of positive integers less than $1000$"},
		{sampleDir + "/aime2024/data/train-00000-of-00001.parquet", 10, Fields{ID: "ID", Prompt: "Problem", Answer: "Answer"}, 0,
			"sample-I-1", "130", "Find the number of positive integers less than $1000$"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Read(tt.spec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if chat := strings.HasPrefix(tt.promptStart, DAPOBefore); len(s.Tasks) != tt.tasks || s.Repeats != tt.repeats || s.Used != tt.used || s.Chat != chat {
				t.Errorf("got %d tasks, %d repeats, fields %+v, chat %v; want %d, %d, %+v, %v", len(s.Tasks), s.Repeats, s.Used, s.Chat, tt.tasks, tt.repeats, tt.used, chat)
			}
			first := s.Tasks[0]
			if first.ID != tt.id || first.Answer != tt.answer || !strings.HasPrefix(first.Prompt, tt.promptStart) {
				t.Errorf("first task %+v; want id %q, answer %q, prompt starting %q", first, tt.id, tt.answer, tt.promptStart)
			}
		})
	}
}

// The AIME sample's answers are int64 and read back exactly ("12", not "12.0" or "012").
func TestNumericAnswers(t *testing.T) {
	s, err := Read(sampleDir+"/aime2024", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, t := range s.Tasks {
		got = append(got, t.Answer)
	}
	want := []string{"130", "12", "84", "375", "55", "103", "15", "30", "110", "364"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answers %v; want %v", got, want)
	}
	for _, tt := range []struct {
		v    any
		want string
	}{{int64(-7), "-7"}, {int32(42), "42"}, {0.5, "0.5"}, {3.0, "3"}, {[]any{"72"}, "72"}, {"\\frac{1}{2}", "\\frac{1}{2}"}} {
		if got, err := scalarText(tt.v, true); err != nil || got != tt.want {
			t.Errorf("scalarText(%#v) = %q, %v; want %q", tt.v, got, err, tt.want)
		}
	}
}

// A template and a mapping: the user turn is the template around the problem; a system
// message is left out and counted.
func TestTemplateAndMapping(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "chat.jsonl")
	write(t, f, `{"uid": 7, "conv": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "old"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "Compute $6 \\times 7$."}], "meta": {"gold": 42}}`+"\n")
	fields, err := FieldsFrom(map[string]string{"ID": "uid", "prompt": "conv", "answer": "meta.gold"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(f, Options{Fields: fields, Template: "Problem: {problem}\nAnswer with \\boxed{}."})
	if err != nil {
		t.Fatal(err)
	}
	want := envs.Task{ID: "7", Prompt: "Problem: Compute $6 \\times 7$.\nAnswer with \\boxed{}.", Answer: "42"}
	if !reflect.DeepEqual(s.Tasks[0], want) || s.SystemDropped != 1 || s.Problems[0] != "Compute $6 \\times 7$." {
		t.Errorf("got %+v (system dropped %d); want %+v, 1", s.Tasks[0], s.SystemDropped, want)
	}
	if _, err := FieldsFrom(map[string]string{"solution": "x"}); err == nil {
		t.Errorf("an unknown part in the mapping was accepted")
	}
}

// Each bad file's error names the file, the row and the field, and what would fix it.
func TestBadFiles(t *testing.T) {
	bad := sampleDir + "/bad/"
	tests := []struct {
		spec   string
		fields Fields
		want   []string
	}{
		{bad + "empty.jsonl", Fields{}, []string{bad + "empty.jsonl: an empty file"}},
		{bad + "empty.parquet", Fields{}, []string{bad + "empty.parquet: an empty file"}},
		{bad + "no-answer.jsonl", Fields{}, []string{bad + "no-answer.jsonl:3: no answer", "answer, label, reward_model.ground_truth", "the row has: problem, solution", "data.fields.answer"}},
		{bad + "no-answer.jsonl", Fields{Answer: "gold"}, []string{bad + "no-answer.jsonl:1: no field \"gold\"", "data.fields.answer"}},
		{bad + "wrong-type.jsonl", Fields{}, []string{bad + "wrong-type.jsonl:2: field answer: is an object {value}; want text or a number", "data.fields.answer"}},
		{bad + "no-user.jsonl", Fields{}, []string{bad + "no-user.jsonl:1: field prompt: the 1 chat messages have no user message", "data.fields.prompt"}},
		{bad + "not-json.jsonl", Fields{}, []string{bad + "not-json.jsonl:2: not a JSON object"}},
		{bad + "no-answer-column.parquet", Fields{}, []string{bad + "no-answer-column.parquet: no answer column", "the columns are problem", "data.fields.answer"}},
		{bad + "no-answer-column.parquet", Fields{Prompt: "question"}, []string{bad + "no-answer-column.parquet: no column \"question\" for the prompt", "data.fields.prompt"}},
		{bad + "not-parquet.parquet", Fields{}, []string{bad + "not-parquet.parquet: not a readable Parquet file"}},
		{sampleDir + "/aime2024:test", Fields{}, []string{"no file of split \"test\"", "train"}},
		{sampleDir + "/dapo-slime.jsonl:test", Fields{}, []string{sampleDir + "/dapo-slime.jsonl:1: field split, extra_info.split: has no split field", "data.fields.split"}},
		{sampleDir + "/missing.parquet", Fields{}, []string{"missing.parquet: no such file or folder"}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimPrefix(tt.spec, sampleDir+"/"), func(t *testing.T) {
			_, err := Read(tt.spec, Options{Fields: tt.fields})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to say %q", err, w)
				}
			}
		})
	}
}

// A folder of several splits needs one chosen, by file name or by a split field.
func TestSplits(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "data", "train.jsonl"), `{"problem": "a", "answer": "1"}`+"\n"+`{"problem": "b", "answer": "2"}`+"\n")
	write(t, filepath.Join(dir, "data", "test.jsonl"), `{"problem": "c", "answer": "3"}`+"\n")
	if _, err := Read(dir, Options{}); err == nil || !strings.Contains(err.Error(), "holds the splits test, train; choose one with") {
		t.Errorf("a folder of two splits read whole: %v", err)
	}
	for split, n := range map[string]int{"train": 2, "test": 1} {
		s, err := Read(dir+":"+split, Options{})
		if err != nil || len(s.Tasks) != n {
			t.Errorf("%s: %v, %d tasks; want %d", split, err, len(s.Tasks), n)
		}
	}
	mixed := filepath.Join(dir, "mixed.jsonl")
	write(t, mixed, `{"problem": "a", "answer": "1", "extra_info": {"split": "train"}}`+"\n"+`{"problem": "b", "answer": "2", "extra_info": {"split": "test"}}`+"\n")
	s, err := Read(mixed+":test", Options{})
	if err != nil || len(s.Tasks) != 1 || s.Tasks[0].Answer != "2" {
		t.Errorf("split by field: %v %+v; want the one test row", err, s)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Shuffling follows run.seed; validation, held-out and train_size are taken as asked.
func TestLoadShuffleAndSizes(t *testing.T) {
	base := Plan{Train: sampleDir + "/dapo-verl.parquet", Validation: 3, Heldout: 4, TrainSize: 5}
	ids := func(ts []envs.Task) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	load := func(p Plan) *Tasks {
		t.Helper()
		got, err := Load(&p)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	plain := load(base)
	if len(plain.Validation) != 3 || len(plain.Heldout) != 4 || len(plain.Train) != 5 || plain.Validation[0].ID != DAPOIndex(0) || plain.Train[0].ID != DAPOIndex(7) {
		t.Errorf("unshuffled: validation %v, held-out %v, train %v; want 3, 4, 5 in file order", ids(plain.Validation), ids(plain.Heldout), ids(plain.Train))
	}
	base.Shuffle, base.Seed = true, 1
	a, b := load(base), load(base)
	base.Seed = 2
	c := load(base)
	if !reflect.DeepEqual(ids(a.Train), ids(b.Train)) || reflect.DeepEqual(ids(a.Train), ids(c.Train)) || reflect.DeepEqual(ids(a.Train), ids(plain.Train)) {
		t.Errorf("shuffled train %v, again %v, seed 2 %v; want one order per seed", ids(a.Train), ids(b.Train), ids(c.Train))
	}
	seen := map[string]bool{}
	for _, ts := range [][]envs.Task{a.Validation, a.Heldout, a.Train} {
		for _, t := range ts {
			seen[t.ID] = true
		}
	}
	if len(seen) != 12 {
		t.Errorf("validation, held-out and train share tasks: %d distinct of 12", len(seen))
	}
	all := load(Plan{Train: sampleDir + "/dapo-verl.parquet", Eval: []recipes.EvalSet{{Name: "aime24", Path: sampleDir + "/aime2024", Size: 4}, {Name: "slime", Path: sampleDir + "/dapo-slime.jsonl"}}})
	if len(all.Train) != 20 || len(all.Heldout) != 16 || all.Heldout[0].ID != "aime24/sample-I-1" || all.Heldout[4].Meta[MetaSet] != "slime" {
		t.Errorf("with eval sets: train %d, held-out %v; want all 20 trained, 4 + 12 held out by set", len(all.Train), ids(all.Heldout))
	}
}

// An evaluation problem also in the training data (spacing and LaTeX aside, wrapped in DAPO's
// instructions or not) is refused with its ids, or kept with allow_overlap.
func TestOverlap(t *testing.T) {
	dir := t.TempDir()
	eval := filepath.Join(dir, "eval.jsonl")
	write(t, eval, `{"id": "e1", "problem": "Compute   $\\sum_{k=1}^{20}  k^2$ .", "answer": "2870"}`+"\n"+
		`{"id": "e2", "problem": "Find the greatest common divisor of 462 and  1071.", "answer": "21"}`+"\n"+
		`{"id": "e3", "problem": "A brand new problem about primes below fifty.", "answer": "15"}`+"\n")
	p := Plan{Train: sampleDir + "/dapo-verl.parquet", Eval: []recipes.EvalSet{{Name: "mine", Path: eval}}}
	_, err := Load(&p)
	if err == nil || !strings.Contains(err.Error(), "2 evaluation problems are also training problems (mine e1 = train "+DAPOIndex(7)+", mine e2 = train "+DAPOIndex(11)+")") ||
		!strings.Contains(err.Error(), "data.allow_overlap: true") {
		t.Fatalf("overlap: %v", err)
	}
	p.AllowOverlap = true
	got, err := Load(&p)
	if err != nil || len(got.Overlaps) != 2 || len(got.Heldout) != 3 {
		t.Errorf("allowed overlap: %v, %+v; want both kept and reported", err, got)
	}
	if Normalize(`\dfrac{1}{2} \cdot  x`) != Normalize(`\frac12\cdot x`) {
		t.Errorf("Normalize keeps apart %q and %q", `\dfrac{1}{2} \cdot  x`, `\frac12\cdot x`)
	}
}

// A row with the prompt and answer of an earlier one is left out whatever its id; an id used
// again for another problem is an error naming both rows.
func TestRepeats(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "r.jsonl")
	write(t, f, `{"id": "a", "problem": "p", "answer": "1"}`+"\n"+`{"id": "b", "problem": "p", "answer": "1"}`+"\n"+`{"id": "c", "problem": "q", "answer": "2"}`+"\n")
	s, err := Read(f, Options{})
	if err != nil || len(s.Tasks) != 2 || s.Repeats != 1 {
		t.Errorf("%v, %+v; want 2 tasks and 1 repeat", err, s)
	}
	write(t, f, `{"id": "a", "problem": "p", "answer": "1"}`+"\n"+`{"id": "a", "problem": "q", "answer": "2"}`+"\n")
	if _, err := Read(f, Options{}); err == nil || !strings.Contains(err.Error(), f+`:2: task id "a" repeats `+f+":1") {
		t.Errorf("id reused: %v", err)
	}
}

// Records: a JSON Lines file gives its lines as written (key order and spacing kept), a dataset
// folder its Parquet rows as JSON, each named by file and line or row.
func TestRecords(t *testing.T) {
	file := filepath.Join("..", "..", "testdata", "data", "retool-sft.jsonl")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := Records(file, func(where string, rec json.RawMessage) error {
		got = append(got, where+" "+string(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(got) != len(lines) || got[1] != file+":2 "+lines[1] {
		t.Errorf("%d records, the second %.80q; want the file's %d lines as written", len(got), got[1], len(lines))
	}
	n := 0
	dir := filepath.Join("..", "..", "testdata", "data", "aime2024")
	if err := Records(dir, func(where string, rec json.RawMessage) error {
		n++
		var row map[string]any
		if err := json.Unmarshal(rec, &row); err != nil || row["Problem"] == nil || !strings.HasSuffix(where, fmt.Sprintf(": row %d", n)) {
			t.Errorf("%s: %s (%v)", where, rec, err)
		}
		return nil
	}); err != nil || n != 10 {
		t.Errorf("%d rows of the AIME folder (%v); want 10", n, err)
	}
}
