package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/hint"
	"agentrl/engine/sft"
	"agentrl/engine/tokenizer"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
)

// sftCommand trains a tokenizer and a small model on executed tool-use demonstrations.
func sftCommand(env Env) *cobra.Command {
	var bf backendFlags
	var recipe, out string
	var seed uint64
	var levels []int
	o := sft.Options{}
	cmd := &cobra.Command{
		Use:   "sft --recipe RECIPE --out DIR [--steps N --examples N --vocab N --hidden N --layers N --hint-share S --init DIR --levels L,...]",
		Short: "supervised warm-up: a tokenizer and a small Qwen3-shaped model trained on tool-use demonstrations",
		Long: `Writes a HuggingFace folder: executed tool-use demonstrations from the recipe's task set, a
tokenizer trained on them and a small Qwen3-shaped model (make builtin rebuilds testdata/builtin
this way).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("sft: --out DIR is required")
			}
			r, err := recipes.Load(recipe, recipes.Options{})
			if err != nil {
				return err
			}
			if err := setLevels(r, levels); err != nil {
				return fmt.Errorf("sft: %w", err)
			}
			choice, err := bf.open(env.Stderr)
			if err != nil {
				return err
			}
			o.Recipe, o.Backend, o.Out, o.Seed, o.Log = r, choice.Backend, out, seed, env.Stderr
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := sft.Run(ctx, o); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "wrote %s\n", out)
			return nil
		},
	}
	fl := cmd.Flags()
	bf.register(fl)
	fl.StringVar(&recipe, "recipe", "recipes/retool.yaml", "recipe whose task set and lengths the demonstrations follow")
	fl.StringVar(&out, "out", "", "output folder (a HuggingFace model folder)")
	fl.IntVar(&o.Examples, "examples", 2000, "demonstrations")
	fl.IntVar(&o.Vocab, "vocab", 512, "tokenizer vocabulary size")
	fl.IntVar(&o.Hidden, "hidden", 128, "hidden size")
	fl.IntVar(&o.Layers, "layers", 4, "decoder layers")
	fl.IntVar(&o.Steps, "steps", 300, "optimizer steps")
	fl.IntVar(&o.Batch, "batch", 16, "sequences per step")
	fl.Float64Var(&o.LR, "lr", 3e-3, "peak learning rate (warm-up then cosine)")
	fl.Float64Var(&o.HintShare, "hint-share", 0, "share of demonstrations with a bridge thought in the prompt (the rules hint for a flawed attempt, then the fix); 0: none")
	fl.StringVar(&o.Init, "init", "", "continue from this HF folder's model and tokenizer (keeps the vocabulary) instead of training both from scratch")
	fl.Uint64Var(&seed, "seed", 1, "seed")
	fl.IntSliceVar(&levels, "levels", nil, "task levels to demonstrate, instead of the recipe's env.tasks.synthetic.levels (make builtin's stages differ in them)")
	cmd.AddCommand(hintProbeCommand(env))
	return cmd
}

// setLevels puts levels (when any) in place of r's synthetic task levels, refusing one out of range.
func setLevels(r *recipes.Recipe, levels []int) error {
	if len(levels) == 0 {
		return nil
	}
	for _, l := range levels {
		if l < 0 || l > retool.MaxLevel {
			return fmt.Errorf("--levels %v: level %d is not one of 0 to %d (0-5 by difficulty, 6 named operations)", levels, l, retool.MaxLevel)
		}
	}
	r.Env.Tasks.Synthetic.Levels = levels
	return nil
}

// hintProbeCommand measures, per kind of rules hint, how much the hint raises a model's log-prob
// of the tasks' reference demonstrations: whether the model, as a Hybrid run's teacher, can use
// that kind of hint.
func hintProbeCommand(env Env) *cobra.Command {
	var bf backendFlags
	var recipe, dir string
	var tasks int
	var seed uint64
	var asJSON bool
	var levels []int
	cmd := &cobra.Command{
		Use:   "probe --model DIR [--recipe RECIPE] [--tasks N] [--levels L,...] [--json]",
		Short: "per kind of rules hint, its lift of the reference demonstrations' log-prob with the model as teacher",
		Long: `For each flaw the rules hinter writes a hint for (a copying slip, code that computed something
else, a guess, a name error, no answer, bad format, a timeout), writes that hint for each of the
recipe's first N training tasks and prints the mean per-token change of the model's log-prob of the
task's reference demonstration (its program through the tool, the answer boxed) when the hint
stands before the problem: a Hybrid run's hint_lift_demo, kind by kind, without a run. Above zero,
the model as teacher makes a correct continuation more likely with the hint than without. Each
lift is also split by kind of task: "level N", and for the named operations (level 6) "named,
taught" and "named, untaught" (the words SFT leaves to RL, where the hint names what to compute).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("sft probe: --model DIR is required (a HuggingFace folder, such as testdata/builtin)")
			}
			if tasks < 1 {
				return fmt.Errorf("sft probe: --tasks %d: give at least 1", tasks)
			}
			r, err := recipes.Load(recipe, recipes.Options{})
			if err != nil {
				return err
			}
			if err := setLevels(r, levels); err != nil {
				return fmt.Errorf("sft probe: %w", err)
			}
			tok, err := tokenizer.Load(dir)
			if err != nil {
				return err
			}
			m, err := bf.loadModel(env.Stderr, dir, dtypes.Float32)
			if err != nil {
				return err
			}
			syn := retool.Synthetic{Levels: r.Env.Tasks.Synthetic.Levels, Seed: uint64(r.Env.Tasks.Synthetic.Seed)}
			train, _, err := syn.Split(tasks, 0)
			if err != nil {
				return fmt.Errorf("sft probe: %s: env.tasks: %w", recipe, err)
			}
			rows, err := hint.ProbeKinds(cmd.Context(), m, tok, train, &sandbox.Starlark{}, seed)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(env.Stdout, rows)
			}
			fmt.Fprintf(env.Stdout, "%s as teacher, %d tasks of %s (levels %v): hint's lift of the reference demonstration, per token\n\n", dir, len(train), recipe, syn.Levels)
			fmt.Fprintf(env.Stdout, "%-14s %8s", "", "all")
			for _, g := range rows[0].Groups {
				fmt.Fprintf(env.Stdout, " %*s", max(len(g.Group), 8), fmt.Sprintf("%s (%d)", g.Group, g.Tasks))
			}
			fmt.Fprintln(env.Stdout)
			for _, row := range rows {
				fmt.Fprintf(env.Stdout, "%-14s %+8.3f", row.Flaw, row.Lift)
				for _, g := range row.Groups {
					fmt.Fprintf(env.Stdout, " %*s", max(len(g.Group), 8), fmt.Sprintf("%+.3f", g.Lift))
				}
				fmt.Fprintln(env.Stdout)
			}
			fmt.Fprintln(env.Stdout, "\nhints written for the first task:")
			for _, row := range rows {
				fmt.Fprintf(env.Stdout, "%-14s %s\n", row.Flaw, row.Example)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	bf.register(fl)
	fl.StringVar(&recipe, "recipe", "recipes/retool.yaml", "recipe whose task set the tasks come from")
	fl.StringVar(&dir, "model", "", "the model folder to probe as teacher (HuggingFace: config.json, safetensors, tokenizer)")
	fl.IntVar(&tasks, "tasks", 64, "training tasks to probe with")
	fl.Uint64Var(&seed, "seed", 1, "seed of the copying slips' wrong numbers")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	fl.IntSliceVar(&levels, "levels", nil, "task levels to probe on, instead of the recipe's env.tasks.synthetic.levels")
	return cmd
}

