package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"agentrl/engine"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/ui"
)

// runFlags are the recipe fields a run's command line overrides; each maps to a dotted recipe key
// that recipes.Load sets after the file and the AGENTRL_* environment.
type runFlags struct {
	maxSteps, seed                                      int
	model, backend, plugin, ui, runName, store, profile string
	set                                                 []string
	tensorboard                                         string // not a recipe field: where this process writes TensorBoard logs
}

// runCommand is the root command (agentrl-tui RECIPE.yaml) and `run RECIPE.yaml`: one recipe run.
func runCommand(env Env, use string) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: "run a recipe in the workbench (or headless: one line or JSON object per event)",
		Long: `Runs a recipe. Without --model (or model.path) it uses the built-in model. Any recipe field
can be set with --set section.field=value, or in the environment as AGENTRL_<SECTION>_<FIELD>;
the flags below are shorthands for the common ones.`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: recipeFiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if cmd.HasParent() {
					return usagef(cmd, "run: give a recipe, e.g. agentrl-tui run recipes/retool.yaml")
				}
				return usagef(cmd, "no recipe or sub-command given")
			}
			if err := oneArg(cmd, args); err != nil {
				return err
			}
			if !strings.HasSuffix(args[0], ".yaml") && !strings.HasSuffix(args[0], ".yml") {
				msg := fmt.Sprintf("unknown sub-command %q", args[0])
				if s := cmd.Root().SuggestionsFor(args[0]); len(s) > 0 {
					msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
				}
				return usagef(cmd, "%s; a recipe file ends in .yaml", msg)
			}
			return f.run(env, args[0])
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.maxSteps, "max-steps", 0, "override run.max_steps")
	fl.StringVar(&f.model, "model", "", "override model.path (a HuggingFace folder with tokenizer.json)")
	fl.StringVar(&f.backend, "backend", "", "override backend.kind: auto, go, cuda")
	fl.StringVar(&f.plugin, "plugin", "", "override backend.plugin: the PJRT CUDA plugin file, or a folder holding one")
	fl.StringVar(&f.ui, "ui", "", "override ui.mode: auto, tui, plain, json")
	fl.IntVar(&f.seed, "seed", 0, "override run.seed")
	fl.StringVar(&f.runName, "run-name", "", "override run.name")
	fl.StringVar(&f.store, "store", "", "override run.store (the bbolt file)")
	fl.StringVar(&f.profile, "cpuprofile", "", "write a Go CPU profile of the run to this file (go tool pprof)")
	fl.StringArrayVar(&f.set, "set", nil, "set any recipe field: --set train.lr=1e-5 (repeatable; lists comma-separated: eval.ks=1,2,4,8)")
	fl.StringVar(&f.tensorboard, "tensorboard", "", tensorboardUsage)
	return cmd
}

// overrides turns the flags into recipe keys; a flag left at its zero value overrides nothing.
func (f *runFlags) overrides() (map[string]string, error) {
	over := map[string]string{}
	for _, kv := range f.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want section.field=value, e.g. --set train.lr=1e-5", kv)
		}
		over[strings.TrimSpace(k)] = v
	}
	set := func(key, v string) {
		if v != "" && v != "0" {
			over[key] = v
		}
	}
	set("run.max_steps", strconv.Itoa(f.maxSteps))
	set("model.path", f.model)
	set("backend.kind", f.backend)
	set("backend.plugin", f.plugin)
	set("ui.mode", f.ui)
	set("run.seed", strconv.Itoa(f.seed))
	set("run.name", f.runName)
	set("run.store", f.store)
	return over, nil
}

