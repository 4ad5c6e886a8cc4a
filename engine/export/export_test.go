package export

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"agentrl/engine/event"
	"agentrl/engine/record"
	"agentrl/envs"
	"agentrl/store"
	"agentrl/store/tfevents"
)

const runID = "tiny-s1-20260101-000000"

// stepEvents are the events of one training step as the controller emits them: phases,
// trajectories (two tasks × two samples, one paused, one of them hinted and judged by the PRM),
// the step's metrics, and an evaluation every second step.
func stepEvents(step int) []event.Event {
	f := float64(step)
	evs := []event.Event{
		event.Phase{Step: step, Phase: event.PhaseRollout, Seconds: 1.5 + f},
		event.Phase{Step: step, Phase: event.PhaseTrain, Seconds: 0.25},
	}
	for g := range 2 {
		for s := range 2 {
			tr := event.Trajectory{Step: step, TaskID: "task-" + strconv.Itoa(g), Prompt: "What is 6*7?", Group: g, Sample: s,
				Turns:  []event.Turn{{Assistant: "<code>print(6*7)</code>", Code: "print(6*7)", Observation: "42", ToolStatus: "ok"}, {Assistant: `\boxed{42}`}},
				Reward: envs.Reward{Outcome: float64(s), Shaping: 0.1 * f, Total: float64(s) + 0.1*f}, Correct: s == 1,
				Tokens: 40 + 10*g + s + step, Pieces: make([]string, 7+s)}
			if g == 1 && s == 0 {
				tr.Hint = "Print the product."
				tr.PRM = &event.PRM{Status: event.PRMJudged, Verdicts: []float64{1, 0}, Replies: 1, Hint: true}
			}
			evs = append(evs, tr)
		}
	}
	evs = append(evs, event.Trajectory{Step: step, TaskID: "task-9", Paused: true, Tokens: 999, Reward: envs.Reward{Total: 99}},
		event.StepMetrics{Step: step, Metrics: map[event.Metric]float64{event.MetricRewardMean: 0.5 + 0.1*f, event.MetricLR: 1e-6 * f, event.MetricHintRate: 0.25}})
	if step%2 == 0 {
		evs = append(evs, evalEvents(step)...)
	}
	return append(evs, event.Checkpoint{Step: step})
}

// evalEvents are an evaluation at step: its trajectories, the pass@k over two sets, per set, per
// level and on the validation tasks, and its phase.
func evalEvents(step int) []event.Event {
	f := float64(step)
	return []event.Event{
		event.Trajectory{Step: step, TaskID: "held-0", Prompt: "What is 2+2?", Turns: []event.Turn{{Assistant: `\boxed{4}`}}, Reward: envs.Reward{Outcome: 1, Total: 1}, Correct: true, Tokens: 20, Eval: true},
		event.Trajectory{Step: step, TaskID: "held-0", Prompt: "What is 2+2?", Sample: 1, Turns: []event.Turn{{Assistant: `\boxed{5}`}}, Tokens: 21, Eval: true},
		event.Eval{Step: step, PassAtK: map[int]float64{1: 0.5 + 0.01*f, 2: 0.75}, BySet: map[string]map[int]float64{"aime24": {1: 0.25}, "math-500": {1: 0.75}},
			ByLevel: map[string]map[int]float64{"0": {1: 0.9}, "10": {1: 0.1}}, Validation: map[int]float64{1: 0.4}},
		event.Phase{Step: step, Phase: event.PhaseEval, Seconds: 3},
	}
}

// runEvents are a run's events from step first to last, with an evaluation at the start when first is 1.
func runEvents(first, last int) []event.Event {
	evs := []event.Event{event.RunStart{RunID: runID, Name: "tiny"}}
	if first == 1 {
		evs = append(evs, evalEvents(0)...)
	}
	for s := first; s <= last; s++ {
		evs = append(evs, stepEvents(s)...)
	}
	return append(evs, event.RunEnd{Status: "finished", Step: last})
}

