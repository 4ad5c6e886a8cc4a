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

	"agentrl/engine"
	"agentrl/engine/tokenizer"
	"agentrl/recipes"
)

// sftCommand trains a tokenizer and a small model on executed tool-use demonstrations.
func sftCommand(env Env) *cobra.Command {
	var bf backendFlags
	var recipe, out string
	var seed uint64
	o := engine.SFTOptions{}
	cmd := &cobra.Command{
		Use:   "sft --recipe RECIPE --out DIR [--steps N --examples N --vocab N --hidden N --layers N --hint-share S --init DIR]",
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
			choice, err := bf.open(env.Stderr)
			if err != nil {
				return err
			}
			o.Recipe, o.Backend, o.Out, o.Seed, o.Log = r, choice.Backend, out, seed, env.Stderr
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := engine.SFT(ctx, o); err != nil {
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
