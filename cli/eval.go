package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"agentrl/engine"
	"agentrl/engine/evalset"
	"agentrl/recipes"
	"agentrl/store"
)

// evalFlags are `eval`'s flags: what to evaluate (a model folder or a stored checkpoint), on
// which evaluation set, with how many samples, and the recipe overrides `run` takes.
type evalFlags struct {
	model, storePath, run, set, ui, backend, plugin string
	step, samples                                   int
	sets                                            []string
}

// evalCommand is `eval RECIPE`: one evaluation, stored as a run of its own.
func evalCommand(env Env) *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval RECIPE.yaml (--model DIR | --store PATH --run RUN --step N) [--eval-set NAME] [--samples N] [--ui tui|plain|json] [--set key=value ...]",
		Short: "pass@k of a model folder or a stored checkpoint on the recipe's evaluation tasks, stored as an evaluation run",
		Long: `Scores a model on the recipe's evaluation tasks without training: pass@k for the recipe's eval.ks,
from eval.n_samples samples per task (--samples), by the training loop's own evaluation, so the
numbers are those a training run's evaluation would give. The model is a HuggingFace folder
(--model, a PEFT-merged or exported one included; without it the recipe's model.path, else the
built-in model) or a stored checkpoint (--store PATH --run RUN --step N). The sampling seed is
run.seed and the step: a checkpoint of step N, or a model at step 0, with the training run's
seed gets that run's evaluation of step N.

The evaluation is stored as a run of its own (kind eval, naming what it evaluated) in --store,
else the recipe's run.store: runs lists it, view walks its trajectories, and compare sets it
against a training run's evaluations. It shows in the workbench, or as plain or JSON lines.

--eval-set picks the tasks: heldout (the first eval.heldout_tasks held-out tasks, as training
runs evaluate: every data.eval set together), one data.eval set by its name (aime24), or
validation (the eval.validation_tasks validation tasks).`,
		Example: "  agentrl-tui eval recipes/retool.yaml --ui plain\n" +
			"  agentrl-tui eval recipes/retool.yaml --store runs/agentrl.db --run retool-hybrid-s1-20261125-170419 --step 30\n" +
			"  agentrl-tui eval recipes/retool.yaml --model export/merged --eval-set validation --samples 4 --set eval.ks=1,2,4",
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: recipeFiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef(cmd, "eval: give one recipe, e.g. agentrl-tui eval recipes/retool.yaml --model DIR; got %d arguments", len(args))
			}
			l, err := f.launch(cmd, args[0])
			if err != nil {
				return err
			}
			err = execute(env, l, "")
			// The sets are the tasks' own (evalset.Names until tasks name others): the
			// engine knows them once the tasks are loaded, before anything is evaluated or stored.
			if use := (*evalset.UnknownError)(nil); errors.As(err, &use) {
				return usagef(cmd, "eval: --eval-set %q is not an evaluation set of this recipe; give one of %s, e.g. --eval-set %s", use.Name, strings.Join(use.Sets, ", "), use.Sets[0])
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "the HuggingFace folder to evaluate (default: the recipe's model.path, else the built-in model)")
	fl.StringVar(&f.storePath, "store", "", "the store file: where --run's checkpoint is read and the evaluation run is written (default: the recipe's run.store)")
	fl.StringVar(&f.run, "run", "", "evaluate a checkpoint of this stored run (agentrl-tui runs lists them); needs --step")
	fl.IntVar(&f.step, "step", -1, "the checkpoint step of --run to evaluate")
	fl.StringVar(&f.set, "eval-set", evalset.Heldout, "the evaluation set: "+strings.Join(evalset.Names(), ", ")+" or a data.eval set's name")
	fl.IntVar(&f.samples, "samples", 0, "samples per task (override eval.n_samples; eval.ks above it are left out)")
	fl.StringVar(&f.ui, "ui", "", "override ui.mode: auto, tui, plain, json")
	fl.StringVar(&f.backend, "backend", "", "override backend.kind: auto, go, cuda")
	fl.StringVar(&f.plugin, "plugin", "", "override backend.plugin: the PJRT CUDA plugin (xla_cuda_plugin.so)")
	fl.StringArrayVar(&f.sets, "set", nil, "set any recipe field: --set run.seed=2 (repeatable; lists comma-separated: eval.ks=1,2,4,8)")
	return cmd
}

