package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/hint"
	"agentrl/engine/sft"
	"agentrl/engine/tokenizer"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/ui"
)

// sftCommand trains a tokenizer and a small model on executed tool-use demonstrations.
func sftCommand(env Env) *cobra.Command {
	var bf backendFlags
	var recipe, out, prmPrompt string
	var seed uint64
	var levels []int
	o := sft.Options{}
	d := sft.DataOptions{}
	var format, storePath, runName, uiMode, tensorboard string
	cmd := &cobra.Command{
		Use: `sft --recipe RECIPE --out DIR [--steps N --examples N --vocab N --hidden N --layers N --hint-share S --init DIR --levels L,...]
  agentrl-tui sft --data FILE|DIR --init MODEL_DIR --out DIR [--format retool|tool_call|chat --epochs N --batch N --lr X --max-len N --steps N --heldout-share F --seed S]`,
		Short: "supervised fine-tuning: on conversations from a file (--data), or the built-in model's warm-up on tool-use demonstrations",
		Long: `With --data: fine-tunes --init's model (its tokenizer kept) on the conversations of a JSON Lines
file (one {"messages": [...]} object a line), a Parquet file with a messages column, or a
downloaded dataset folder of them (JoeYing/ReTool-SFT, verl's converted files), and writes a
HuggingFace folder that run --model and score --model load. --format is the layout the
conversations are in and the RL run will use (env.format): retool (the code inline in <code>,
its output in <interpreter> inside the assistant's turn), tool_call (OpenAI tool_calls answered
by tool messages; --tools, else the python tool under the calls' name) or chat. A conversation
without a system message gets the format's system prompt. The loss is on the assistant's own
tokens only, laid out and masked exactly as RL rollouts are (interpreter output, tool responses
and prompts masked). Conversations longer than --max-len tokens are dropped and counted;
--heldout-share holds a seeded share out for an evaluation loss. The schedule is linear warm-up
(--warmup, a share of the steps) then cosine from --lr to --min-lr, over --epochs passes of
--batch conversations a step (or --steps); a step is one AdamW update, its gradients summed
over passes of --micro-batch conversations (--tokens-per-step makes steps by tokens; --lora RANK
trains adapters on a frozen base; --gradient-checkpointing and --optimizer-bits 8 are what plan
--sft calls for on long conversations). An error names the file, the line and the field.

With --store (default runs/agentrl.db) the run is kept as a run of kind sft: its steps' loss,
eval_loss, lr, tokens/s and ETA (--ui plain, json or tui), a checkpoint every --save-every steps.
The first Ctrl-C, SIGTERM or SIGHUP finishes the step in progress, saves it and exits; resume
--store PATH RUN continues from the latest checkpoint as if uninterrupted.

Without --data: writes a HuggingFace folder of executed tool-use demonstrations from the
recipe's task set, a tokenizer trained on them and a small Qwen3-shaped model (make builtin
rebuilds testdata/builtin this way).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("sft: --out DIR is required")
			}
			if d.Data != "" {
				return runSFTData(cmd, env, &bf, d, format, out, seed, o, storePath, runName, uiMode, tensorboard)
			}
			if tensorboard != "" {
				return errors.New("sft: --tensorboard writes the logs of a run on conversations (--data); the demonstrations' SFT keeps no run")
			}
			r, err := recipes.Load(recipe, recipes.Options{})
			if err != nil {
				return err
			}
			if err := setLevels(r, levels); err != nil {
				return fmt.Errorf("sft: %w", err)
			}
			if prmPrompt != "" {
				b, err := os.ReadFile(prmPrompt)
				if err != nil {
					return fmt.Errorf("sft: --prm-prompt: %w", err)
				}
				o.JudgeTemplate = string(b)
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
	fl.Float64Var(&o.JudgeShare, "judge-share", 0, "share of the examples that teach the model PRM's task: the PRM prompt (--prm-prompt) for an attempt played through the environment, answered with each step's checked verdict and the rules hinter's bridge thought or \\boxed{-1}; 0: none")
	fl.StringVar(&prmPrompt, "prm-prompt", "", "with --judge-share: the PRM prompt file its examples are written in (the built-in model's: testdata/builtin/prm_prompt.txt)")
	fl.StringVar(&o.Init, "init", "", "continue from this HF folder's model and tokenizer (keeps the vocabulary) instead of training both from scratch; with --data the model fine-tuned (required)")
	fl.Uint64Var(&seed, "seed", 1, "seed")
	fl.IntSliceVar(&levels, "levels", nil, "task levels to demonstrate, instead of the recipe's env.tasks.synthetic.levels (make builtin's stages differ in them)")
	fl.StringVar(&d.Data, "data", "", "train on the conversations (a messages list each) of this JSON Lines or Parquet file, or dataset folder of them, instead of demonstrations; needs --init")
	fl.StringVar(&format, "format", "retool", "with --data: the conversations' layout, retool, tool_call or chat (env.format)")
	fl.StringVar(&d.Tools, "tools", "", "with --data: tool schemas in the system turn, a JSON array or @FILE (default: the python tool for tool_call, none otherwise)")
	fl.IntVar(&d.Epochs, "epochs", 1, "with --data: passes over the training conversations (--steps, when given, instead)")
	fl.IntVar(&d.MicroBatch, "micro-batch", 0, "with --data: conversations per forward/backward pass, their gradients summed into the step's one update (0: the whole --batch)")
	fl.IntVar(&d.MaxLen, "max-len", 0, "with --data: drop conversations longer than this many tokens (0: none)")
	fl.Float64Var(&d.HeldoutShare, "heldout-share", 0, "with --data: share of the conversations held out (seeded) for an evaluation loss")
	fl.Float64Var(&d.MinLR, "min-lr", 0, "with --data: the cosine schedule's final learning rate")
	fl.Float64Var(&d.Warmup, "warmup", 0.1, "with --data: share of the steps warming up linearly")
	fl.Float64Var(&d.WeightDecay, "weight-decay", 0, "with --data: AdamW weight decay")
	fl.Float64Var(&d.Beta2, "beta2", 0.999, "with --data: AdamW beta2")
	fl.IntVar(&d.TokensPerStep, "tokens-per-step", 0, "with --data: make each step's batch by tokens: conversations until their tokens reach this many (gradients accumulated over --micro-batch passes), instead of --batch conversations")
	fl.IntVar(&d.LoRA, "lora", 0, "with --data: train rank-N LoRA adapters on all seven projections of a frozen base instead of every weight (--out is written merged; export --peft writes the adapters)")
	fl.Float64Var(&d.LoRAAlpha, "lora-alpha", 0, "with --lora: the adapters' alpha (0: 2 × rank)")
	fl.BoolVar(&d.GradientCheckpointing, "gradient-checkpointing", false, "with --data: keep each layer's input only and recompute the rest in the backward pass (what a 16K-token conversation of a 4B model needs; plan --sft)")
	fl.IntVar(&d.OptimizerBits, "optimizer-bits", 32, "with --data: AdamW moments in 32 (float32) or 8 bits")
	fl.StringVar(&storePath, "store", defaultStore, "with --data: the store the run is kept in (its metrics and checkpoints; resume continues it); '' keeps nothing")
	fl.StringVar(&runName, "run-name", "sft", "with --data: the run's name (its id is NAME-sSEED-TIME)")
	fl.IntVar(&d.SaveEvery, "save-every", 0, "with --data and a store: steps between checkpoints (0: a tenth of the steps); a stop saves the last step too")
	fl.IntVar(&d.EvalEvery, "eval-every", 0, "with --data: steps between held-out losses (0: as --save-every)")
	fl.StringVar(&tensorboard, "tensorboard", "", "with --data: "+tensorboardUsage)
	fl.StringVar(&uiMode, "ui", "plain", "with --data: plain (a line per step: loss, eval loss, tokens/s, ETA), json (one event object a line), tui (the workbench, the loss in its Curves pane) or auto (tui on a terminal)")
	cmd.AddCommand(hintProbeCommand(env))
	return cmd
}

// runSFTData is sft --data: the flags shared with the demonstrations' SFT (--steps, --batch,
// --lr) count only when given, so that their defaults stay the demonstrations'.
func runSFTData(cmd *cobra.Command, env Env, bf *backendFlags, d sft.DataOptions, format, out string, seed uint64, o sft.Options, storePath, runName, uiMode, tensorboard string) error {
	fl := cmd.Flags()
	if d.Init == "" {
		d.Init = o.Init
	}
	if fl.Changed("steps") {
		if o.Steps < 1 {
			return fmt.Errorf("sft: --steps %d: give at least 1", o.Steps)
		}
		d.Steps = o.Steps
	}
	if fl.Changed("batch") {
		if o.Batch < 1 {
			return fmt.Errorf("sft: --batch %d: give at least 1", o.Batch)
		}
		d.Batch = o.Batch
	}
	if fl.Changed("lr") {
		d.LR = o.LR
	}
	if !(d.Warmup >= 0 && d.Warmup < 1) {
		return fmt.Errorf("sft: --warmup %v: want a share of the steps, 0 (none) up to below 1", d.Warmup)
	}
	if d.Warmup == 0 { // RunData reads 0 as its default
		d.Warmup = -1
	}
	if d.MicroBatch < 0 {
		return fmt.Errorf("sft: --micro-batch %d: give 0 (the whole batch) or more", d.MicroBatch)
	}
	if d.OptimizerBits != 32 && d.OptimizerBits != 8 {
		return fmt.Errorf("sft: --optimizer-bits %d: want 32 or 8", d.OptimizerBits)
	}
	if d.TokensPerStep < 0 || d.LoRA < 0 {
		return fmt.Errorf("sft: --tokens-per-step %d, --lora %d: give 0 (off) or more", d.TokensPerStep, d.LoRA)
	}
	if d.Epochs < 1 {
		return fmt.Errorf("sft: --epochs %d: give at least 1", d.Epochs)
	}
	mode, err := ui.Choose(uiMode, isTerminal(env.Stdin), isTerminal(env.Stdout))
	if err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	uiMode = mode
	choice, err := bf.open(env.Stderr)
	if err != nil {
		return err
	}
	d.Format, d.Out, d.Seed, d.Backend, d.Log = retool.Layout(format), out, seed, choice.Backend, env.Stderr
	d.Compute = sftCompute(choice)
	d.Name = runName
	if storePath != "" {
		if err := os.MkdirAll(filepath.Dir(storePath), 0o755); err != nil {
			return err
		}
		st, err := store.Open(storePath, store.Options{Live: true})
		if err != nil {
			return err
		}
		defer st.Close()
		d.Store = st
		if d.RunID, err = st.FreeRunID(fmt.Sprintf("%s-s%d-%s", runName, seed, time.Now().UTC().Format("20060102-150405"))); err != nil {
			return err
		}
	}
	return sftSession(env, d, uiMode, storePath, tensorboard)
}

// sftSession runs an SFT on conversations (a new one or a resumed one) with its events as plain
// lines or JSON objects on stdout. The first SIGINT, SIGTERM or SIGHUP stops it after the step in
// progress, which is saved (exit 0 for Ctrl-C, 128 + the signal otherwise); a second one ends
// the process at once, as the signal does, and resume continues from the latest checkpoint.
func sftSession(env Env, d sft.DataOptions, uiMode, storePath, tensorboard string) error {
	if tensorboard != "" && d.RunID == "" {
		return errors.New("sft: --tensorboard writes a run's logs under its id: keep the run in a store (--store PATH)")
	}
	if err := checkTensorboard(tensorboard); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	env, flush := guardOutput(env, uiMode) // a reader that leaves or stalls stops the output, not the run (pipe.go)
	defer flush(outFlushIdle)
	d.Log = env.Stderr
	events := make(chan event.Event, 256)
	stream, boardDone := boardTee(env, tensorboard, events) // the TensorBoard logs, when asked for
	if tensorboard != "" && d.RunID != "" {
		fmt.Fprintf(env.Stderr, "tensorboard: writing %s (tensorboard --logdir %s)\n", filepath.Join(tensorboard, d.RunID), tensorboard)
	}
	shown := make(chan error, 1)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		switch uiMode {
		case ui.ModeJSON:
			shown <- ui.JSONLines(env.Stdout, stream)
		case ui.ModeTUI: // the workbench, its Curves pane on the loss; q or S stops the run
			stop := func(reason string) string {
				cancel(errors.New(reason))
				return "stopping after the step in progress, which is saved"
			}
			err := ui.RunTUI(context.Background(), ui.Options{Events: stream, Store: d.Store, RunID: d.RunID, Output: env.Stdout, NoSignals: true,
				Control: ui.Funcs{StopFn: stop}})
			cancel(errors.New(ui.ReasonQuit))
			for range stream { // the run ends at its next step; nothing reads its stream now
			}
			shown <- err
		default:
			shown <- ui.Plain(env.Stdout, stream)
		}
	}()
	d.Emit = func(e event.Event) { events <- e }
	if uiMode == ui.ModeTUI {
		d.Log = io.Discard // the workbench has the screen; the run's progress is in its events
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	var got os.Signal
	var mu sync.Mutex
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		signal.Stop(sigs) // a second signal ends the process as the signal does
		mu.Lock()
		got = sig
		mu.Unlock()
		fmt.Fprintf(env.Stderr, "sft: %s: stopping after the step in progress, which is saved (again to end at once)\n", signalName(sig))
		cancel(errors.New(signalReason(sig)))
	}()
	res, err := sft.RunData(ctx, d)
	signal.Stop(sigs)
	close(sigs)
	close(events)
	if serr := <-shown; err == nil {
		err = serr
	}
	boardDone()
	if err != nil {
		return err
	}
	info := env.Stdout
	if uiMode == ui.ModeJSON {
		info = env.Stderr
	}
	if res.Stopped != "" {
		fmt.Fprintf(info, "%s at step %d of %d", res.Stopped, res.Step, res.Steps)
		if d.Store != nil && res.Step > 0 {
			fmt.Fprintf(info, "; agentrl-tui resume --store %s %s continues it", storePath, d.RunID)
		}
		fmt.Fprintln(info)
		mu.Lock()
		defer mu.Unlock()
		if got != nil {
			if code := signalStatus(got, false); code != 0 {
				return exitStatus(code)
			}
		}
		return nil
	}
	fmt.Fprintf(info, "wrote %s: %d steps on %d conversations (%d dropped over --max-len, %d held out) in %.0fs; assistant-token nll %.4f -> %.4f",
		d.Out, res.Steps, res.Train, res.Dropped, res.Heldout, res.Seconds, res.TrainBefore, res.TrainAfter)
	if res.Heldout > 0 {
		fmt.Fprintf(info, ", held-out %.4f -> %.4f", res.HeldoutBefore, res.HeldoutAfter)
	}
	if d.Store != nil {
		fmt.Fprintf(info, "; run %s in %s", d.RunID, storePath)
	}
	fmt.Fprintln(info)
	return nil
}

// sftCompute is the compute dtype of an SFT on the backend chosen: bf16 on a GPU, float32 on
// the CPU (as bench and the recipes' model.dtype auto take them).
func sftCompute(choice *device.Choice) dtypes.DType {
	if choice.Kind == device.CUDA {
		return dtypes.BFloat16
	}
	return dtypes.Float32
}

// resumeSFT continues a stored SFT run (resume on a run of kind sft) in its store.
func resumeSFT(env Env, storePath, runID, uiMode, tensorboard string) error {
	if uiMode == "" {
		uiMode = ui.ModePlain
	}
	mode, err := ui.Choose(uiMode, isTerminal(env.Stdin), isTerminal(env.Stdout))
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	uiMode = mode
	st, err := store.Open(storePath, store.Options{Live: true})
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := sft.StoredOptions(st, runID)
	if err != nil {
		return err
	}
	bf := backendFlags{kind: "auto"}
	choice, err := bf.open(env.Stderr)
	if err != nil {
		return err
	}
	d.Backend, d.Log, d.Compute = choice.Backend, env.Stderr, sftCompute(choice)
	return sftSession(env, d, uiMode, storePath, tensorboard)
}

// setLevels puts levels (when any) in place of r's synthetic task levels, refusing one out of range.
func setLevels(r *recipes.Recipe, levels []int) error {
	if len(levels) == 0 {
		return nil
	}
	for _, l := range levels {
		if l < 0 || l > synthetic.MaxLevel {
			return fmt.Errorf("--levels %v: level %d is not one of 0 to %d (0-5 by difficulty, 6 named operations)", levels, l, synthetic.MaxLevel)
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
			syn := synthetic.Tasks{Levels: r.Env.Tasks.Synthetic.Levels, Seed: uint64(r.Env.Tasks.Synthetic.Seed)}
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
