package recipes

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// leafLines maps each dotted key written in a YAML file to its line text.
func leafLines(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	out := map[string]string{}
	sch := newSchema()
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(prefix, k.Value)
			if f, leaf := sch.byKey[key]; v.Kind == yaml.MappingNode && !(leaf && f.kind == kStringMap) {
				walk(v, key)
				continue
			}
			out[key] = lines[k.Line-1]
		}
	}
	walk(doc.Content[0], "")
	return out
}

func TestShippedRecipes(t *testing.T) {
	for _, path := range []string{"retool.yaml", "retool-baseline.yaml"} {
		t.Run(path, func(t *testing.T) {
			r, err := Load(path, Options{IgnoreEnv: true, NoDataFiles: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Model.Path != "" || r.Backend.Kind != "auto" {
				t.Errorf("model.path %q, backend.kind %q; want the built-in model and auto", r.Model.Path, r.Backend.Kind)
			}
			if !reflect.DeepEqual(r.Eval.Ks, []int{1, 2, 4, 8}) || r.Eval.NSamples < 8 || r.Eval.HeldoutTasks < 64 {
				t.Errorf("eval %+v; want pass@1,2,4,8 on ≥ 64 held-out tasks with n ≥ 8", r.Eval)
			}
			if r.EarlyStop.Patience == 0 && r.EarlyStop.MaxDrop == 0 || r.Checkpoint.Every == 0 {
				t.Errorf("early_stop %+v, checkpoint %+v; want early stopping and periodic checkpoints", r.EarlyStop, r.Checkpoint)
			}
			// Every field is written out and commented, so the file documents the schema.
			lines := leafLines(t, path)
			for _, key := range Keys() {
				line, ok := lines[key]
				if !ok {
					t.Errorf("%s does not list %s", path, key)
				} else if !strings.Contains(line, "#") {
					t.Errorf("%s: %s has no comment", path, key)
				}
			}
		})
	}
	hybrid, err := Load("retool.yaml", Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	if hybrid.Algorithm.Name != "hybrid" || hybrid.Hinter.Kind != "rules" || hybrid.PRM.Kind != "rules" || hybrid.Reward.Process <= 0 {
		t.Errorf("retool.yaml is not the hybrid recipe: %+v %+v %+v", hybrid.Algorithm, hybrid.Hinter, hybrid.PRM)
	}
}

func TestBaselineDiffersOnlyInAlgorithm(t *testing.T) {
	a, err := Load("retool.yaml", Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("retool-baseline.yaml", Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	var diff []string
	for _, f := range newSchema().leaves {
		if !reflect.DeepEqual(f.value(a).Interface(), f.value(b).Interface()) {
			diff = append(diff, f.key)
		}
	}
	want := []string{"run.name", "reward.process", "algorithm.name", "hinter.kind", "prm.kind"}
	if !reflect.DeepEqual(diff, want) {
		t.Errorf("the recipes differ in %v; want exactly %v", diff, want)
	}
	if b.Algorithm.Name != "grpo" || b.Hinter.Kind != "none" || b.PRM.Kind != "none" || b.Reward.Process != 0 {
		t.Errorf("retool-baseline.yaml is not outcome-only GRPO")
	}
}

// The "(default X)" notes in retool.yaml's comments must agree with Default().
func TestDocumentedDefaults(t *testing.T) {
	re := regexp.MustCompile(`\(default ([^):]+)\)`)
	sch := newSchema()
	checked := 0
	for key, line := range leafLines(t, "retool.yaml") {
		_, comment, _ := strings.Cut(line, "#")
		m := re.FindStringSubmatch(comment)
		if m == nil {
			continue
		}
		f := sch.byKey[key]
		def := f.value(Default())
		got := reflect.New(def.Type())
		text := m[1]
		if f.kind == kDuration || f.kind == kAuto {
			v, err := parseText(f.kind, text)
			if err != nil {
				t.Errorf("%s: documented default %q: %v", key, text, err)
				continue
			}
			got.Elem().Set(reflect.ValueOf(v).Convert(def.Type()))
		} else if err := yaml.Unmarshal([]byte(text), got.Interface()); err != nil {
			t.Errorf("%s: documented default %q: %v", key, text, err)
			continue
		}
		if !reflect.DeepEqual(got.Elem().Interface(), def.Interface()) {
			t.Errorf("%s: comment says default %s; Default() has %v", key, text, def.Interface())
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("checked only %d documented defaults; want most fields documented", checked)
	}
}

func TestKeysAndEnvVars(t *testing.T) {
	keys := Keys()
	if len(keys) < 80 {
		t.Errorf("got %d keys; the schema lost fields", len(keys))
	}
	seen := map[string]string{}
	for _, k := range keys {
		env := EnvVar(k)
		if prev, dup := seen[env]; dup {
			t.Errorf("%s and %s share the environment variable %s", prev, k, env)
		}
		seen[env] = k
	}
	if got := EnvVar("env.tasks.jsonl.path"); got != "AGENTRL_ENV_TASKS_JSONL_PATH" {
		t.Errorf("got %s", got)
	}
	sorted := append([]string(nil), newSchema().sections[""]...)
	sort.Strings(sorted)
	if len(sorted) != 16 {
		t.Errorf("got sections %v", sorted)
	}
}

func TestHash(t *testing.T) {
	base := Default()
	h := base.Hash()
	if len(h) != 64 {
		t.Fatalf("hash %q is not hex SHA-256", h)
	}
	if again := Default().Hash(); again != h {
		t.Errorf("two default recipes hash differently")
	}
	ui := Default()
	ui.UI.Mode = "json"
	if ui.Hash() != h {
		t.Errorf("ui.mode changed the hash; it does not change what a run computes")
	}
	nilStop := Default()
	nilStop.Rollout.Stop = nil
	if nilStop.Hash() != h {
		t.Errorf("an absent and an empty stop list hash differently")
	}
	lr := Default()
	lr.Train.LR = 2e-5
	seed := Default()
	seed.Run.Seed = 2
	if lr.Hash() == h || seed.Hash() == h || lr.Hash() == seed.Hash() {
		t.Errorf("changing train.lr or run.seed did not change the hash")
	}
	fromFile, err := Parse("d.yaml", []byte("train:\n  lr: 1.0e-5\n"), Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	if fromFile.Hash() != h {
		t.Errorf("a file that restates a default hashes differently from Default()")
	}
	// The canonical JSON is what the hash digests: a fixture guards against accidental changes.
	js := string(base.CanonicalJSON())
	for _, want := range []string{`"train":{"lr":0.00001,`, `"timeout":5000000000`, `"ks":[1,2,4,8]`, `"kv_slots":0`} {
		if !strings.Contains(js, want) {
			t.Errorf("canonical JSON lacks %s:\n%s", want, js)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"24GiB", 24 << 30, ""},
		{"24GB", 24_000_000_000, ""},
		{"24 GB", 24_000_000_000, ""},
		{"1.5GiB", 3 << 29, ""},
		{"512MiB", 512 << 20, ""},
		{"512MB", 512_000_000, ""},
		{"80KiB", 80 << 10, ""},
		{"2TB", 2_000_000_000_000, ""},
		{"100B", 100, ""},
		{"0GiB", 0, ""},
		{" 8GiB ", 8 << 30, ""},
		{"24", 0, `size "24" has no unit; write 24GiB (2^30 bytes each) or 24GB (10^9 bytes each)`},
		{"24G", 0, `size "24G": unknown unit "G"`},
		{"24gb", 0, `size "24gb": unknown unit "gb"`},
		{"24  GB", 0, `size "24  GB": unknown unit " GB"`},
		{"GiB", 0, `size "GiB" does not start with a number`},
		{"-1GiB", 0, `size "-1GiB" does not start with a number`},
		{"1.2.3GiB", 0, `size "1.2.3GiB": "1.2.3" is not a number`},
		{"", 0, "empty size"},
		{"9999999999TiB", 0, "too large"},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("ParseBytes(%q): %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseBytes(%q) error %v; want it to contain %q", tt.in, err, tt.err)
		case got != tt.want:
			t.Errorf("ParseBytes(%q) = %d; want %d", tt.in, got, tt.want)
		}
	}
	if got := FormatGiB(25769803776); got != "24.00 GiB" {
		t.Errorf("FormatGiB = %q", got)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"lr", "", 2}, {"kitten", "sitting", 3}, {"trian", "train", 1},
		{"kl_estimater", "kl_estimator", 1}, {"abc", "abc", 0}, {"max_step", "max_steps", 1},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d; want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// The seed's recipes (Qwen3-4B at 16K tokens) load, list every field with a comment, and differ
// from each other only in the LoRA settings, the learning rate and the name.
func TestSeedRecipes(t *testing.T) {
	loaded := map[string]*Recipe{}
	for _, path := range []string{"retool-qwen3-4b.yaml", "retool-qwen3-4b-lora.yaml"} {
		r, err := Load(path, Options{IgnoreEnv: true, NoDataFiles: true})
		if err != nil {
			t.Fatal(err)
		}
		loaded[path] = r
		if r.Rollout.MaxTotalTokens != 16384 || r.Model.DType != "bf16" || !r.Train.GradientCheckpointing || r.Algorithm.Name != "hybrid" {
			t.Errorf("%s: %d tokens, dtype %s, checkpointing %v, %s; want the seed's 16K bf16 Hybrid run with checkpointing",
				path, r.Rollout.MaxTotalTokens, r.Model.DType, r.Train.GradientCheckpointing, r.Algorithm.Name)
		}
		if r.EvalTotalTokens() != 32768 || !r.EvalSlotsOwn() {
			t.Errorf("%s: evaluation context %d; want the reference's 32,768 (--eval-max-context-len), in slots of its own", path, r.EvalTotalTokens())
		}
		lines := leafLines(t, path)
		for _, key := range Keys() {
			if line, ok := lines[key]; !ok {
				t.Errorf("%s does not list %s", path, key)
			} else if !strings.Contains(line, "#") {
				t.Errorf("%s: %s has no comment", path, key)
			}
		}
	}
	full, lora := loaded["retool-qwen3-4b.yaml"], loaded["retool-qwen3-4b-lora.yaml"]
	if full.Train.LoRA.Rank != 0 || lora.Train.LoRA.Rank == 0 {
		t.Errorf("lora ranks %d and %d; want a full fine-tune and a LoRA run", full.Train.LoRA.Rank, lora.Train.LoRA.Rank)
	}
	a, b := *full, *lora
	a.Run.Name, a.Train.LR, a.Train.LoRA, a.Train.OptimizerBits = b.Run.Name, b.Train.LR, b.Train.LoRA, b.Train.OptimizerBits
	if a.Hash() != b.Hash() {
		t.Errorf("the two seed recipes differ in more than the name, lr and LoRA settings")
	}
}

// prm.kind model's fields and algorithm.estimator are left out of the hash while unused, so the
// recipes from before them keep their hashes (and their stored runs, their fingerprints).
func TestPRMFieldsLeaveHashAlone(t *testing.T) {
	a := Default()
	b := Default()
	b.PRM.Model, b.PRM.Samples, b.PRM.Endpoint = "policy", 4, "http://x/v1"
	if a.Hash() != b.Hash() {
		t.Errorf("prm.kind none: changing the model fields changed the hash")
	}
	if j := string(a.CanonicalJSON()); strings.Contains(j, `"estimator"`) || !strings.Contains(j, `"prm":{"kind":"none"}`) {
		t.Errorf("the default recipe's canonical JSON names the new fields: %s", a.CanonicalJSON())
	}
	b.PRM.Kind, a.PRM.Kind = "model", "model"
	if a.Hash() == b.Hash() {
		t.Errorf("prm.kind model: the model fields are not hashed")
	}
	if got := Default().PRM.PromptText(); !strings.Contains(got, "{trajectory}") || !strings.Contains(got, `\boxed{-1}`) {
		t.Errorf("the default PRM prompt lacks {trajectory} or \\boxed{-1}:\n%s", got)
	}
}