// storeRun records evs in a new store as the controller does: each step's events, then its phases.
func storeRun(t *testing.T, evs []event.Event) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.PutRun(store.Run{ID: runID, Name: "tiny", Status: "finished", Created: time.Unix(1_700_000_000, 0)}); err != nil {
		t.Fatal(err)
	}
	rec := record.New(st, runID, 2)
	step := -1
	for _, e := range evs {
		if p, ok := e.(event.Phase); ok && p.Step != step {
			if err := rec.Phases(step); err != nil {
				t.Fatal(err)
			}
			step = p.Step
		}
		rec.Observe(e)
		if err := rec.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Phases(step); err != nil {
		t.Fatal(err)
	}
	return st
}

// scalars reads every event file of dir: tag → step → value, failing on a step written twice.
func scalars(t *testing.T, dir string) (map[string]map[int64]float32, map[string]map[int64]*tfevents.Histogram) {
	t.Helper()
	files, err := tfevents.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc, hs := map[string]map[int64]float32{}, map[string]map[int64]*tfevents.Histogram{}
	last := map[string]int64{}
	for _, f := range files {
		evs, err := tfevents.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 || evs[0].FileVersion != tfevents.FileVersion {
			t.Errorf("%s does not begin with the file version", f)
		}
		for _, e := range evs {
			for _, v := range e.Values {
				if l, ok := last[v.Tag]; ok && e.Step <= l {
					t.Errorf("%s: %s at step %d after step %d", filepath.Base(f), v.Tag, e.Step, l)
				}
				last[v.Tag] = e.Step
				if v.Histo != nil {
					if hs[v.Tag] == nil {
						hs[v.Tag] = map[int64]*tfevents.Histogram{}
					}
					hs[v.Tag][e.Step] = v.Histo
					continue
				}
				if sc[v.Tag] == nil {
					sc[v.Tag] = map[int64]float32{}
				}
				sc[v.Tag][e.Step] = v.Simple
			}
		}
	}
	return sc, hs
}