// launch checks the flags and loads the recipe: the evaluation run to open.
func (f *evalFlags) launch(cmd *cobra.Command, path string) (engine.Launch, error) {
	fl := cmd.Flags()
	switch {
	case f.model != "" && f.run != "":
		return engine.Launch{}, usagef(cmd, "eval: --model and --run both name a model to evaluate; give --model DIR for a folder, or --store PATH --run RUN --step N for a stored checkpoint")
	case f.run == "" && fl.Changed("step"):
		return engine.Launch{}, usagef(cmd, "eval: --step %d names a checkpoint step, but no --run; add --run RUN (agentrl-tui runs --store PATH lists the runs)", f.step)
	case f.run != "" && f.storePath == "":
		return engine.Launch{}, usagef(cmd, "eval: --run %s needs --store PATH, the store that holds the run", f.run)
	case f.samples < 0:
		return engine.Launch{}, usagef(cmd, "eval: --samples %d: give a number of samples per task, at least 1", f.samples)
	}
	if f.run != "" {
		if err := checkCheckpoint(f.storePath, f.run, f.step); err != nil {
			return engine.Launch{}, err
		}
	}
	over := map[string]string{}
	for _, kv := range f.sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return engine.Launch{}, fmt.Errorf("--set %q: want section.field=value, e.g. --set run.seed=2", kv)
		}
		over[strings.TrimSpace(k)] = v
	}
	for key, v := range map[string]string{"model.path": f.model, "run.store": f.storePath, "ui.mode": f.ui, "backend.kind": f.backend, "backend.plugin": f.plugin} {
		if v != "" {
			over[key] = v
		}
	}
	if f.samples > 0 {
		over["eval.n_samples"] = strconv.Itoa(f.samples)
		if _, set := over["eval.ks"]; !set { // the recipe's ks that the samples allow
			base := map[string]string{}
			for k, v := range over {
				if k != "eval.n_samples" {
					base[k] = v
				}
			}
			r, err := recipes.Load(path, recipes.Options{Overrides: base})
			if err != nil {
				return engine.Launch{}, err
			}
			var ks []string
			for _, k := range r.Eval.Ks {
				if k <= f.samples {
					ks = append(ks, strconv.Itoa(k))
				}
			}
			over["eval.ks"] = strings.Join(ks, ",")
		}
	}
	r, err := recipes.Load(path, recipes.Options{Overrides: over})
	if err != nil {
		return engine.Launch{}, err
	}
	if f.model != "" {
		r.Model.Path = f.model
	}
	e := &engine.EvalOnly{Set: f.set}
	if f.run != "" {
		e.Store, e.Run, e.Step = f.storePath, f.run, f.step
	}
	runID := fmt.Sprintf("%s-eval-s%d-%s", r.Run.Name, r.Run.Seed, time.Now().UTC().Format("20060102-150405"))
	return engine.Launch{Recipe: r, RecipePath: path, RunID: runID, Eval: e}, nil
}

// checkCheckpoint refuses a checkpoint that is not there, naming the flag to change.
func checkCheckpoint(path, run string, step int) error {
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("eval: --store: %w", err)
	}
	defer st.Close()
	if _, err := st.GetRun(run); err != nil {
		return fmt.Errorf("eval: --run %s: %w (agentrl-tui runs --store %s lists the runs)", run, err, path)
	}
	cps, err := st.Checkpoints(run)
	if err != nil {
		return err
	}
	steps := make([]string, len(cps))
	for i, m := range cps {
		if m.Step == step {
			return nil
		}
		steps[i] = strconv.Itoa(m.Step)
	}
	switch {
	case len(cps) == 0:
		return fmt.Errorf("eval: --run %s has no checkpoint to evaluate", run)
	case step < 0:
		return fmt.Errorf("eval: --run %s needs --step N, the checkpoint to evaluate: one of %s", run, strings.Join(steps, ", "))
	}
	return fmt.Errorf("eval: --step %d: run %s has no checkpoint at step %d; give --step one of %s", step, run, step, strings.Join(steps, ", "))
}
