package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"agentrl/engine/record"
	"agentrl/store"
	"agentrl/store/tfevents"
)

// tinyEvaluated is a two-step run of the built-in recipe cut to seconds, evaluated at the start
// and at step 2 (held-out and validation tasks), each step checkpointed.
func tinyEvaluated(db string, extra ...string) []string {
	return append([]string{recipe("retool.yaml"), "--ui", "plain", "--store", db, "--run-name", "tiny", "--backend", "go", "--max-steps", "2",
		"--set", "eval.at_start=true", "--set", "eval.every=2", "--set", "eval.heldout_tasks=2", "--set", "eval.n_samples=2", "--set", "eval.ks=1,2",
		"--set", "eval.validation_tasks=2", "--set", "eval.validation_samples=2", "--set", "early_stop.patience=0", "--set", "early_stop.max_drop=0",
		"--set", "rollout.tasks_per_step=2", "--set", "rollout.group_size=2", "--set", "rollout.max_new_tokens=32", "--set", "rollout.max_total_tokens=256",
		"--set", "checkpoint.every=1", "--set", "checkpoint.keep_best=0"}, extra...)
}

// boardValue is one value of an event file: a scalar, or a histogram's count and sum.
type boardValue struct {
	Scalar   float64
	Histo    bool
	Num, Sum float64
}

// boardValues reads the event files of dir with the package's own reader: tag → step → value,
// failing the test on a tag written twice at a step, or at a step before one it has.
func boardValues(t *testing.T, dir string) map[string]map[int64]boardValue {
	t.Helper()
	files, err := tfevents.Files(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("no event files in %s (%v)", dir, err)
	}
	var evs []readEvent
	for _, f := range files {
		got, err := tfevents.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			re := readEvent{Step: e.Step, FileVersion: e.FileVersion}
			for _, v := range e.Values {
				rv := readValue{Tag: v.Tag}
				if v.HasSimple {
					s := float64(v.Simple)
					rv.SimpleValue = &s
				}
				if v.Histo != nil {
					rv.Histo = &readHisto{Num: v.Histo.Num, Sum: v.Histo.Sum}
				}
				re.Values = append(re.Values, rv)
			}
			evs = append(evs, re)
		}
	}
	return valuesOf(t, evs)
}

type readEvent struct {
	Step        int64
	FileVersion string `json:"file_version"`
	Values      []readValue
}

type readValue struct {
	Tag         string
	SimpleValue *float64 `json:"simple_value"`
	Histo       *readHisto
}

type readHisto struct{ Num, Sum float64 }

func valuesOf(t *testing.T, evs []readEvent) map[string]map[int64]boardValue {
	t.Helper()
	out := map[string]map[int64]boardValue{}
	last := map[string]int64{}
	for _, e := range evs {
		for _, v := range e.Values {
			if l, ok := last[v.Tag]; ok && e.Step <= l {
				t.Errorf("%s at step %d after step %d: a repeated or out-of-order step", v.Tag, e.Step, l)
			}
			last[v.Tag] = e.Step
			if out[v.Tag] == nil {
				out[v.Tag] = map[int64]boardValue{}
			}
			switch {
			case v.SimpleValue != nil:
				out[v.Tag][e.Step] = boardValue{Scalar: *v.SimpleValue}
			case v.Histo != nil:
				out[v.Tag][e.Step] = boardValue{Histo: true, Num: v.Histo.Num, Sum: v.Histo.Sum}
			}
		}
	}
	return out
}

// pythonBoardValues reads the event files of dir with scripts/tfevents_read.py, the independent
// reader (Python's standard library), or skips the test saying why.
func pythonBoardValues(t *testing.T, dir string) map[string]map[int64]boardValue {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH: the independent reader scripts/tfevents_read.py cannot run")
	}
	out, err := exec.Command(py, filepath.Join("..", "scripts", "tfevents_read.py"), dir).Output()
	if err != nil {
		t.Fatalf("tfevents_read.py %s: %v", dir, err)
	}
	var got struct {
		Files []struct {
			Truncated bool
			Events    []readEvent
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("tfevents_read.py printed no JSON: %v\n%.2000s", err, out)
	}
	var evs []readEvent
	for i, f := range got.Files {
		if f.Truncated || len(f.Events) == 0 || f.Events[0].FileVersion != tfevents.FileVersion {
			t.Errorf("file %d: truncated %v, first event %+v; want whole, the file version first", i, f.Truncated, f.Events[:min(1, len(f.Events))])
		}
		evs = append(evs, f.Events...)
	}
	return valuesOf(t, evs)
}

