package engine

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	_ "github.com/gomlx/compute/gobackend"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/play"
	"agentrl/engine/tokenizer"
	"agentrl/recipes"
	"agentrl/store"
)

// testTokenizer is the built-in model's tokenizer: the chat specials and tool-call tags the
// recipes use, with a 392-token vocabulary. (With the Qwen3 tokenizer's 151,643 tokens, the
// softmax over the vocabulary took nearly all of these tests' time.)
func testTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join("..", model.BuiltinSourceDir))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tinyConfig is the one-layer Qwen3 shape the controller tests run with random weights, over
// tok's vocabulary.
func tinyConfig(tok *tokenizer.Tokenizer) *model.Config {
	return &model.Config{Family: model.Qwen3, VocabSize: tok.VocabSize(), HiddenSize: 16, IntermediateSize: 32, NumLayers: 1,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true}
}

// tinyRun builds a controller for a short run of the ReTool recipe on a tiny random model with the
// built-in tokenizer, storing into a fresh store; extra overrides the recipe fields given.
func tinyRun(t *testing.T, extra map[string]string) (*Controller, *store.Store, chan event.Event) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, events := tinyRunOn(t, st, extra, nil)
	return c, st, events
}

// tinyRunOn is tinyRun on a given store, resuming from resume when it is not nil.
func tinyRunOn(t *testing.T, st *store.Store, extra map[string]string, resume *store.Checkpoint) (*Controller, chan event.Event) {
	t.Helper()
	return tinyRunWith(t, st, extra, func(o *Options) { o.Resume = resume })
}

// tinyRunWith is tinyRunOn with the controller's options changed by opts before it is built.
func tinyRunWith(t *testing.T, st *store.Store, extra map[string]string, opts func(*Options)) (*Controller, chan event.Event) {
	t.Helper()
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(tok)
	policy, err := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reference, err := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	over := map[string]string{
		"run.max_steps": "2", "rollout.tasks_per_step": "2", "rollout.group_size": "2", "rollout.max_turns": "2",
		"rollout.max_new_tokens": "12", "rollout.max_total_tokens": "128", "eval.every": "1", "eval.heldout_tasks": "2",
		"eval.n_samples": "2", "eval.ks": "1,2", "checkpoint.every": "1", "env.tasks.train_size": "8", "env.tasks.heldout_size": "4", "early_stop.patience": "10",
		"eval.validation_tasks": "2", "eval.validation_samples": "2",
	}
	for k, v := range extra {
		over[k] = v
	}
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: over})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.Event, 1024)
	o := Options{Recipe: r, RecipePath: "retool.yaml", RunID: "test-run", Policy: policy, Reference: reference,
		Tokenizer: tok, Store: st, Events: events, Backend: "go", ModelFiles: map[string][]byte{"config.json": []byte("{}")}}
	opts(&o)
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, events
}