func (f *runFlags) run(env Env, path string) error {
	if f.profile != "" {
		stop, err := startCPUProfile(f.profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	over, err := f.overrides()
	if err != nil {
		return err
	}
	r, err := recipes.Load(path, recipes.Options{Overrides: over})
	if err != nil {
		return err
	}
	// The seed is in the id: seeds started in the same second, each in a store of its own (a
	// running run holds its store's lock), would otherwise get the same id, and a comparison
	// across their stores could not tell them apart.
	runID := fmt.Sprintf("%s-s%d-%s", r.Run.Name, r.Run.Seed, time.Now().UTC().Format("20060102-150405"))
	return execute(env, engine.Launch{Recipe: r, RecipePath: path, RunID: runID}, f.tensorboard)
}

// resumeCommand continues a stored run from its latest checkpoint with the recipe it started with.
func resumeCommand(env Env) *cobra.Command {
	var storePath, uiMode, tensorboard string
	cmd := &cobra.Command{
		Use:   "resume --store PATH RUN [--tensorboard DIR]",
		Short: "continue a run from its latest checkpoint (weights, AdamW moments, data position)",
		Args:  oneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("resume: usage: agentrl-tui resume --store PATH RUN (agentrl-tui runs lists the runs)")
			}
			if st, err := store.Open(storePath, store.Options{ReadOnly: true}); err == nil {
				run, err := st.GetRun(args[0])
				st.Close()
				if err == nil && run.Kind == store.KindSFT {
					return resumeSFT(env, storePath, args[0], uiMode, tensorboard)
				}
			}
			r, path, err := storedRecipe(storePath, args[0])
			if err != nil {
				return err
			}
			if uiMode != "" {
				r.UI.Mode = uiMode
			}
			return execute(env, engine.Launch{Recipe: r, RecipePath: path, RunID: args[0], Resume: true}, tensorboard)
		},
	}
	cmd.Flags().StringVar(&storePath, "store", "runs/agentrl.db", "the store file")
	cmd.Flags().StringVar(&uiMode, "ui", "", "override ui.mode: auto, tui, plain, json")
	cmd.Flags().StringVar(&tensorboard, "tensorboard", "", tensorboardUsage)
	return cmd
}

// execute runs a launch to its end with the UI its recipe asks for: the workbench, plain lines or
// JSON Lines, and, with tensorboard, its TensorBoard logs in that folder. Every way out stops the
// run at its next safe point and says at once what it will do (see stop.go for the ways out and
// their exit statuses).
func execute(env Env, l engine.Launch, tensorboard string) error {
	mode, err := ui.Choose(l.Recipe.UI.Mode, isTerminal(env.Stdin), isTerminal(env.Stdout))
	if err != nil {
		return err
	}
	if err := checkTensorboard(tensorboard); err != nil {
		return err
	}
	l.Kernels = recipeKernels(env, l.Recipe) // may restart the process with other kernels
	// The output's reader may leave or stall; the run goes on regardless (pipe.go).
	env, flush := guardOutput(env, mode)
	events := make(chan event.Event, 256)
	l.Events, l.Log = events, env.Stderr
	l.Builtin = func() (string, error) { return model.BuiltinDir(env.Builtin) }
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, stopSignals...)
	defer func() { signal.Stop(sigs); close(sigs) }()
	flushIdle := outFlushIdle           // an abort waits less on a reader that takes nothing
	defer func() { flush(flushIdle) }() // before the signals go back to ending the process
	s, err := engine.Open(l)
	if err != nil {
		return err
	}
	// The logs are written from the stream the UI shows, never holding the run up.
	shown, boardDone := boardTee(env, tensorboard, events)
	if tensorboard != "" {
		fmt.Fprintf(env.Stderr, "tensorboard: writing %s (tensorboard --logdir %s)\n", filepath.Join(tensorboard, s.RunID()), tensorboard)
	}
	runErr := make(chan error, 1)
	go func() {
		runErr <- s.Run(context.Background())
		close(events)
	}()
	tuiCtx, closeTUI := context.WithCancel(context.Background())
	defer closeTUI()
	st := &stopper{sigs: sigs, aborted: make(chan int, 1),
		stop: func(reason string) { s.Stop(reason); closeTUI() },
		abort: func(reason string) string {
			said, err := s.Abort(reason)
			if err != nil {
				said += " (" + err.Error() + ")"
			}
			return said
		}}
	go st.watch()
	done := make(chan error, 1)
	go func() { done <- show(tuiCtx, env, mode, s, l, shown, runErr) }()
	aborted := -1
	select {
	case aborted = <-st.aborted:
	case err = <-done:
		if st.endOrAbort() { // a second signal came as the run ended: it still aborts
			aborted = <-st.aborted
		}
	}
	if aborted >= 0 { // the run may be mid-computation: the process exits without closing it
		fmt.Fprintln(env.Stderr, "agentrl-tui:", st.said)
		flushIdle = outAbortIdle
		return exitStatus(aborted)
	}
	s.Close()
	boardDone()
	if s.Cache != nil { // what a later run on this machine will not compile again
		fmt.Fprintln(env.Stderr, s.Cache.Stats())
	}
	if end := s.End(); end.Status != "" && mode != ui.ModeTUI && outputGone(env.Stdout) && !outputGone(env.Stderr) {
		fmt.Fprintln(env.Stderr, "agentrl-tui:", ui.EndLine(end)) // how it ended, where it can be read
	}
	if err != nil {
		return err
	}
	if code := st.status(); code != 0 {
		return exitStatus(code)
	}
	return nil
}