func observeAll(t *testing.T, b *Board, evs []event.Event) {
	t.Helper()
	for _, e := range evs {
		if err := b.Observe(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBoardValues: a run's events become the documented tags with the events' values, a step's
// phases summed and its trained (not paused) trajectories as histograms; replaying the stored run
// (WriteBoard) writes the same values.
func TestBoardValues(t *testing.T) {
	evs := runEvents(1, 4)
	live := t.TempDir()
	observeAll(t, NewBoard(live, nil), evs)
	sc, hs := scalars(t, filepath.Join(live, runID))

	want := map[string]map[int64]float32{}
	put := func(tag string, step int, v float64) {
		if want[tag] == nil {
			want[tag] = map[int64]float32{}
		}
		want[tag][int64(step)] = float32(v)
	}
	for _, e := range evs {
		switch e := e.(type) {
		case event.StepMetrics:
			for m, v := range e.Metrics {
				put("train/"+string(m), e.Step, v)
			}
		case event.Eval:
			put("eval/pass@1", e.Step, e.PassAtK[1])
			put("eval/pass@2", e.Step, e.PassAtK[2])
			put("eval_set/aime24/pass@1", e.Step, 0.25)
			put("eval_set/math-500/pass@1", e.Step, 0.75)
			put("eval_level/0/pass@1", e.Step, 0.9)
			put("eval_level/10/pass@1", e.Step, 0.1)
			put("validation/pass@1", e.Step, 0.4)
		}
	}
	for s := 1; s <= 4; s++ {
		put("time/rollout", s, 1.5+float64(s))
		put("time/train", s, 0.25)
	}
	for _, s := range []int{0, 2, 4} {
		put("time/eval", s, 3)
	}
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("scalars\n%v\nwant\n%v", sc, want)
	}
	for s := int64(1); s <= 4; s++ {
		r, tok, pol := hs[TagReward][s], hs[TagTokens][s], hs[TagPolicyTokens][s]
		f := float64(s)
		if r == nil || r.Num != 4 || math.Abs(r.Sum-(2+0.4*f)) > 1e-12 || r.Max != 1+0.1*f {
			t.Errorf("step %d reward histogram %+v; want the 4 trained trajectories (the paused one left out)", s, r)
		}
		if tok == nil || tok.Num != 4 || tok.Sum != 40*4+20+2+4*f || tok.Min != 40+f {
			t.Errorf("step %d tokens histogram %+v", s, tok)
		}
		if pol == nil || pol.Sum != 7*4+2 {
			t.Errorf("step %d policy tokens histogram %+v", s, pol)
		}
	}

	// The stored run, replayed, gives the same tags and values.
	st := storeRun(t, evs)
	exported := t.TempDir()
	b, err := WriteBoard(st, runID, exported)
	if err != nil {
		t.Fatal(err)
	}
	if b.Dir() != filepath.Join(exported, runID) || b.Written() == 0 {
		t.Errorf("WriteBoard wrote %d values to %s", b.Written(), b.Dir())
	}
	sc2, hs2 := scalars(t, b.Dir())
	if !reflect.DeepEqual(sc2, want) {
		t.Errorf("exported scalars\n%v\nwant\n%v", sc2, want)
	}
	if !reflect.DeepEqual(hs2, hs) {
		t.Errorf("exported histograms differ from the live ones")
	}
	// Exported wall times are the run's start plus its phase times so far.
	evs2, err := tfevents.ReadFile(mustFiles(t, b.Dir())[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs2[1:] {
		if e.Step == 0 && e.WallTime != 1_700_000_003 {
			t.Errorf("step 0 at wall time %v; want the start + 3 s of evaluation", e.WallTime)
		}
	}
}

func mustFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := tfevents.Files(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("no event files in %s (%v)", dir, err)
	}
	return files
}

// TestBoardResume: a run resumed from an earlier checkpoint repeats steps its logs have; the
// resumed run's board appends the later steps to the same folder, in a file of its own, and
// repeats none; a board given what the folder holds writes nothing and makes no file.
func TestBoardResume(t *testing.T) {
	for _, tc := range []struct {
		name           string
		first, resumed [2]int // steps of the first run and of the resumed one
		files          int
	}{
		{"resumed after its last step", [2]int{1, 2}, [2]int{3, 4}, 2},
		{"resumed from an earlier checkpoint", [2]int{1, 3}, [2]int{2, 5}, 2},
		{"written again", [2]int{1, 4}, [2]int{1, 4}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			observeAll(t, NewBoard(root, nil), runEvents(tc.first[0], tc.first[1]))
			first, _ := scalars(t, filepath.Join(root, runID))
			resumed := runEvents(tc.resumed[0], tc.resumed[1])
			for i, e := range resumed { // the resumed run's values differ from the first's
				if m, ok := e.(event.StepMetrics); ok {
					m.Metrics = map[event.Metric]float64{event.MetricRewardMean: -float64(m.Step)}
					resumed[i] = m
				}
			}
			observeAll(t, NewBoard(root, nil), resumed)
			if files := mustFiles(t, filepath.Join(root, runID)); len(files) != tc.files {
				t.Errorf("%d event files; want %d", len(files), tc.files)
			}
			sc, _ := scalars(t, filepath.Join(root, runID)) // fails on a repeated step
			for step := tc.first[0]; step <= max(tc.first[1], tc.resumed[1]); step++ {
				got, ok := sc["train/reward_mean"][int64(step)]
				want := float32(-step)
				if step <= tc.first[1] {
					want = first["train/reward_mean"][int64(step)]
				}
				if !ok || got != want {
					t.Errorf("step %d: reward_mean %v (%v); want %v, the first writing of the step", step, got, ok, want)
				}
			}
		})
	}
}

// TestTee: every event passes in order; a board that cannot write says so once in the stream and
// the stream goes on to its end.
func TestTee(t *testing.T) {
	evs := runEvents(1, 3)
	for _, tc := range []struct {
		name   string
		root   func(t *testing.T) string
		errors int
	}{
		{"writes", func(t *testing.T) string { return t.TempDir() }, 0},
		{"cannot write", func(t *testing.T) string { // the root is a file: nothing can be made under it
			p := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root(t)
			in := make(chan event.Event)
			out, wait := Tee(in, NewBoard(root, nil))
			go func() {
				for _, e := range evs {
					in <- e
				}
				close(in)
			}()
			var got []event.Event
			var errs []string
			for e := range out {
				if er, ok := e.(event.Error); ok {
					errs = append(errs, er.Message)
					continue
				}
				got = append(got, e)
			}
			late := wait(time.Minute)
			if !reflect.DeepEqual(got, evs) {
				t.Errorf("the stream passed %d events, not the %d given in order", len(got), len(evs))
			}
			if late != nil {
				errs = append(errs, late.Error())
			}
			if len(errs) != tc.errors {
				t.Fatalf("errors %q; want %d", errs, tc.errors)
			}
			if tc.errors > 0 && (!strings.Contains(errs[0], "tensorboard: ") || !strings.Contains(errs[0], "the run goes on")) {
				t.Errorf("error %q does not say what failed and that the run goes on", errs[0])
			}
			if tc.errors == 0 {
				if sc, _ := scalars(t, filepath.Join(root, runID)); len(sc["train/lr"]) != 3 {
					t.Errorf("train/lr at %d steps; want 3", len(sc["train/lr"]))
				}
			}
		})
	}
}

// TestMetricsTable: the table has a row per step with the store's values, which CSV and Parquet
// (read by column name with parquet-go's own reader) give back exactly, empty where a step has
// none.
func TestMetricsTable(t *testing.T) {
	st := storeRun(t, runEvents(1, 3))
	tab, err := Metrics(st, runID)
	if err != nil {
		t.Fatal(err)
	}
	wantCols := []string{"step", "hint_rate", "lr", "reward_mean", "time_rollout_s", "time_train_s", "time_eval_s",
		"pass_at_1", "pass_at_2", "set_aime24_pass_at_1", "set_math_500_pass_at_1", "level_0_pass_at_1", "level_10_pass_at_1", "validation_pass_at_1"}
	if !reflect.DeepEqual(tab.Columns, wantCols) {
		t.Fatalf("columns %v;\nwant %v", tab.Columns, wantCols)
	}
	metrics, _ := st.Metrics(runID)
	phases, _ := st.Phases(runID)
	evals, _ := st.Evals(runID)
	want := map[int]map[string]float64{} // from the store, column by column
	for s, m := range metrics {
		want[s] = map[string]float64{"hint_rate": m["hint_rate"], "lr": m["lr"], "reward_mean": m["reward_mean"]}
	}
	for s, p := range phases {
		if want[s] == nil {
			want[s] = map[string]float64{}
		}
		for name, v := range p {
			want[s]["time_"+name+"_s"] = v
		}
	}
	for _, e := range evals {
		w := want[e.Step]
		w["pass_at_1"], w["pass_at_2"], w["validation_pass_at_1"] = e.PassAtK[1], e.PassAtK[2], e.Validation[1]
		w["set_aime24_pass_at_1"], w["set_math_500_pass_at_1"] = e.BySet["aime24"][1], e.BySet["math-500"][1]
		w["level_0_pass_at_1"], w["level_10_pass_at_1"] = e.ByLevel["0"][1], e.ByLevel["10"][1]
	}
	if len(want) != 4 { // steps 0 (the start evaluation) to 3
		t.Fatalf("the store has %d steps; want 4", len(want))
	}
	check := func(format string, got map[int]map[string]float64) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s read back\n%v\nwant\n%v", format, got, want)
		}
	}

	var buf bytes.Buffer
	if err := tab.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || !reflect.DeepEqual(recs[0], wantCols) {
		t.Fatalf("CSV header %v (%v)", recs, err)
	}
	got := map[int]map[string]float64{}
	for _, rec := range recs[1:] {
		s, _ := strconv.Atoi(rec[0])
		got[s] = map[string]float64{}
		for i, cell := range rec[1:] {
			if cell == "" {
				continue
			}
			v, err := strconv.ParseFloat(cell, 64)
			if err != nil {
				t.Fatalf("CSV cell %q: %v", cell, err)
			}
			got[s][wantCols[i+1]] = v
		}
	}
	check("CSV", got)

	buf.Reset()
	if err := tab.WriteParquet(&buf); err != nil {
		t.Fatal(err)
	}
	got = map[int]map[string]float64{}
	pf := openParquet(t, buf.Bytes())
	if v, _ := pf.Lookup(SchemaKey); v != MetricsSchema {
		t.Errorf("schema metadata %q; want %q", v, MetricsSchema)
	}
	cols := pf.Schema().Columns()
	if len(cols) != len(wantCols) {
		t.Fatalf("Parquet columns %v", cols)
	}
	for i, c := range cols {
		if c[0] != wantCols[i] {
			t.Errorf("Parquet column %d is %q; want %q", i, c[0], wantCols[i])
		}
	}
	for _, row := range readRows(t, pf) {
		s := int(row[0].Int64())
		got[s] = map[string]float64{}
		for _, v := range row[1:] {
			if !v.IsNull() {
				got[s][wantCols[v.Column()]] = v.Double()
			}
		}
	}
	check("Parquet", got)
}

