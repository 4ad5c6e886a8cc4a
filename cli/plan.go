package cli

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/recipes"
)

// planCommand prints the GPU memory ledger of a recipe without running anything.
func planCommand(env Env) *cobra.Command {
	var dir, shape, vram string
	var asJSON bool
	var set runFlags // only --set
	cmd := &cobra.Command{
		Use:   "plan RECIPE [--model DIR | --shape NAME] [--vram 24GiB] [--set section.field=value] [--json]",
		Short: "the GPU memory ledger per phase, KV slots and micro-batch, host memory and disk; runs nothing",
		Long: `Prints the GPU memory ledger of a recipe per phase, with the KV slots and micro-batch it
chooses, then the host memory the run needs (writing a checkpoint, loading the models) and the
disk its store fills at checkpoint.keep_*, without running anything. The exit status says whether
the recipe fits the device: 0 when it fits, 1 when it does not (after printing the plan, or its
JSON with --json, and the reason); agentrl-tui doctor RECIPE checks the host figures against this
machine.`,
		Args:              oneArg,
		ValidArgsFunction: recipeFiles,
		RunE: func(cmd *cobra.Command, args []string) error {
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
			var builtin string // only a plan that names no model reads the built-in one
			if dir == "" && shape == "" && r.Model.Path == "" {
				if builtin, err = model.BuiltinDir(env.Builtin); err != nil {
					return err
				}
			}
			p, err := ledger.PlanFor(ledger.Request{Recipe: r, ModelDir: dir, ShapeName: shape, VRAM: vram,
				BuiltinModelDir: builtin, DetectedVRAM: detected})
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
	cmd.Flags().StringVar(&vram, "vram", "", "device memory budget, e.g. 24GiB (default: the recipe's memory.vram, auto = free GPU memory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().StringArrayVar(&set.set, "set", nil, "set any recipe field: --set rollout.max_total_tokens=8192 (repeatable)")
	return cmd
}

// knownShapes lists the shapes --shape accepts, sorted.
func knownShapes() string {
	names := slices.Sorted(maps.Keys(ledger.KnownShapes()))
	return strings.Join(names, ", ")
}