// show runs the UI on the run's events until the run ends and returns the run's error (else the
// UI's). When the workbench closes first (q, ctrl+c, a signal), the run is asked to stop, what it
// will do is printed at once, and then how it ended.
func show(ctx context.Context, env Env, mode string, s *engine.Session, l engine.Launch, events <-chan event.Event, runErr <-chan error) error {
	var err error
	switch mode {
	case ui.ModeJSON:
		err = ui.JSONLines(env.Stdout, events)
	case ui.ModeTUI:
		o := ui.Options{Events: events, Store: s.Store, RunID: s.RunID(), Output: env.Stdout, NoSignals: true,
			Control: ui.Funcs{PauseFn: s.Pause, ResumeFn: s.Resume, StopFn: s.Stop, MarkBestFn: s.MarkBest, ExportFn: s.Export}}
		if env.Stdin != os.Stdin {
			o.Input = env.Stdin // a test's keys; the process's own stdin is bubbletea's to open (or its TTY)
		}
		err = ui.RunTUI(ctx, o)
		if errors.Is(err, context.Canceled) {
			err = nil // a signal closed the workbench; the run is stopping
		}
	default:
		err = ui.Plain(env.Stdout, events)
	}
	drained := make(chan struct{})
	go func() { // the UI is done reading: the engine must never block on the stream
		for range events {
		}
		close(drained)
	}()
	if mode == ui.ModeTUI {
		if msg := s.Stop(ui.ReasonQuit); msg != "" { // "" when the run had ended: nothing to stop
			fmt.Fprintln(env.Stdout, msg)
		}
	}
	rerr := <-runErr
	<-drained
	if mode == ui.ModeTUI {
		fmt.Fprintf(env.Stdout, "%s; store %s\n", ui.EndLine(s.End()), l.Recipe.Run.Store)
	}
	if rerr != nil {
		return rerr
	}
	return err
}

// recipeFiles completes a recipe argument with YAML files.
func recipeFiles(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

// startCPUProfile profiles the process into path until the returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// storedRecipe reads the recipe a stored run started with (what resume continues with) and
// points it at that store: the recipe, and the path the run was started from.
func storedRecipe(storePath, runID string) (*recipes.Recipe, string, error) {
	st, err := store.Open(storePath, store.Options{ReadOnly: true})
	if err != nil {
		return nil, "", err
	}
	run, err := st.GetRun(runID)
	st.Close()
	if err != nil {
		return nil, "", err
	}
	var r recipes.Recipe
	if err := json.Unmarshal([]byte(run.RecipeYAML), &r); err != nil {
		return nil, "", fmt.Errorf("resume: the stored recipe of run %s is unreadable: %w", runID, err)
	}
	if err := r.Validate(); err != nil {
		return nil, "", fmt.Errorf("resume: the stored recipe of run %s: %w", runID, err)
	}
	r.Run.Store = storePath
	return &r, run.Recipe, nil
}