func openParquet(t *testing.T, data []byte) *parquet.File {
	t.Helper()
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

func readRows(t *testing.T, pf *parquet.File) []parquet.Row {
	t.Helper()
	r := parquet.NewReader(pf)
	defer r.Close()
	var rows []parquet.Row
	for {
		buf := make([]parquet.Row, 16)
		n, err := r.ReadRows(buf)
		rows = append(rows, buf[:n]...)
		if err != nil {
			break
		}
	}
	if int64(len(rows)) != pf.NumRows() {
		t.Fatalf("read %d rows of %d", len(rows), pf.NumRows())
	}
	return rows
}

// TestTrajectoryTable: the rows of a stored run's trajectories, chosen by steps and kind, carry
// the store's values, and Parquet (read into a struct of a few columns, matched by name) and JSON
// Lines give them back.
func TestTrajectoryTable(t *testing.T) {
	st := storeRun(t, runEvents(1, 3))
	for _, tc := range []struct {
		name string
		sel  Selection
	}{
		{"all trained", Selection{To: -1}},
		{"steps 2-3", Selection{From: 2, To: 3}},
		{"evaluations", Selection{To: -1, Eval: true}},
		{"evaluation of step 2", Selection{From: 2, To: 2, Eval: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []store.TrajectoryRecord // the store's, read its own way
			all, _ := st.Trajectories(runID, -1)
			if tc.sel.Eval {
				all, _ = st.EvalTrajectories(runID, -1)
			}
			for _, r := range all {
				if r.Step >= tc.sel.From && (tc.sel.To < 0 || r.Step <= tc.sel.To) {
					want = append(want, r)
				}
			}
			var rows []TrajectoryRow
			var pq, jl bytes.Buffer
			pw, jw := NewParquetTrajectories(&pq), NewJSONLTrajectories(&jl)
			err := Trajectories(st, runID, tc.sel, func(r TrajectoryRow) error {
				rows = append(rows, r)
				if err := pw.Write(r); err != nil {
					return err
				}
				return jw.Write(r)
			})
			if err != nil || pw.Close() != nil || jw.Close() != nil {
				t.Fatal(err)
			}
			if len(rows) != len(want) || len(want) == 0 {
				t.Fatalf("%d rows; the store has %d", len(rows), len(want))
			}
			for i, r := range rows {
				w := record.Trajectory(want[i])
				if r.Run != runID || r.Step != int64(w.Step) || r.Task != w.TaskID || r.Group != int64(w.Group) || r.Sample != int64(w.Sample) ||
					r.Reward != want[i].Reward || r.Correct != want[i].Correct || r.Hinted != want[i].Hinted || r.Eval != tc.sel.Eval ||
					r.RewardOutcome != w.Reward.Outcome || r.RewardShaping != w.Reward.Shaping || r.Tokens != int64(w.Tokens) || r.Turns != int64(len(w.Turns)) {
					t.Errorf("row %d %+v;\nstored %+v", i, r, w)
				}
				if (r.PolicyTokens == nil) != tc.sel.Eval || !tc.sel.Eval && *r.PolicyTokens != int64(len(w.Pieces)) {
					t.Errorf("row %d policy_tokens %v; want %d (null for an evaluation's)", i, r.PolicyTokens, len(w.Pieces))
				}
				if want := int64(len(w.Turns) / 2); !tc.sel.Eval && r.ToolCalls != want {
					t.Errorf("row %d tool_calls %d; want %d", i, r.ToolCalls, want)
				}
				if w.PRM != nil && (r.PRMStatus != event.PRMJudged || !reflect.DeepEqual(r.PRMVerdicts, w.PRM.Verdicts) || !r.PRMHint || r.Hint != w.Hint) {
					t.Errorf("row %d PRM %q %v %v hint %q; stored %+v", i, r.PRMStatus, r.PRMVerdicts, r.PRMHint, r.Hint, w.PRM)
				}
			}

			type some struct { // a reader's own struct: columns matched by name
				Task        string    `parquet:"task"`
				Step        int64     `parquet:"step"`
				Reward      float64   `parquet:"reward"`
				Correct     bool      `parquet:"correct"`
				Text        string    `parquet:"text"`
				PRMVerdicts []float64 `parquet:"prm_verdicts,list"`
				Policy      *int64    `parquet:"policy_tokens,optional"`
			}
			back, err := parquet.Read[some](bytes.NewReader(pq.Bytes()), int64(pq.Len()))
			if err != nil || len(back) != len(rows) {
				t.Fatalf("Parquet read back %d rows (%v); want %d", len(back), err, len(rows))
			}
			if v, _ := openParquet(t, pq.Bytes()).Lookup(SchemaKey); v != TrajectoriesSchema {
				t.Errorf("schema metadata %q; want %q", v, TrajectoriesSchema)
			}
			sc := bufio.NewScanner(&jl)
			sc.Buffer(nil, 1<<20)
			for i := 0; sc.Scan(); i++ {
				var j map[string]any
				if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
					t.Fatal(err)
				}
				r, b := rows[i], back[i]
				if b.Task != r.Task || b.Step != r.Step || b.Reward != r.Reward || b.Correct != r.Correct || b.Text != r.Text ||
					len(b.PRMVerdicts) != len(r.PRMVerdicts) || (b.Policy == nil) != (r.PolicyTokens == nil) {
					t.Errorf("Parquet row %d %+v; want %+v", i, b, r)
				}
				if j["task"] != r.Task || j["reward"] != r.Reward || j["text"] != r.Text || j["step"] != float64(r.Step) || (j["policy_tokens"] == nil) != tc.sel.Eval {
					t.Errorf("JSON line %d %v; want %+v", i, j, r)
				}
			}
		})
	}
	if err := Trajectories(st, "nope", Selection{To: -1}, func(TrajectoryRow) error { return nil }); err == nil || !strings.Contains(err.Error(), "runs --store") {
		t.Errorf("an unknown run gave %v; want the store's error naming how to list runs", err)
	}
}

