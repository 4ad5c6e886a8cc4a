package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"agentrl/engine/compare"
	"agentrl/engine/event"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/store/safetensors"
	"agentrl/ui"
)

const defaultStore = "runs/agentrl.db"

// runsCommand lists the runs in a store.
func runsCommand(env Env) *cobra.Command {
	var path string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs --store PATH [--json]",
		Short: "runs in a store: status, steps, checkpoints, best pass@k per k",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer s.Close()
			if n := s.LiveNote(); n != "" {
				fmt.Fprintln(env.Stderr, n)
			}
			sums, err := s.Summaries()
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(env.Stdout, sums)
			}
			return store.WriteTable(env.Stdout, sums)
		},
	}
	cmd.Flags().StringVar(&path, "store", defaultStore, "the store file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// compareCommand sets two stored runs' evaluations of the same held-out tasks side by side.
func compareCommand(env Env) *cobra.Command {
	var paths []string
	var step int
	var asJSON bool
	var group string
	cmd := &cobra.Command{
		Use:   "compare --store PATH [--store PATH2 ...] RUN_A RUN_B [--step S] [--group G] [--json]",
		Short: "two runs' (or two recipes' seeds') held-out pass@k: A − B ± paired standard error",
		Long: `Sets two runs' held-out pass@k side by side at the last step both evaluated (or --step), with
A − B task by task and its paired standard error (per task, A's pass@k minus B's; their standard
deviation over √tasks). Runs evaluated on other tasks are refused, and so is a run without an
evaluation (a run evaluates only with eval.every or eval.at_start set in its recipe). A run is
named by its id, or by its name (--run-name) where one run has it, as runs prints both.

An evaluation run (agentrl-tui eval) has one evaluation, compared whatever its step: against the
training run's evaluation at --step, by default at the evaluation run's own step (0 for a model
folder, N for a checkpoint of step N) when the training run evaluated it, else its last one.

Several seeds at once: give comma-separated lists, seed i of A paired with seed i of B,
  agentrl-tui compare --store runs/agentrl.db A1,A2,A3 B1,B2,B3
Each pair is compared as above, each run's change since its own step-0 evaluation is added, and
the last table gives, per k, the mean over the seeds ± their spread / √n (the standard error of
an n-seed mean): A − B, A's change and B's change.

Runs made at the same time each write their own store (a running run holds its store's lock):
give every store, --store a.db --store b.db, and each run is read from the store that has it.
An id found in two of them (the same recipe and seed started in the same second, with other
--set values) is refused; name its store before it, as a.db:RUN.

--group compares on a part of the held-out tasks, drawn again from each run's stored recipe:
"level N", or for the named operations "named, taught" and "named, untaught" (the words SFT
leaves to RL, where a bridge thought carries what the problem does not).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef(cmd, "compare takes two run ids or names (agentrl-tui runs --store %s lists them); got %d", strings.Join(paths, ","), len(args))
			}
			var st compare.Stores
			for _, p := range paths {
				s, err := store.Open(p, store.Options{ReadOnly: true})
				if err != nil {
					return err
				}
				defer s.Close()
				if n := s.LiveNote(); n != "" {
					fmt.Fprintln(env.Stderr, n)
				}
				st = append(st, s)
			}
			var src compare.Source = st
			if group != "" {
				src = compare.GroupSource{Source: st, Group: group}
			}
			as, bs := splitRuns(args[0]), splitRuns(args[1])
			if len(as) > 1 || len(bs) > 1 {
				sc, err := compare.Seeds(src, as, bs, step)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(env.Stdout, sc)
				}
				printSeedComparison(env.Stdout, sc)
				return nil
			}
			c, err := compare.Runs(src, args[0], args[1], step)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(env.Stdout, c)
			}
			of := ""
			if group != "" {
				of = fmt.Sprintf(" (group %q)", group)
			}
			at := fmt.Sprintf("step %d", c.Step)
			if c.StepB != c.Step { // an evaluation run's own step against a training run's
				at = fmt.Sprintf("A step %d, B step %d", c.Step, c.StepB)
			}
			fmt.Fprintf(env.Stdout, "A %s\nB %s\n%s, %d held-out tasks%s; A − B task by task, ± paired standard error\n\n", c.A, c.B, at, c.Tasks, of)
			fmt.Fprintf(env.Stdout, "%-8s %7s %7s  %s\n", "", "A", "B", "A − B")
			for _, r := range c.Rows {
				fmt.Fprintf(env.Stdout, "%-8s %7.3f %7.3f  %+.3f ± %.3f\n", fmt.Sprintf("pass@%d", r.K), r.A, r.B, r.Diff, r.SE)
			}
			if c.Warning != "" {
				fmt.Fprintf(env.Stdout, "\nwarning: %s\n", c.Warning)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&paths, "store", []string{defaultStore}, "the store file; repeat it (or give a comma-separated list) to compare runs kept in several stores, such as runs made at the same time")
	cmd.Flags().IntVar(&step, "step", -1, "the evaluation step to compare (default: the last one both runs have)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&group, "group", "", `compare on these held-out tasks only: "level N", "named, taught" or "named, untaught"`)
	return cmd
}

// viewCommand opens a stored run read-only in the workbench.
func viewCommand(env Env) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "view --store PATH [RUN]",
		Short: "open a stored run (default: the newest) read-only in the workbench",
		Args:  oneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !isTerminal(env.Stdin) || !isTerminal(env.Stdout) {
				return errors.New("view: the workbench needs a terminal on stdin and stdout; for a listing without one use: agentrl-tui runs --store " + path)
			}
			st, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer st.Close()
			var runID string
			if len(args) > 0 {
				runID = args[0]
			} else {
				run, err := st.NewestRun()
				if err != nil {
					return fmt.Errorf("view: %w", err)
				}
				runID = run.ID
			}
			initial, err := ui.StoredEvents(st, runID)
			if err != nil {
				return fmt.Errorf("view: %w (agentrl-tui runs --store %s lists the runs)", err, path)
			}
			if live, _ := st.Live(); live {
				// A running run: its complete steps now, then each as the next one begins.
				initial, shown := completeSteps(initial, false)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				return ui.RunTUI(ctx, ui.Options{Initial: initial, Events: followLive(ctx, path, runID, shown), Store: st, RunID: runID})
			}
			if end, ok := interruptedEnd(st, runID); ok {
				initial = append(initial, end)
			}
			return ui.RunTUI(context.Background(), ui.Options{Initial: initial, Store: st, RunID: runID})
		},
	}
	cmd.Flags().StringVar(&path, "store", defaultStore, "the store file")
	return cmd
}

// interruptedEnd is the end shown for a run stored as running whose process is gone
// (store.Interrupted): status interrupted, why, where it stood and the command that continues it.
func interruptedEnd(st *store.Store, runID string) (event.RunEnd, bool) {
	run, err := st.GetRun(runID)
	if err != nil {
		return event.RunEnd{}, false
	}
	sum, err := st.Summary(run)
	if err != nil || sum.Status != store.StatusInterrupted {
		return event.RunEnd{}, false
	}
	evals, _ := st.Evals(runID)
	next := "no checkpoint to continue from: start it again"
	switch {
	case run.Kind == store.KindEval:
		next = "run the evaluation again"
	case sum.Resume != "":
		next = "continue it with: " + sum.Resume
	}
	return event.RunEnd{Status: store.StatusInterrupted, Reason: sum.Interrupted, Detail: next, BestStep: run.BestStep, Marked: run.BestPinned,
		Step: sum.LastStep, Checkpoint: sum.LastCheckpoint, Evaluations: len(evals), EvalOnly: run.Kind == store.KindEval, SFT: run.Kind == store.KindSFT}, true
}

// exportCommand writes a checkpoint as a HuggingFace folder, or a LoRA run's as a PEFT one, and a
// stored run's numbers as TensorBoard logs and tables.
func exportCommand(env Env) *cobra.Command {
	var path, run, dtype, shard, from string
	var step int
	var peft bool
	var data runExport
	cmd := &cobra.Command{
		Use: "export (--store PATH --run RUN [--step S] | --model DIR) [--peft | --dtype bf16 --shard-size 5GB] OUT_DIR\n" +
			"  agentrl-tui export --store PATH [--run RUN] [--tensorboard DIR] [--metrics FILE.csv|FILE.parquet] [--trajectories FILE.parquet|FILE.jsonl [--steps A-B] [--eval]]",
		Short: "write a checkpoint as a HuggingFace folder, or a run's numbers as TensorBoard logs and CSV/Parquet/JSONL tables",
		Long: "Writes a checkpoint as a HuggingFace folder (config.json, model.safetensors, tokenizer files); a LoRA\n" +
			"run's checkpoint is written with its adapters merged into the base weights. With --peft a LoRA run's\n" +
			"checkpoint is written as a PEFT adapter folder instead (adapter_config.json, adapter_model.safetensors),\n" +
			"to load with peft.PeftModel.from_pretrained(base_model, OUT_DIR). --dtype bf16 writes the weights in bfloat16\n" +
			"(half the bytes of the stored float32; config.json is copied as stored), and --shard-size splits them into\n" +
			"model-0000i-of-0000n.safetensors files with model.safetensors.index.json, as HuggingFace does for big models.\n" +
			"--model DIR writes a HuggingFace folder instead of a stored checkpoint through the same path, e.g. to\n" +
			"convert a float32 folder into bf16 shards.\n\n" +
			"A stored run's numbers (--run, default the newest run; OUT_DIR then optional):\n" +
			"  --tensorboard DIR     its TensorBoard event files in DIR/RUN (steps the folder has already are kept, not repeated)\n" +
			"  --metrics FILE        one row per step, one column per metric, phase time and pass@k (.csv or .parquet)\n" +
			"  --trajectories FILE   one row per trajectory (.parquet or .jsonl): the trained ones, or with --eval the\n" +
			"                        evaluations'; --steps A-B (or A, A-, -B) chooses the steps\n" +
			"The tags, columns and fields are in docs/export.md, with recipes for TensorBoard, W&B, pandas and DuckDB.",
		Args: oneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if data.any() {
				if from != "" {
					return errors.New("export: --tensorboard, --metrics and --trajectories write a stored run's numbers (--store PATH --run RUN); --model DIR has none")
				}
				if err := data.check(); err != nil {
					return err
				}
				if len(args) > 0 && run == "" {
					return errors.New("export: OUT_DIR takes a checkpoint of --run RUN: name the run (agentrl-tui runs lists them)")
				}
				if len(args) == 0 {
					for _, f := range []string{"step", "peft", "dtype", "shard-size"} {
						if cmd.Flags().Changed(f) {
							return fmt.Errorf("export: --%s chooses how a checkpoint is written to OUT_DIR; give OUT_DIR, or leave --%s out", f, f)
						}
					}
				}
				if err := data.write(env, path, run); err != nil {
					return err
				}
				if len(args) == 0 {
					return nil
				}
			}
			if len(args) == 0 || (run == "") == (from == "") {
				return errors.New("export: usage: agentrl-tui export (--store PATH --run RUN [--step S] | --model DIR) [--peft | --dtype bf16 --shard-size 5GB] OUT_DIR, or a run's numbers with --tensorboard DIR, --metrics FILE, --trajectories FILE")
			}
			if from != "" {
				if peft || step >= 0 {
					return errors.New("export: --model DIR takes neither --peft nor --step (they choose among a run's checkpoints)")
				}
				// The folder goes through a scratch store, so that it is written by the very code
				// that writes a run's checkpoints.
				tmp, err := os.MkdirTemp("", "agentrl-export-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				path, run, step = filepath.Join(tmp, "export.db"), "model", 0
				s, err := store.Open(path, store.Options{})
				if err != nil {
					return err
				}
				err = s.ImportHF(from, run, step)
				s.Close()
				if err != nil {
					return fmt.Errorf("export: --model %s: %w", from, err)
				}
			}
			s, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer s.Close()
			if step < 0 {
				m, err := s.LatestCheckpoint(run)
				if err != nil {
					return err
				}
				step = m.Step
			}
			var o store.ExportOptions
			switch strings.ToLower(dtype) {
			case "", "f32":
			case "bf16":
				o.DType = safetensors.BF16
			case "f16":
				o.DType = safetensors.F16
			default:
				return fmt.Errorf("export: --dtype %q is not one of f32, bf16, f16", dtype)
			}
			if shard != "" {
				if o.ShardBytes, err = recipes.ParseBytes(shard); err != nil {
					return fmt.Errorf("export: --shard-size: %w", err)
				}
			}
			if peft && (o.DType != "" || o.ShardBytes > 0) {
				return errors.New("export: --dtype and --shard-size apply to the merged model; --peft writes the adapters as stored")
			}
			export := func(run string, step int, dir string) error { return s.ExportWith(run, step, dir, o) }
			if peft {
				export = s.ExportPEFT
			}
			if err := export(run, step, args[0]); err != nil {
				return err
			}
			if from != "" {
				fmt.Fprintf(env.Stdout, "exported %s to %s\n", from, args[0])
				return nil
			}
			fmt.Fprintf(env.Stdout, "exported %s step %d to %s\n", run, step, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "store", defaultStore, "the store file")
	cmd.Flags().StringVar(&run, "run", "", "run id (agentrl-tui runs lists them)")
	cmd.Flags().IntVar(&step, "step", -1, "checkpoint step (default: the latest)")
	cmd.Flags().BoolVar(&peft, "peft", false, "write a LoRA run's adapters as a PEFT folder instead of the merged model")
	cmd.Flags().StringVar(&dtype, "dtype", "f32", "dtype of the written weights: f32 (as stored), bf16 or f16")
	cmd.Flags().StringVar(&from, "model", "", "a HuggingFace model folder to write instead of a stored checkpoint (in --dtype, in --shard-size shards)")
	cmd.Flags().StringVar(&shard, "shard-size", "", "split the weights into shards of at most this size, e.g. 5GB (default: one model.safetensors)")
	cmd.Flags().StringVar(&data.tensorboard, "tensorboard", "", "write the run's TensorBoard event files in DIR/RUN (tensorboard --logdir DIR)")
	cmd.Flags().StringVar(&data.metrics, "metrics", "", "write the run's metrics, one row per step, to FILE.csv or FILE.parquet")
	cmd.Flags().StringVar(&data.trajectories, "trajectories", "", "write the run's trajectories, one row each, to FILE.parquet or FILE.jsonl")
	cmd.Flags().StringVar(&data.steps, "steps", "", "with --trajectories: the steps written, A-B, A, A- or -B (default: all)")
	cmd.Flags().BoolVar(&data.eval, "eval", false, "with --trajectories: the evaluations' trajectories (a run keeps them with eval.store_trajectories), not the trained ones")
	return cmd
}

// liveEvery is how often a view of a running run reads its live snapshot again.
const liveEvery = 2 * time.Second

// eventStep is the step an event of a stored run belongs to (false: the run's own, RunStart or
// RunEnd).
func eventStep(e event.Event) (int, bool) {
	switch e := e.(type) {
	case event.Phase:
		return e.Step, true
	case event.StepMetrics:
		return e.Step, true
	case event.Trajectory:
		return e.Step, true
	case event.Eval:
		return e.Step, true
	case event.Checkpoint:
		return e.Step, true
	}
	return 0, false
}

// completeSteps keeps the events of a running run's replay up to its last complete step: the
// newest step may still be being written (its metrics before its trajectories or checkpoint), so
// it waits until a later one appears, or until the run has ended (ended). It returns the kept
// events and the last step they hold (0: none).
func completeSteps(evs []event.Event, ended bool) ([]event.Event, int) {
	newest := 0
	for _, e := range evs {
		if st, ok := eventStep(e); ok {
			newest = max(newest, st)
		}
	}
	last := newest - 1
	if ended {
		last = newest
	}
	var out []event.Event
	for _, e := range evs {
		_, end := e.(event.RunEnd)
		if st, ok := eventStep(e); !ok && (ended || !end) || ok && st <= last {
			out = append(out, e)
		}
	}
	return out, max(last, 0)
}

// followLive streams a running run's steps after shown from its live snapshot, read again every
// liveEvery once the run has published a new one, until the run ends (the store opens as itself
// again: its writer closed it) or ctx does; the channel is closed then.
func followLive(ctx context.Context, path, runID string, shown int) <-chan event.Event {
	ch := make(chan event.Event, 256)
	go func() {
		defer close(ch)
		var seen time.Time // the snapshot last read
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(liveEvery):
			}
			if fi, err := os.Stat(store.LivePath(path)); err == nil && fi.ModTime().Equal(seen) {
				continue // the same snapshot: nothing new to read
			}
			st, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				continue // between the writer's close and nothing: try again
			}
			live, at := st.Live()
			seen = at
			evs, err := ui.StoredEvents(st, runID)
			if err == nil && !live {
				if end, ok := interruptedEnd(st, runID); ok {
					evs = append(evs, end)
				}
			}
			st.Close()
			if err != nil {
				continue
			}
			kept, last := completeSteps(evs, !live)
			for _, e := range kept {
				_, end := e.(event.RunEnd)
				if step, ok := eventStep(e); ok && step > shown || end {
					select {
					case ch <- e:
					case <-ctx.Done():
						return
					}
				}
			}
			shown = max(shown, last)
			if !live {
				return
			}
		}
	}()
	return ch
}