// storeBoard is what the store says the board of run must hold: every metric, phase time and
// evaluation's pass@k at its step (as float32, TensorBoard's scalars), and each step's trained
// trajectories' reward count and sum.
func storeBoard(t *testing.T, st *store.Store, runID string) map[string]map[int64]boardValue {
	t.Helper()
	want := map[string]map[int64]boardValue{}
	put := func(tag string, step int, v boardValue) {
		if want[tag] == nil {
			want[tag] = map[int64]boardValue{}
		}
		want[tag][int64(step)] = v
	}
	scalar := func(tag string, step int, v float64) { put(tag, step, boardValue{Scalar: float64(float32(v))}) }
	metrics, err := st.Metrics(runID)
	if err != nil {
		t.Fatal(err)
	}
	for s, m := range metrics {
		for name, v := range m {
			scalar("train/"+name, s, v)
		}
	}
	phases, err := st.Phases(runID)
	if err != nil {
		t.Fatal(err)
	}
	for s, p := range phases {
		for name, v := range p {
			scalar("time/"+name, s, v)
		}
	}
	evals, err := st.Evals(runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evals {
		for k, v := range e.PassAtK {
			scalar(fmt.Sprintf("eval/pass@%d", k), e.Step, v)
		}
		for l, p := range e.ByLevel {
			for k, v := range p {
				scalar(fmt.Sprintf("eval_level/%s/pass@%d", l, k), e.Step, v)
			}
		}
		for set, p := range e.BySet {
			for k, v := range p {
				scalar(fmt.Sprintf("eval_set/%s/pass@%d", set, k), e.Step, v)
			}
		}
		for k, v := range e.Validation {
			scalar(fmt.Sprintf("validation/pass@%d", k), e.Step, v)
		}
	}
	trajs, err := st.Trajectories(runID, -1)
	if err != nil {
		t.Fatal(err)
	}
	rewards := map[int]boardValue{}
	for _, r := range trajs {
		if tr := record.Trajectory(r); tr.Paused || tr.IsDropped() {
			continue
		}
		b := rewards[r.Step]
		b.Histo, b.Num, b.Sum = true, b.Num+1, b.Sum+r.Reward
		rewards[r.Step] = b
	}
	for s, b := range rewards {
		put("rollout/reward", s, b)
	}
	return want
}

// sameBoard compares the scalars and reward histograms of got with want, tag by tag and step by
// step (a histogram's sum to rounding); got may have more of the tags beginning with unstored.
func sameBoard(t *testing.T, what string, got, want map[string]map[int64]boardValue, unstored ...string) {
	t.Helper()
	for tag, steps := range want {
		for step, w := range steps {
			g, ok := got[tag][step]
			switch {
			case !ok:
				t.Errorf("%s: no %s at step %d (the store has %v)", what, tag, step, w)
			case w.Histo && (!g.Histo || g.Num != w.Num || math.Abs(g.Sum-w.Sum) > 1e-9):
				t.Errorf("%s: %s at step %d: %d values summing to %v; the store's trajectories: %v summing to %v", what, tag, step, int(g.Num), g.Sum, w.Num, w.Sum)
			case !w.Histo && g.Scalar != w.Scalar:
				t.Errorf("%s: %s at step %d = %v; the store has %v", what, tag, step, g.Scalar, w.Scalar)
			}
		}
	}
	for tag, steps := range got {
		if strings.HasPrefix(tag, "rollout/") {
			continue // the length histograms: checked by the export package's tests
		}
		if slices.ContainsFunc(unstored, func(p string) bool { return strings.HasPrefix(tag, p) }) {
			continue
		}
		for step := range steps {
			if _, ok := want[tag][step]; !ok {
				t.Errorf("%s: %s at step %d, which the store does not have", what, tag, step)
			}
		}
	}
}

// TestRunLogsAndTables runs two steps with --tensorboard and exports the stored run: the event
// files, read by an independent reader (scripts/tfevents_read.py) and by the package's own, hold
// the store's values and no repeated step; an export of the stored run writes the same values,
// and a second export nothing; the metrics CSV (read by encoding/csv and by pandas) and Parquet and
// the trajectories' Parquet and JSON Lines give back the store's values.
func TestRunLogsAndTables(t *testing.T) {
	dir := t.TempDir()
	db, tb := filepath.Join(dir, "runs.db"), filepath.Join(dir, "tb")
	if out, err := runCmd(t, tinyEvaluated(db, "--tensorboard", tb)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	st, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.NewestRun()
	if err != nil {
		t.Fatal(err)
	}
	want := storeBoard(t, st, run.ID)
	if len(want["train/reward_mean"]) != 2 || len(want["eval/pass@2"]) != 2 || len(want["validation/pass@1"]) != 2 || len(want["time/train"]) != 2 {
		t.Fatalf("the stored run lacks what the test reads: %v", want)
	}
	live := filepath.Join(tb, run.ID)

	t.Run("python reader", func(t *testing.T) { sameBoard(t, "the live logs (Python)", pythonBoardValues(t, live), want) })
	t.Run("go reader", func(t *testing.T) { sameBoard(t, "the live logs", boardValues(t, live), want) })

	t.Run("export --tensorboard", func(t *testing.T) {
		tb2 := filepath.Join(dir, "tb2")
		out, err := runCmd(t, "export", "--store", db, "--tensorboard", tb2)
		if err != nil || !strings.Contains(out, filepath.Join(tb2, run.ID)) {
			t.Fatalf("%v\n%s", err, out)
		}
		sameBoard(t, "the exported logs", boardValues(t, filepath.Join(tb2, run.ID)), want)
		for _, d := range []string{tb, tb2} { // what is there already is not written again
			before, _ := tfevents.Files(filepath.Join(d, run.ID))
			out, err := runCmd(t, "export", "--store", db, "--run", run.ID, "--tensorboard", d)
			after, _ := tfevents.Files(filepath.Join(d, run.ID))
			if err != nil || !strings.Contains(out, "nothing new") || !reflect.DeepEqual(before, after) {
				t.Errorf("export into %s again: %v, files %v then %v\n%s", d, err, before, after, out)
			}
		}
	})

	t.Run("export --metrics", func(t *testing.T) {
		csvPath, pqPath := filepath.Join(dir, "out", "metrics.csv"), filepath.Join(dir, "metrics.parquet")
		if out, err := runCmd(t, "export", "--store", db, "--run", run.ID, "--metrics", csvPath); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if out, err := runCmd(t, "export", "--store", db, "--metrics", pqPath); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		wantRows := storeRows(t, st, run.ID)
		f, err := os.Open(csvPath)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil || len(recs) != len(wantRows)+1 || recs[0][0] != "step" {
			t.Fatalf("CSV: %v, %d records", err, len(recs))
		}
		got := map[int]map[string]float64{}
		for _, rec := range recs[1:] {
			s, _ := strconv.Atoi(rec[0])
			got[s] = map[string]float64{}
			for i, cell := range rec[1:] {
				if cell != "" {
					if got[s][recs[0][i+1]], err = strconv.ParseFloat(cell, 64); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if !reflect.DeepEqual(got, wantRows) {
			t.Errorf("CSV read back\n%v\nthe store\n%v", got, wantRows)
		}
		t.Run("pandas", func(t *testing.T) { pandasRows(t, csvPath, wantRows) })

		data, err := os.ReadFile(pqPath)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		cols := pf.Schema().Columns()
		got = map[int]map[string]float64{}
		rows := make([]parquet.Row, pf.NumRows())
		r := parquet.NewReader(pf)
		if n, _ := r.ReadRows(rows); n != len(rows) || len(rows) != len(wantRows) {
			t.Fatalf("Parquet: %d rows read of %d; the store has %d steps", n, len(rows), len(wantRows))
		}
		r.Close()
		for _, row := range rows {
			s := int(row[0].Int64())
			got[s] = map[string]float64{}
			for _, v := range row[1:] {
				if !v.IsNull() {
					got[s][cols[v.Column()][0]] = v.Double()
				}
			}
		}
		if !reflect.DeepEqual(got, wantRows) {
			t.Errorf("Parquet read back\n%v\nthe store\n%v", got, wantRows)
		}
	})

	t.Run("export --trajectories", func(t *testing.T) {
		type traj struct { // a reader's own columns, matched by name
			Run     string  `parquet:"run" json:"run"`
			Step    int64   `parquet:"step" json:"step"`
			Eval    bool    `parquet:"eval" json:"eval"`
			Task    string  `parquet:"task" json:"task"`
			Reward  float64 `parquet:"reward" json:"reward"`
			Correct bool    `parquet:"correct" json:"correct"`
			Hinted  bool    `parquet:"hinted" json:"hinted"`
			Text    string  `parquet:"text" json:"text"`
		}
		for _, tc := range []struct {
			name  string
			flags []string
			eval  bool
			steps []int
		}{
			{"trained.parquet", nil, false, []int{1, 2}},
			{"step2.jsonl", []string{"--steps", "2"}, false, []int{2}},
			{"eval.parquet", []string{"--eval"}, true, []int{0, 2}},
			{"eval.jsonl", []string{"--eval", "--steps", "1-"}, true, []int{2}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var want []traj
				for _, s := range tc.steps {
					recs, err := st.Trajectories(run.ID, s)
					if tc.eval {
						recs, err = st.EvalTrajectories(run.ID, s)
					}
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range recs {
						want = append(want, traj{Run: run.ID, Step: int64(r.Step), Eval: tc.eval, Task: r.TaskID, Reward: r.Reward, Correct: r.Correct, Hinted: r.Hinted})
					}
				}
				path := filepath.Join(dir, tc.name)
				out, err := runCmd(t, append([]string{"export", "--store", db, "--trajectories", path}, tc.flags...)...)
				if err != nil || !strings.Contains(out, fmt.Sprintf("%d ", len(want))) {
					t.Fatalf("%v\n%s", err, out)
				}
				var got []traj
				if strings.HasSuffix(path, ".parquet") {
					data, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					if got, err = parquet.Read[traj](bytes.NewReader(data), int64(len(data))); err != nil {
						t.Fatal(err)
					}
				} else {
					data, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
						var tr traj
						if err := json.Unmarshal([]byte(line), &tr); err != nil {
							t.Fatal(err)
						}
						got = append(got, tr)
					}
				}
				for i := range got {
					if !strings.HasPrefix(got[i].Text, "user:\n") || !strings.Contains(got[i].Text, "\n\nassistant:\n") {
						t.Errorf("row %d's text does not read as a conversation:\n%s", i, got[i].Text)
					}
					got[i].Text = ""
				}
				if len(want) == 0 || !reflect.DeepEqual(got, want) {
					t.Errorf("read back\n%+v\nthe store\n%+v", got, want)
				}
			})
		}
	})

	t.Run("errors", func(t *testing.T) {
		notDir := filepath.Join(dir, "a-file")
		if err := os.WriteFile(notDir, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"export", "--store", db, "--metrics", "m.txt"}, "--metrics m.txt: give a file ending in .csv or .parquet"},
			{[]string{"export", "--store", db, "--trajectories", "t.csv"}, "--trajectories t.csv: give a file ending in .parquet or .jsonl"},
			{[]string{"export", "--store", db, "--trajectories", "t.jsonl", "--steps", "3-1"}, `--steps "3-1": want A-B`},
			{[]string{"export", "--store", db, "--metrics", "m.csv", "--eval"}, "--steps and --eval choose the trajectories --trajectories FILE writes"},
			{[]string{"export", "--model", fixture("qwen3-tiny"), "--metrics", "m.csv"}, "--model DIR has none"},
			{[]string{"export", "--store", db, "--metrics", "m.csv", "--peft"}, "--peft chooses how a checkpoint is written to OUT_DIR"},
			{[]string{"export", "--store", db, "--run", "nope", "--metrics", "m.csv"}, `has no run "nope"`},
			{[]string{"export", "--store", db, "--trajectories", filepath.Join(dir, "none.jsonl"), "--steps", "7-9"}, "has no trained trajectories in steps 7-9"},
			{[]string{"export", "--store", db, "--tensorboard", notDir}, "--tensorboard " + notDir},
			{tinyEvaluated(db, "--tensorboard", notDir), "--tensorboard " + notDir + ": mkdir"},
		} {
			out, err := runCmd(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v\n%s\nwant an error with %q", tc.args, err, out, tc.want)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "none.jsonl")); !os.IsNotExist(err) {
			t.Errorf("a failed export left its file: %v", err)
		}
	})
}

// storeRows is the metrics table the store says a run has: step → column → value.
func storeRows(t *testing.T, st *store.Store, runID string) map[int]map[string]float64 {
	t.Helper()
	rows := map[int]map[string]float64{}
	row := func(s int) map[string]float64 {
		if rows[s] == nil {
			rows[s] = map[string]float64{}
		}
		return rows[s]
	}
	metrics, _ := st.Metrics(runID)
	for s, m := range metrics {
		for k, v := range m {
			row(s)[k] = v
		}
	}
	phases, _ := st.Phases(runID)
	for s, p := range phases {
		for k, v := range p {
			row(s)["time_"+k+"_s"] = v
		}
	}
	evals, _ := st.Evals(runID)
	for _, e := range evals {
		for k, v := range e.PassAtK {
			row(e.Step)[fmt.Sprintf("pass_at_%d", k)] = v
		}
		for l, p := range e.ByLevel {
			for k, v := range p {
				row(e.Step)[fmt.Sprintf("level_%s_pass_at_%d", l, k)] = v
			}
		}
		for k, v := range e.Validation {
			row(e.Step)[fmt.Sprintf("validation_pass_at_%d", k)] = v
		}
	}
	return rows
}

// pandasRows reads the CSV with pandas (pd.read_csv, as docs/export.md does) and compares it with
// want; it skips the test, saying so, when no python3 has pandas.
func pandasRows(t *testing.T, path string, want map[int]map[string]float64) {
	t.Helper()
	py := ""
	for _, c := range []string{"/usr/bin/python3", "python3"} {
		if p, err := exec.LookPath(c); err == nil && exec.Command(p, "-c", "import pandas").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		t.Skip("no python3 with pandas to read the CSV with (Debian's python3-pandas; .ci/run installs it)")
	}
	const script = `
import json, sys
import pandas as pd
df = pd.read_csv(sys.argv[1])
print(json.dumps({str(int(r["step"])): {c: float(r[c]) for c in df.columns if c != "step" and not pd.isna(r[c])} for _, r in df.iterrows()}))
`
	out, err := exec.Command(py, "-c", script, path).Output()
	if err != nil {
		t.Fatalf("pandas: %v", err)
	}
	var got map[string]map[string]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("pandas printed %s: %v", out, err)
	}
	if len(got) != len(want) {
		t.Errorf("pandas read %d rows; the store has %d steps", len(got), len(want))
	}
	for s, w := range want {
		g := got[strconv.Itoa(s)]
		keys := func(m map[string]float64) []string {
			ks := make([]string, 0, len(m))
			for k := range m {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			return ks
		}
		if !reflect.DeepEqual(keys(g), keys(w)) {
			t.Errorf("pandas step %d: columns with values %v; the store %v", s, keys(g), keys(w))
			continue
		}
		for k, v := range w { // pandas' own float parser: equal to the last bits or so
			if math.Abs(g[k]-v) > 1e-12*math.Max(1, math.Abs(v)) {
				t.Errorf("pandas step %d %s = %v; the store %v", s, k, g[k], v)
			}
		}
	}
	t.Logf("pandas (%s) read %d rows", py, len(got))
}

// TestSFTTensorBoard: an SFT on conversations writes its loss, eval loss and learning rate per
// step with --tensorboard, as the store keeps them; without a store it has no run to name the
// logs after and refuses.
func TestSFTTensorBoard(t *testing.T) {
	dir := t.TempDir()
	db, tb := filepath.Join(dir, "runs.db"), filepath.Join(dir, "tb")
	args := []string{"sft", "--data", filepath.Join("..", "testdata", "data", "sft-tiny.jsonl"), "--init", filepath.Join("..", "testdata", "builtin"),
		"--out", filepath.Join(dir, "out"), "--steps", "3", "--batch", "2", "--save-every", "1", "--eval-every", "1", "--heldout-share", "0.25", "--backend", "go"}
	if out, err := runCmd(t, append(args, "--store", db, "--tensorboard", tb)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	st, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.NewestRun()
	if err != nil {
		t.Fatal(err)
	}
	want := storeBoard(t, st, run.ID)
	if len(want["train/loss"]) < 3 || len(want["train/eval_loss"]) < 3 {
		t.Fatalf("the stored SFT run lacks its losses: %v", want)
	}
	got := boardValues(t, filepath.Join(tb, run.ID))
	sameBoard(t, "the SFT's logs", got, want, "time/") // the store keeps no phase times of an SFT
	if len(got["time/train"]) != 3 {
		t.Errorf("time/train at %d steps; want the SFT's 3", len(got["time/train"]))
	}
	if _, err := runCmd(t, append(args, "--store", "", "--tensorboard", tb)...); err == nil || !strings.Contains(err.Error(), "keep the run in a store (--store PATH)") {
		t.Errorf("sft --store '' --tensorboard: %v; want an error asking for a store", err)
	}
}