func TestRender(t *testing.T) {
	text := func(s string) json.RawMessage { return envs.TextArguments(s) }
	for _, tc := range []struct {
		name string
		tr   event.Trajectory
		want string
	}{
		{"retool", event.Trajectory{Prompt: "What is 6*7?\n", Turns: []event.Turn{
			{Assistant: "<code>print(6*7)</code>", Code: "print(6*7)", Observation: "42\n", ToolStatus: "ok"},
			{Assistant: `\boxed{42}`}}},
			"user:\nWhat is 6*7?\n\nassistant:\n<code>print(6*7)</code>\n\ntool (ok):\n42\n\nassistant:\n\\boxed{42}"},
		{"external agent", event.Trajectory{Prompt: "ignored", Agent: &event.Agent{Opening: []envs.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "2+2?"}}},
			Turns: []event.Turn{
				{Assistant: "Let me run it.", ToolCalls: []envs.ToolCall{{Name: "python", Arguments: text(`{"code": "print(2+2)"}`)}},
					Sent: []envs.Message{{Role: "tool", Content: "4"}}},
				{Assistant: "4"}}},
			"system:\nBe brief.\n\nuser:\n2+2?\n\nassistant:\nLet me run it.\ntool call python {\"code\": \"print(2+2)\"}\n\ntool:\n4\n\nassistant:\n4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Render(tc.tr); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		in       string
		from, to int
		bad      bool
	}{
		{"10-20", 10, 20, false}, {"7", 7, 7, false}, {"5-", 5, -1, false}, {"-3", 0, 3, false}, {"0-0", 0, 0, false},
		{"", 0, 0, true}, {"-", 0, 0, true}, {"4-2", 0, 0, true}, {"a-b", 0, 0, true}, {"1-2-3", 0, 0, true}, {"+1", 0, 0, true}, {"1.5", 0, 0, true},
	} {
		from, to, err := ParseSteps(tc.in)
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), "--steps")):
			t.Errorf("ParseSteps(%q) = %d, %d, %v; want an error naming --steps", tc.in, from, to, err)
		case !tc.bad && (err != nil || from != tc.from || to != tc.to):
			t.Errorf("ParseSteps(%q) = %d, %d, %v; want %d, %d", tc.in, from, to, err, tc.from, tc.to)
		}
	}
}
