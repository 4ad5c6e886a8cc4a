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

// TestLiveTinyRun drives the workbench with the events of a real run — the engine's controller on
// a tiny random Qwen3 model with the Qwen tokenizer, the ReTool environment and the rules hinter,
// on the CPU — and sends the user's stop through the workbench to the engine: the run must end
// after the step in progress, stopped by the user, and the screens must show what it produced.
func TestLiveTinyRun(t *testing.T) {
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
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: map[string]string{
		"run.max_steps": "6", "rollout.tasks_per_step": "2", "rollout.group_size": "2", "rollout.max_turns": "2",
		"rollout.max_new_tokens": "12", "rollout.max_total_tokens": "128", "eval.every": "1", "eval.heldout_tasks": "2",
		"eval.n_samples": "2", "eval.ks": "1,2", "checkpoint.every": "1", "env.tasks.train_size": "16", "env.tasks.heldout_size": "4",
		"early_stop.patience": "0", "early_stop.max_drop": "0",
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events := make(chan event.Event, 64)
	c, err := engine.New(engine.Options{Recipe: r, RecipePath: "retool.yaml", RunID: "live", Policy: tiny(), Reference: tiny(),
		Tokenizer: tok, Store: st, Events: events, Backend: "go", ModelFiles: map[string][]byte{"config.json": []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(context.Background()); close(events) }()

	ctrl := Funcs{PauseFn: c.Pause, ResumeFn: c.Resume, StopFn: c.StopAfterStep, MarkBestFn: c.MarkBest, ExportFn: c.Export}
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
	wait("Stop the run after this step? (y/n)")
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
	if err != nil || run.Status != "stopped" || run.StopReason != "stopped by the user" {
		t.Fatalf("stored run %+v (%v); want stopped by the user", run, err)
	}
	if run.TotalSteps != 6 || len(final.sh.data.ckpts) == 0 || len(final.sh.data.ckpts) >= 6 {
		t.Errorf("checkpoints on screen: %d; want at least one and fewer than the 6 steps asked for", len(final.sh.data.ckpts))
	}
}