// TestControllerEndToEnd runs the real loop — generator, ReTool environment with the Starlark
// executor, rules hinter and PRM, reference-model teacher, GRPO+OPD update, eval, checkpoints —
// for two steps on a tiny random model with the built-in tokenizer, and checks the event stream
// and the store.
func TestControllerEndToEnd(t *testing.T) {
	c, st, events := tinyRun(t, nil)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	phases := map[string]int{}
	seconds := map[int]map[string]float64{} // step → phase → seconds, as emitted
	counts := map[string]int{}
	var end event.RunEnd
	var evals []event.Eval
	for e := range events {
		counts[e.Type()]++
		switch v := e.(type) {
		case event.Trajectory:
			if v.Eval {
				counts["eval trajectory"]++
			}
		case event.Eval:
			evals = append(evals, v)
		case event.Phase:
			phases[v.Phase]++
			if seconds[v.Step] == nil {
				seconds[v.Step] = map[string]float64{}
			}
			seconds[v.Step][v.Phase] += v.Seconds
			if v.Seconds < 0 {
				t.Errorf("phase %s took %v s", v.Phase, v.Seconds)
			}
		case event.StepMetrics:
			if v.Metrics["logprob_diff_max"] > 1e-3 {
				t.Errorf("step %d: rollout/trainer log-prob mismatch %.2g with synced weights", v.Step, v.Metrics["logprob_diff_max"])
			}
			if q, ok := v.Metrics["tool_queue_s"]; !ok || q < 0 {
				t.Errorf("step %d: tool_queue_s = %v, %v; want the time trajectories waited for a sandbox worker", v.Step, q, ok)
			}
		case event.RunEnd:
			end = v
		case event.Alarm:
			t.Errorf("unexpected alarm: %+v", v)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"rollout", "score", "reference", "advantage", "train", "sync", "eval", "save"} {
		if phases[p] < 2 {
			t.Errorf("phase %s appeared %d times; want at least 2 (one per step)", p, phases[p])
		}
	}
	// eval runs at the start (recipe eval.at_start) and after each step, 2 tasks × 2 samples each.
	if counts["trajectory"] != 8+12 || counts["eval trajectory"] != 12 || counts["metrics"] != 2 || counts["eval"] != 3 || counts["checkpoint"] != 2 || end.Status != "finished" {
		t.Errorf("events %v, end %+v", counts, end)
	}
	// Each later evaluation reports its change since the first; on the same tasks the mean change
	// is the difference of the two means.
	for i, ev := range evals {
		if (i == 0) != (ev.Change == nil) {
			t.Errorf("eval %d at step %d: change %v", i, ev.Step, ev.Change)
		}
		for k, d := range ev.Change {
			if want := ev.PassAtK[k] - evals[0].PassAtK[k]; ev.Since != evals[0].Step || math.Abs(d.Mean-want) > 1e-12 || d.SE < 0 {
				t.Errorf("eval at step %d: pass@%d change %+v since %d; want mean %v since %d", ev.Step, k, d, ev.Since, want, evals[0].Step)
			}
		}
	}
	run, err := st.GetRun("test-run")
	if err != nil || run.Status != "finished" {
		t.Errorf("stored run %+v %v", run, err)
	}
	cps, _ := st.Checkpoints("test-run")
	if len(cps) == 0 {
		t.Fatal("no checkpoint stored")
	}
	if err := st.Verify("test-run", cps[len(cps)-1].Step); err != nil {
		t.Error(err)
	}
	trajs, _ := st.Trajectories("test-run", 2)
	if len(trajs) != 4 {
		t.Errorf("%d trajectories stored for step 2; want 4", len(trajs))
	}
	// every step's phase times are stored as emitted, the start evaluation's under step 0
	stored, err := st.Phases("test-run")
	if err != nil || !reflect.DeepEqual(stored, seconds) || len(stored[0]) != 1 || len(stored[2]) != 8 {
		t.Errorf("stored phase times %v (%v); want the emitted %v", stored, err, seconds)
	}
}

// runStoppedAfter runs c to its end, stopping it right after step stopAfter's update (0: never;
// on the run's goroutine, so the stop lands there), shows every event to see (nil: none), and
// returns each step's metrics.
func runStoppedAfter(t *testing.T, c *Controller, events chan event.Event, stopAfter int, see func(event.Event)) map[int]map[event.Metric]float64 {
	t.Helper()
	c.opts.hooks.onEmit = func(e event.Event) {
		if m, ok := e.(event.StepMetrics); ok && m.Step == stopAfter {
			c.Stop("stopped by the user")
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	metrics := map[int]map[event.Metric]float64{}
	for e := range events {
		if see != nil {
			see(e)
		}
		if m, ok := e.(event.StepMetrics); ok {
			metrics[m.Step] = m.Metrics
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return metrics
}

// TestResumeMatchesUninterrupted: a run stopped after step 1 and resumed from its checkpoint
// (weights, AdamW moments, data position) produces the same step-2 metrics as a run that went
// straight through, on the CPU backend.
func TestResumeMatchesUninterrupted(t *testing.T) {
	tok := testTokenizer(t)
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(tok)
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: map[string]string{
		"run.max_steps": "2", "rollout.tasks_per_step": "2", "rollout.group_size": "2", "rollout.max_turns": "2",
		"rollout.max_new_tokens": "10", "rollout.max_total_tokens": "128", "eval.every": "1", "eval.at_start": "true",
		"eval.heldout_tasks": "2", "eval.n_samples": "2", "eval.ks": "1,2", "checkpoint.every": "1",
		"env.tasks.train_size": "8", "env.tasks.heldout_size": "4", "early_stop.patience": "10", "train.lr": "0.01",
		"eval.validation_tasks": "2", "eval.validation_samples": "2",
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	changes := map[string]map[int]event.Delta{} // run id and step → the step's eval change
	run := func(id string, resume *store.Checkpoint, stopAfter int) map[int]map[event.Metric]float64 {
		policy, _ := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
		reference, _ := model.New(backend, model.RandomParams(cfg, 1, 0.02), model.Options{})
		events := make(chan event.Event, 1024)
		c, err := New(Options{Recipe: r, RunID: id, Policy: policy, Reference: reference, Tokenizer: tok, Store: st, Events: events, Resume: resume})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return runStoppedAfter(t, c, events, stopAfter, func(e event.Event) {
			if ev, ok := e.(event.Eval); ok {
				changes[fmt.Sprint(id, ev.Step)] = ev.Change
			}
		})
	}
	straight := run("straight", nil, 0)
	first := run("interrupted", nil, 1)
	if _, ran := first[2]; ran {
		t.Fatal("the interrupted run did not stop after step 1")
	}
	cp, err := st.LoadCheckpoint("interrupted", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Moments) == 0 {
		t.Fatal("the checkpoint holds no optimizer moments")
	}
	resumed := run("interrupted", cp, 0)
	if _, again := resumed[1]; again {
		t.Error("the resumed run repeated step 1")
	}
	for _, k := range []event.Metric{"loss", "reward_mean", "grad_norm", "clip_frac", "logprob_diff_max", "lr"} {
		if straight[2][k] != resumed[2][k] {
			t.Errorf("step 2 %s: uninterrupted %v, resumed %v", k, straight[2][k], resumed[2][k])
		}
	}
	// The resumed run compares its evaluations with the step-0 one it finds in the store.
	if got, want := changes["interrupted2"], changes["straight2"]; want == nil || !reflect.DeepEqual(got, want) {
		t.Errorf("step 2 eval change: resumed %v, uninterrupted %v", got, want)
	}
	if runRec, _ := st.GetRun("interrupted"); runRec.Status != "finished" {
		t.Errorf("resumed run status %q", runRec.Status)
	}
}

// TestPauseStopMarkBestExport drives the commands the workbench sends: a run paused during its
// first step and asked to stop while it waits ends with that step, "stopped by the user", and
// its checkpoint can then be marked best and exported as a loadable folder.
func TestPauseStopMarkBestExport(t *testing.T) {
	c, st, events := tinyRun(t, map[string]string{"run.max_steps": "3"})
	c.opts.hooks.onEmit = func(e event.Event) { // on the run's goroutine: it pauses before step 2
		if m, ok := e.(event.StepMetrics); ok && m.Step == 1 {
			c.Pause()
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	var steps []int
	var end event.RunEnd
	for e := range events {
		switch v := e.(type) {
		case event.Checkpoint:
			if v.Step == 1 { // step 1 is saved; the loop waits on the pause, or is about to
				c.Stop("stopped by the user")
			}
		case event.StepMetrics:
			steps = append(steps, v.Step)
		case event.RunEnd:
			end = v
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || end.Status != "stopped" || end.Reason != "stopped by the user" || end.Checkpoint != 1 {
		t.Fatalf("steps run %v, end %+v; want step 1 only, stopped by the user, checkpoint 1", steps, end)
	}
	if err := c.MarkBest(7); err == nil {
		t.Error("marking a step without a checkpoint as best succeeded")
	}
	if err := c.MarkBest(1); err != nil {
		t.Fatal(err)
	}
	run, err := st.GetRun("test-run")
	if err != nil || run.BestStep != 1 || run.Status != "stopped" {
		t.Errorf("stored run %+v (%v); want best step 1, status stopped", run, err)
	}
	dir, err := c.Export(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("export %s: %v", dir, err)
		}
	}
}

// TestMarkedBestSurvivesRetentionAndResume marks step 1 best after a one-step run, then resumes
// the run for three more steps keeping only the last checkpoint and none by metric: step 1's
// checkpoint must survive every retention pass, and the run must end naming it best.
func TestMarkedBestSurvivesRetentionAndResume(t *testing.T) {
	quick := map[string]string{"run.max_steps": "1", "eval.every": "0", "eval.at_start": "false", "checkpoint.keep_best": "0",
		"early_stop.patience": "0", "early_stop.max_drop": "0"}
	c, st, events := tinyRun(t, quick)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	for range events {
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := c.MarkBest(1); err != nil {
		t.Fatal(err)
	}
	cp, err := st.LoadCheckpoint("test-run", 1)
	if err != nil {
		t.Fatal(err)
	}
	quick["run.max_steps"], quick["checkpoint.keep_last"] = "4", "1"
	c2, events2 := tinyRunOn(t, st, quick, cp)
	go func() { errc <- c2.Run(context.Background()); close(events2) }()
	var end event.RunEnd
	var start event.RunStart
	for e := range events2 {
		switch v := e.(type) {
		case event.RunStart:
			start = v
		case event.RunEnd:
			end = v
		}
	}
	if start.MarkedBest != 1 || !end.Marked {
		t.Errorf("resumed run start %+v, end %+v; want the mark of step 1 announced at both", start, end)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var steps []int
	ms, err := st.Checkpoints("test-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		steps = append(steps, m.Step)
	}
	if fmt.Sprint(steps) != "[1 4]" {
		t.Errorf("checkpoints kept %v; want [1 4] (the marked best and the last)", steps)
	}
	run, err := st.GetRun("test-run")
	if err != nil || run.BestStep != 1 || !run.BestPinned || end.BestStep != 1 {
		t.Errorf("stored run best %d pinned %v (%v), run end best %d; want best step 1, pinned", run.BestStep, run.BestPinned, err, end.BestStep)
	}
}

// TestSkippedSyncRaisesAlarms leaves the inference weights stale after step 1's update: the
// post-sync check flags step 1 (stale_weights), and step 2's log-prob probe — rollout log-probs
// from the old weights against the trainer's new ones — raises logprob_mismatch. Step 3, after
// a real sync, is clean again.
func TestSkippedSyncRaisesAlarms(t *testing.T) {
	c, _, events := tinyRun(t, map[string]string{"run.max_steps": "3", "train.lr": "0.01", "train.warmup_steps": "0",
		"eval.at_start": "false"})
	c.dev.SkipSync = func(step int) bool { return step == 1 }
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	alarms := map[string][]int{}
	probe := map[int]float64{}
	for e := range events {
		switch v := e.(type) {
		case event.Alarm:
			alarms[v.Kind] = append(alarms[v.Kind], v.Step)
		case event.StepMetrics:
			probe[v.Step] = v.Metrics["logprob_diff_max"]
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Logf("log-prob probe per step: %v", probe)
	if got := alarms[event.AlarmStaleWeights]; len(got) != 1 || got[0] != 1 {
		t.Errorf("stale_weights alarms at steps %v; want [1]", got)
	}
	if got := alarms[event.AlarmLogProbMismatch]; len(got) != 1 || got[0] != 2 {
		t.Errorf("logprob_mismatch alarms at steps %v; want [2] (probe %v)", got, probe)
	}
	if probe[1] > 1e-3 || probe[3] > 1e-3 {
		t.Errorf("probe with synced weights: step 1 %.2g, step 3 %.2g; want ≤ 1e-3", probe[1], probe[3])
	}
}

// runEvents runs c to its end and returns its events.
func runEvents(t *testing.T, c *Controller, events chan event.Event) []event.Event {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	var out []event.Event
	for e := range events {
		out = append(out, e)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return out
}

// runPrint is what two runs with the same seed must share to the bit: each trajectory's event
// (its tools' seconds, a timing, zeroed) and each metric and evaluation that is not a timing,
// both sorted, as trajectories are emitted in completion order.
type runPrint struct{ trajs, metrics []string }

// printOf is the runPrint of a run's events.
func printOf(events []event.Event) runPrint {
	var p runPrint
	for _, e := range events {
		switch v := e.(type) {
		case event.Trajectory:
			v.Turns = slices.Clone(v.Turns)
			for i := range v.Turns {
				v.Turns[i].ToolSeconds = 0
			}
			line, _ := event.Marshal(v)
			p.trajs = append(p.trajs, string(line))
		case event.StepMetrics:
			for k, x := range v.Metrics {
				if !strings.HasSuffix(string(k), "_s") && k != "tool_stall_share" { // timings
					p.metrics = append(p.metrics, fmt.Sprintf("%d %s %v", v.Step, k, x))
				}
			}
		case event.Eval:
			p.metrics = append(p.metrics, fmt.Sprintf("eval %d %v", v.Step, v.PassAtK))
		}
	}
	slices.Sort(p.trajs)
	slices.Sort(p.metrics)
	return p
}

// sameRun fails t where b's trajectories or metrics differ from a's, naming the first that does.
func sameRun(t *testing.T, a, b runPrint) {
	t.Helper()
	for i := range a.trajs {
		if i >= len(b.trajs) || a.trajs[i] != b.trajs[i] {
			t.Fatalf("trajectory %d differs:\n%s\nvs\n%s", i, a.trajs[i], b.trajs[min(i, len(b.trajs)-1)])
		}
	}
	if len(a.trajs) != len(b.trajs) {
		t.Fatalf("%d trajectories, then %d", len(a.trajs), len(b.trajs))
	}
	if !slices.Equal(a.metrics, b.metrics) {
		t.Errorf("metrics differ:\n%v\nvs\n%v", a.metrics, b.metrics)
	}
}

// noEval is the recipe overrides of a run without evaluations.
func noEval(extra map[string]string) map[string]string {
	over := map[string]string{"eval.every": "0", "eval.at_start": "false", "early_stop.patience": "0", "early_stop.max_drop": "0", "checkpoint.keep_best": "0"}
	for k, v := range extra {
		over[k] = v
	}
	return over
}

// TestPPOEndToEnd runs ppo (value head, GAE over policy tokens) for two steps, then resumes a new
// controller from the step-1 checkpoint: the value head it restores is the one saved.
func TestPPOEndToEnd(t *testing.T) {
	over := noEval(map[string]string{"algorithm.name": "ppo", "hinter.kind": "none", "reward.process": "0", "prm.kind": "none"})
	c, st, events := tinyRun(t, over)
	var metrics []map[event.Metric]float64
	for _, e := range runEvents(t, c, events) {
		if m, ok := e.(event.StepMetrics); ok {
			metrics = append(metrics, m.Metrics)
		}
	}
	if len(metrics) != 2 {
		t.Fatalf("%d metrics events; want 2", len(metrics))
	}
	for i, m := range metrics {
		vl, ok := m["value_loss"]
		if !ok || math.IsNaN(vl) || vl < 0 {
			t.Errorf("step %d: value_loss %v (present %v); want a finite value ≥ 0", i+1, vl, ok)
		}
	}
	cp, err := st.LoadCheckpoint("test-run", 1)
	if err != nil {
		t.Fatal(err)
	}
	saved := map[string]bool{}
	for _, m := range cp.Moments {
		saved[m.Name] = true
	}
	for _, name := range []string{"value_head.weight", "value_head.bias", "m.value_head.weight", "v.value_head.bias"} {
		if !saved[name] {
			t.Errorf("checkpoint lacks %s", name)
		}
	}
	c2, _, _ := tinyRun(t, over)
	if err := c2.restore(cp); err != nil {
		t.Fatal(err)
	}
	_, got, _, _ := c2.trainer.ValueHead()
	w := got[0].Shape()
	vals := tensorFloats(t, got[0])
	var want []float32
	for _, m := range cp.Moments {
		if m.Name == "value_head.weight" {
			want, _ = m.Float32()
		}
	}
	if len(vals) != len(want) || len(vals) != w.Dimensions[0] {
		t.Fatalf("restored value head has %d values; saved %d", len(vals), len(want))
	}
	for i := range vals {
		if vals[i] != want[i] {
			t.Fatalf("restored value_head.weight[%d] = %v; saved %v", i, vals[i], want[i])
		}
	}
}

// TestOpenAIHinterEndToEnd points hinter.kind openai at a real HTTP server that answers every
// judge request with one bridge thought: failed trajectories carry it, the teacher scores them
// with it (hinted_share > 0), and the server saw chat-completions requests with the key.
func TestOpenAIHinterEndToEnd(t *testing.T) {
	const hint = "Print the result of the multiplication before answering."
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer test-key" {
			http.Error(w, "bad request "+r.URL.Path, http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"choices":[{"message":{"role":"assistant","content":"\\boxed{%s}"}}]}`, hint)
	}))
	defer srv.Close()
	t.Setenv("AGENTRL_TEST_JUDGE_KEY", "test-key")
	c, _, events := tinyRun(t, noEval(map[string]string{"run.max_steps": "1", "hinter.kind": "openai",
		"hinter.endpoint": srv.URL + "/v1", "hinter.model": "judge", "hinter.api_key_env": "AGENTRL_TEST_JUDGE_KEY",
		"hinter.max_hint_tokens": "128"})) // the judge's whole sentence, in the built-in tokenizer's small vocabulary
	hinted, share := 0, -1.0
	for _, e := range runEvents(t, c, events) {
		switch v := e.(type) {
		case event.Trajectory:
			if v.Hint != "" {
				hinted++
				if v.Hint != hint {
					t.Errorf("trajectory hint %q; want %q", v.Hint, hint)
				}
			}
		case event.StepMetrics:
			share = v.Metrics["hinted_share"]
		}
	}
	if requests.Load() == 0 || hinted == 0 || share <= 0 {
		t.Errorf("judge requests %d, hinted trajectories %d, hinted_share %v; want all > 0", requests.Load(), hinted, share)
	}
}

// TestSelfJudgeRuns uses the policy itself as hinter and process judge. A random tiny model never
// writes a usable \boxed{}, so every reply counts in judge_unparsed and falls back to no hint and
// the rules' process score; the step still completes.
func TestSelfJudgeRuns(t *testing.T) {
	c, _, events := tinyRun(t, noEval(map[string]string{"run.max_steps": "1", "hinter.kind": "self", "prm.kind": "judge"}))
	var m map[event.Metric]float64
	for _, e := range runEvents(t, c, events) {
		if v, ok := e.(event.StepMetrics); ok {
			m = v.Metrics
		}
	}
	if m == nil || m["judge_unparsed"] < 1 {
		t.Errorf("step metrics %v; want judge_unparsed ≥ 1 (the random model's replies)", m)
	}
}

func tensorFloats(t *testing.T, x *tensors.Tensor) []float32 {
	t.Helper()
	v, err := tensors.CopyFlatData[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSameSeedSameRun runs the same one-step recipe twice — with the self judge as hinter and PRM,
// so that rollout, judge and eval requests all share the generator — and checks that the runs
// sample the same trajectories and compute the same metrics, bit for bit, as
// rollout.deterministic promises. Timings are the only numbers allowed to differ.
func TestSameSeedSameRun(t *testing.T) {
	run := func() runPrint {
		c, _, events := tinyRun(t, map[string]string{"hinter.kind": "self", "prm.kind": "judge", "run.max_steps": "1"})
		return printOf(runEvents(t, c, events))
	}
	p1 := run()
	if len(p1.trajs) < 4 {
		t.Fatalf("%d trajectories; want 1 step × 4 and evals", len(p1.trajs))
	}
	sameRun(t, p1, run())
}

func TestGradAccumulation(t *testing.T) {
	for _, tt := range []struct {
		tasks, group, micro, updates, set, want int
	}{
		{32, 8, 4, 2, 0, 32}, // the seed recipe: 256 trajectories, micro-batch 4, two updates of 32 micro-batches
		{32, 8, 3, 2, 0, 43}, // ⌈256/3⌉ = 86 micro-batches, 43 each
		{4, 16, 8, 0, 0, 0},  // unset: one update per pass (the trainer's 0)
		{4, 16, 8, 0, 3, 3},  // grad_accumulation as set
		{4, 16, 8, 1, 0, 0},  // one update per step is the trainer's default
		{4, 16, 8, 64, 0, 1}, // more updates than micro-batches: one micro-batch each
	} {
		r := recipes.Default()
		r.Rollout.TasksPerStep, r.Rollout.GroupSize = tt.tasks, tt.group
		r.Train.UpdatesPerStep, r.Train.GradAccumulation = tt.updates, recipes.AutoInt(tt.set)
		if got := gradAccumulation(r, tt.micro); got != tt.want {
			t.Errorf("%d×%d, micro %d, updates %d, set %d: %d micro-batches per update; want %d", tt.tasks, tt.group, tt.micro, tt.updates, tt.set, got, tt.want)
		}
	}
}

// Evaluation generates up to eval.max_new_tokens per call, training as rollout.max_new_tokens.
func TestPlayersFor(t *testing.T) {
	r := recipes.Default()
	r.Rollout.MaxNewTokens = 96
	c := &Controller{recipe: r, players: &play.Phase{Recipe: r}}
	for _, tc := range []struct {
		evalMax, evalTotal int
		phase              string
		want, wantTotal    int
	}{
		{0, 0, event.PhaseEval, 96, 512}, {256, 0, event.PhaseEval, 256, 512}, {256, 0, event.PhaseValidate, 256, 512}, {256, 0, event.PhaseRollout, 96, 512},
		{0, 1024, event.PhaseEval, 96, 1024}, {0, 256, event.PhaseValidate, 96, 256}, {256, 1024, event.PhaseRollout, 96, 512},
	} {
		r.Eval.MaxNewTokens, r.Eval.MaxTotalTokens = tc.evalMax, tc.evalTotal
		got := c.playersFor(tc.phase).Recipe.Rollout
		if got.MaxNewTokens != tc.want || got.MaxTotalTokens != tc.wantTotal {
			t.Errorf("eval.max_new_tokens %d, eval.max_total_tokens %d, %s: %d tokens per call in a context of %d; want %d in %d",
				tc.evalMax, tc.evalTotal, tc.phase, got.MaxNewTokens, got.MaxTotalTokens, tc.want, tc.wantTotal)
		}
	}
	if r.Rollout.MaxNewTokens != 96 || r.Rollout.MaxTotalTokens != 512 {
		t.Errorf("the recipe was changed: %d, %d", r.Rollout.MaxNewTokens, r.Rollout.MaxTotalTokens)
	}
}
