package ui

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	_ "github.com/gomlx/compute/gobackend"

	"agentrl/engine"
	"agentrl/engine/device"
	"agentrl/engine/event"
	qmodel "agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/recipes"
	"agentrl/store"
)

// liveRun starts the engine's controller on a tiny random Qwen3 model with the Qwen tokenizer, the
// ReTool environment and the rules hinter, on the CPU, with the recipe fields over, storing into a
// fresh store; it returns the controller, the store, the event stream and the run's error.
func liveRun(t *testing.T, over map[string]string) (*engine.Controller, *store.Store, chan event.Event, chan error) {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join("..", "testdata", "fixtures", "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &qmodel.Config{Family: qmodel.Qwen3, VocabSize: tok.VocabSize(), HiddenSize: 16, IntermediateSize: 32, NumLayers: 1,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true}
	tiny := func() *qmodel.Model {
		m, err := qmodel.New(backend, qmodel.RandomParams(cfg, 1, 0.02), qmodel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	fields := map[string]string{
		"run.max_steps": "6", "rollout.tasks_per_step": "2", "rollout.group_size": "2", "rollout.max_turns": "2",
		"rollout.max_new_tokens": "12", "rollout.max_total_tokens": "128", "eval.every": "1", "eval.heldout_tasks": "2",
		"eval.n_samples": "2", "eval.ks": "1,2", "checkpoint.every": "1", "env.tasks.train_size": "16", "env.tasks.heldout_size": "4",
		"early_stop.patience": "0", "early_stop.max_drop": "0", "eval.validation_tasks": "2", "eval.validation_samples": "2",
	}
	for k, v := range over {
		fields[k] = v
	}
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: fields})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	events := make(chan event.Event, 64)
	c, err := engine.New(engine.Options{Recipe: r, RecipePath: "retool.yaml", RunID: "live", Policy: tiny(), Reference: tiny(),
		Tokenizer: tok, Store: st, Events: events, Backend: "go", ModelFiles: map[string][]byte{"config.json": []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(context.Background()); close(events) }()
	return c, st, events, runErr
}

// TestLiveTinyRun drives the workbench with the events of a real run and sends the user's stop
// (S, then y) through the workbench to the engine: the run must stop within its step, "stopped
// by the user", keep a loadable checkpoint, and the screens must show what it produced.
func TestLiveTinyRun(t *testing.T) {
	c, st, events, runErr := liveRun(t, nil)
	ctrl := Funcs{PauseFn: c.Pause, ResumeFn: c.Resume, StopFn: c.Stop, MarkBestFn: c.MarkBest, ExportFn: c.Export}
	tm := teatest.NewTestModel(t, newModel(config{events: events, ctrl: ctrl, store: st, runID: "live",
		memSample: func() uint64 { return 64 << 20 }}), teatest.WithInitialTermSize(120, 40))
	wait := func(what string) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(what)) },
			teatest.WithDuration(2*time.Minute), teatest.WithCheckInterval(20*time.Millisecond))
	}
	tm.Send(keyMsg("3"))
	wait("train-0000") // the first trajectory of step 1 is listed
	tm.Send(keyMsg("S"))
	wait("Stop the run now?")
	tm.Send(keyMsg("y"))
	wait("run stopped")
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	tm.Send(keyMsg("7"))
	wait("7 Checkpoints")
	tm.Send(tea.Quit())
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*model)
	view := final.View()
	for _, want := range []string{"run stopped: stopped by the user", "7 Checkpoints", "pass@1"} {
		if !strings.Contains(view, want) {
			t.Errorf("the final screen lacks %q:\n%s", want, view)
		}
	}
	run, err := st.GetRun("live")
	if err != nil || run.Status != "stopped" || run.StopReason != ReasonStop || run.Ended.IsZero() {
		t.Fatalf("stored run %+v (%v); want stopped by the user, with its end time", run, err)
	}
	end := c.End()
	if run.TotalSteps != 6 || end.Checkpoint == 0 || len(final.sh.data.ckpts) == 0 || len(final.sh.data.ckpts) >= 6 {
		t.Errorf("end %+v, checkpoints on screen: %d; want at least one and fewer than the 6 steps asked for", end, len(final.sh.data.ckpts))
	}
	if _, err := st.LoadCheckpoint("live", end.Checkpoint); err != nil {
		t.Error(err)
	}
}

// TestLiveQuitDuringEvaluation presses q while the start evaluation runs (2,048 trajectories): the
// workbench shows its trajectories, marked eval, and the ETA while it runs; q asks the run to stop
// and closes the workbench; the run drops the evaluation at once, records why, and keeps no
// checkpoint (nothing was trained).
func TestLiveQuitDuringEvaluation(t *testing.T) {
	c, st, events, runErr := liveRun(t, map[string]string{"eval.heldout_tasks": "128", "eval.n_samples": "16", "eval.ks": "1,2,4,8",
		"env.tasks.heldout_size": "128", "rollout.max_new_tokens": "96", "rollout.max_total_tokens": "512"})
	ctrl := Funcs{PauseFn: c.Pause, ResumeFn: c.Resume, StopFn: c.Stop, MarkBestFn: c.MarkBest, ExportFn: c.Export}
	tm := teatest.NewTestModel(t, newModel(config{events: events, ctrl: ctrl, store: st, runID: "live",
		memSample: func() uint64 { return 64 << 20 }}), teatest.WithInitialTermSize(120, 40))
	tm.Send(keyMsg("3"))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte("heldout-0000")) && bytes.Contains(b, []byte(" eval ")) && bytes.Contains(b, []byte("ETA eval "))
	}, teatest.WithDuration(2*time.Minute), teatest.WithCheckInterval(20*time.Millisecond))
	tm.Send(keyMsg("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(time.Minute))
	for range events { // the workbench is closed: the command line drains the stream as the run stops
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	end := c.End()
	if end.Status != "stopped" || end.Reason != ReasonQuit || !strings.HasPrefix(end.Detail, "the evaluation of step 0 was dropped") ||
		end.Checkpoint != 0 || end.Step != 0 {
		t.Errorf("end %+v; want stopped on quitting, the start evaluation dropped, no checkpoint", end)
	}
	run, err := st.GetRun("live")
	if err != nil || run.Status != "stopped" || run.StopReason != ReasonQuit || run.StopDetail != end.Detail {
		t.Errorf("stored run %+v (%v)", run, err)
	}
	if evals, err := st.Evals("live"); err != nil || len(evals) != 0 {
		t.Errorf("evaluations stored: %v (%v); want none (the only one was dropped)", evals, err)
	}
}