// tokenizerCommand trains a byte-level BPE tokenizer.
func tokenizerCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokenizer VERB",
		Short: "byte-level BPE with the chat specials: tokenizer train",
	}
	verbs(cmd, "tokenizer needs a verb: tokenizer train --corpus FILE --vocab N --out DIR")
	var corpus, out string
	var vocab int
	train := &cobra.Command{
		Use:   "train --corpus FILE --vocab N --out DIR",
		Short: "train a byte-level BPE (with the chat special tokens) and write a HuggingFace tokenizer.json",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if corpus == "" || out == "" {
				return errors.New("tokenizer train: --corpus FILE and --out DIR are required")
			}
			data, err := os.ReadFile(corpus)
			if err != nil {
				return fmt.Errorf("tokenizer train: %w", err)
			}
			doc, err := tokenizer.Train(strings.Split(string(data), "\n\n"), vocab, tokenizer.ChatSpecials())
			if err != nil {
				return err
			}
			if err := tokenizer.WriteTrained(out, doc); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "wrote %s/tokenizer.json\n", out)
			return nil
		},
	}
	train.Flags().StringVar(&corpus, "corpus", "", "text file; each paragraph (blank-line separated) is one document")
	train.Flags().IntVar(&vocab, "vocab", 512, "vocabulary size including the 256 byte tokens and the chat specials")
	train.Flags().StringVar(&out, "out", "", "output folder")
	cmd.AddCommand(train)
	return cmd
}
