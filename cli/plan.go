package cli

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"agentrl/engine/device"
	"agentrl/engine/hint"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/recipes"
)

// planCommand prints the GPU memory ledger of a recipe without running anything.
func planCommand(env Env) *cobra.Command {
	var dir, shape, vram string
	var asJSON, sftPlan, evalPlan bool
	var seqLen, loraRank, maxMicro, bits int
	var set runFlags // only --set
	cmd := &cobra.Command{
		Use: `plan RECIPE [--model DIR | --shape NAME] [--vram 24GiB] [--eval] [--set section.field=value] [--json]
  agentrl-tui plan --sft (--model DIR | --shape NAME) [--seq-len 16384] [--lora RANK] [--vram 96GiB,48GiB,24GiB] [--json]`,
		Short: "the GPU memory ledger per phase, KV slots and micro-batch, host memory and disk; runs nothing",
		Long: `Prints the GPU memory ledger of a recipe per phase, with the KV slots and micro-batch it
chooses, then the host memory the run needs (writing a checkpoint, loading the models) and the
disk its store fills at checkpoint.keep_*, without running anything. The exit status says whether
the recipe fits the device: 0 when it fits, 1 when it does not (after printing the plan, or its
JSON with --json, and the reason); agentrl-tui doctor RECIPE checks the host figures against this
machine. With --eval: the plan of an evaluation-only run of the recipe (agentrl-tui eval), which
builds no trainer: the inference weights, the KV cache and the sampler alone. With
rollout.engines the rollout phase is remote: the engines generate, and the device holds no KV
cache or inference copy for them (unless prm.model: policy or hinter.kind: self generate here).

With --sft (no recipe): the device memory of one supervised step of sft --data on conversations
of --seq-len tokens in bf16 compute, with every weight trained and, with --lora RANK, with
adapters on all seven projections, each without and with gradient checkpointing, on each budget
of --vram (a comma-separated list): whether a conversation fits a pass, how many do, the peak and
its parts. The exit status is 0 when every row fits, 1 otherwise.`,
		Args:              oneArg,
		ValidArgsFunction: recipeFiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			if sftPlan {
				return planSFT(env, dir, shape, vram, seqLen, loraRank, maxMicro, bits, asJSON)
			}
			if len(args) == 0 {
				return errors.New("plan: give a recipe, e.g. agentrl-tui plan recipes/retool.yaml --shape qwen3-4b --vram 96GiB")
			}
			over, err := set.overrides()
			if err != nil {
				return err
			}
			r, err := recipes.Load(args[0], recipes.Options{Overrides: over, NoDataFiles: true})
			if err != nil {
				return err
			}
			var detected int64
			mon := device.NewMonitor()
			if rd, ok := mon.Read(); ok {
				detected = int64(rd.TotalBytes - rd.UsedBytes)
			}
			mon.Close()
			if r.Backend.Kind == device.Go { // the go backend's device is this machine's memory
				detected = device.HostBudget()
			}
			var builtin string // only a plan that names no model reads the built-in one
			if dir == "" && shape == "" && r.Model.Path == "" {
				if builtin, err = model.BuiltinDir(env.Builtin); err != nil {
					return err
				}
			}
			if md := cmp.Or(dir, r.Model.Path, builtin); md != "" && shape == "" { // the PRM's prompt and lengths as a run would fit them
				if _, err := hint.FitPRM(r, md); err != nil {
					return recipes.WithLine(args[0], "prm.model", r.PRM.Model, err)
				}
			}
			p, err := ledger.PlanFor(ledger.Request{Recipe: r, ModelDir: dir, ShapeName: shape, VRAM: vram,
				BuiltinModelDir: builtin, DetectedVRAM: detected, EvalOnly: evalPlan})
			if err != nil {
				return err
			}
			if asJSON {
				err = p.WriteJSON(env.Stdout)
			} else {
				err = p.WriteTable(env.Stdout)
			}
			if err != nil {
				return err
			}
			if !p.Fits {
				return exitStatus(1) // the plan printed says why; scripts test the status
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "model folder (only config.json is read)")
	cmd.Flags().StringVar(&shape, "shape", "", "a known shape instead of --model: "+knownShapes())
	cmd.Flags().StringVar(&vram, "vram", "", "device memory budget, e.g. 24GiB (default: the recipe's memory.vram, auto = free GPU memory, or with backend.kind go four fifths of this machine's memory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&evalPlan, "eval", false, "plan an evaluation-only run (agentrl-tui eval): no trainer, reference or PRM phase")
	cmd.Flags().BoolVar(&sftPlan, "sft", false, "plan a supervised step of sft --data instead of a recipe's RL step")
	cmd.Flags().IntVar(&seqLen, "seq-len", 16384, "with --sft: tokens of a conversation (sft --max-len)")
	cmd.Flags().IntVar(&loraRank, "lora", 0, "with --sft: also plan rank-N LoRA adapters (sft --lora)")
	cmd.Flags().IntVar(&bits, "optimizer-bits", 32, "with --sft: AdamW moments in 32 or 8 bits (sft --optimizer-bits)")
	cmd.Flags().IntVar(&maxMicro, "max-micro-batch", 8, "with --sft: the most conversations a pass is sized for")
	cmd.Flags().StringArrayVar(&set.set, "set", nil, "set any recipe field: --set rollout.max_total_tokens=8192 (repeatable)")
	return cmd
}

// planSFT is plan --sft: the SFT step's memory per mode and budget.
func planSFT(env Env, dir, shape, vram string, seqLen, loraRank, maxMicro, bits int, asJSON bool) error {
	var sh ledger.Shape
	var err error
	switch {
	case (dir == "") == (shape == ""):
		return errors.New("plan --sft: give --shape NAME (" + knownShapes() + ") or --model DIR")
	case shape != "":
		sh, err = ledger.KnownShape(shape)
	default:
		sh, err = ledger.ReadShape(dir)
	}
	if err != nil {
		return err
	}
	if vram == "" {
		vram = "96GiB,48GiB,24GiB"
	}
	var budgets []int64
	for _, v := range strings.Split(vram, ",") {
		b, err := recipes.ParseBytes(strings.TrimSpace(v))
		if err != nil || b <= 0 {
			return fmt.Errorf("plan --sft: --vram %q: want sizes such as 96GiB,48GiB,24GiB", vram)
		}
		budgets = append(budgets, b)
	}
	if bits != 32 && bits != 8 {
		return fmt.Errorf("plan --sft: --optimizer-bits %d: want 32 or 8", bits)
	}
	if seqLen < 2 {
		return fmt.Errorf("plan --sft: --seq-len %d: give at least 2", seqLen)
	}
	st := ledger.Settings{ComputeBytes: 2, SeqLen: seqLen, Offload: ledger.OffloadDevice, OptimizerBits: bits}
	rows, err := ledger.SFT(sh, st, budgets, loraRank, maxMicro)
	if err != nil {
		return err
	}
	if asJSON {
		err = writeJSON(env.Stdout, rows)
	} else {
		err = ledger.WriteSFTTable(env.Stdout, sh, st, rows)
	}
	if err != nil {
		return err
	}
	for _, r := range rows {
		if !r.Fits {
			return exitStatus(1)
		}
	}
	return nil
}

// knownShapes lists the shapes --shape accepts, sorted.
func knownShapes() string {
	names := slices.Sorted(maps.Keys(ledger.KnownShapes()))
	return strings.Join(names, ", ") + " (NAME:LAYERS: that width at fewer layers, e.g. qwen3-4b:8)"
}
