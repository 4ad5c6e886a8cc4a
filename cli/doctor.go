package cli

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/cobra"

	"agentrl/engine/device"
	"agentrl/engine/doctor"
	"agentrl/engine/model"
	"agentrl/engine/torchref"
	"agentrl/recipes"
)

// doctorFlags are doctor's options.
type doctorFlags struct {
	asJSON, gpu, measure bool
	backend, plugin      string
	python               string
}

// doctorCommand checks what this machine can do for a recipe and says what to fix.
func doctorCommand(env Env) *cobra.Command {
	var f doctorFlags
	cmd := &cobra.Command{
		Use:   "doctor [RECIPE.yaml] [--json] [--gpu]",
		Short: "what this machine can do (CPU, memory, GPU, CUDA plugin, bf16, python, sandbox) and whether a recipe fits; what to fix",
		Long: `Checks the CPU and the matrix kernels chosen for it, memory, the GPU through NVML (name, driver,
CUDA version, memory, compute capability), the PJRT CUDA plugin (where it was found, or every place
searched) and the CUDA libraries it loads, whether bf16 computes right on the backend a run opens,
a python3 with torch and transformers for the reference benchmarks, the code sandbox's
prerequisites, whether RECIPE (default: the default recipe) fits this machine's memory, and each
engine of its rollout.engines (reachable, key accepted, the model it serves, the probe prompt's
token ids against the policy's tokenizer). Each
line says OK or what to do. The exit code is 0 when the recipe can run here; with --gpu, only when
the GPU path (GPU, plugin, CUDA libraries, bf16 on CUDA) is ready too. Nothing is measured unless
--measure-kernels asks; no GPU, driver or python is needed.`,
		Example:           "  agentrl-tui doctor\n  agentrl-tui doctor recipes/retool.yaml --json\n  agentrl-tui doctor --gpu --plugin /path/to/xla_cuda_plugin.so",
		Args:              oneArg,
		ValidArgsFunction: recipeFiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) > 0 {
				path = args[0]
			}
			rep := f.check(cmd.Context(), env, path)
			if f.asJSON {
				if err := writeJSON(env.Stdout, rep); err != nil {
					return err
				}
			} else {
				rep.Write(env.Stdout)
			}
			if failed := rep.Failed(); len(failed) > 0 {
				return fmt.Errorf("doctor: %d check(s) failed: %s", len(failed), strings.Join(failed, ", "))
			}
			if f.gpu && !rep.GPUReady {
				return fmt.Errorf("doctor --gpu: the GPU path is not ready")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the report as one JSON object")
	fl.BoolVar(&f.gpu, "gpu", false, "require the GPU path (GPU, PJRT CUDA plugin, CUDA libraries, bf16 on CUDA), as make gpu-check does")
	fl.BoolVar(&f.measure, "measure-kernels", false, "measure the CPU kernel sets now when the cache has no choice for this recipe's model (about a minute)")
	fl.StringVar(&f.backend, "backend", "", "check with this backend.kind (auto, go, cuda) instead of the recipe's")
	fl.StringVar(&f.plugin, "plugin", "", "check with this PJRT CUDA plugin (a file, or a folder of JAX's wheel or go-xla's installer) instead of the recipe's backend.plugin or the search")
	fl.StringVar(&f.python, "torch-python", torchref.Auto, "python3 with torch for the reference benchmarks (auto: "+
		strings.Join(torchref.Candidates(), ", then ")+"); empty skips the check")
	return cmd
}

// check loads the recipe (a recipe that does not load is reported, not returned) and runs the checks.
func (f *doctorFlags) check(ctx context.Context, env Env, path string) *doctor.Report {
	over := map[string]string{}
	if f.backend != "" {
		over["backend.kind"] = f.backend
	}
	if f.plugin != "" {
		over["backend.plugin"] = f.plugin
	}
	r, err := recipes.Load(path, recipes.Options{Overrides: over})
	o := doctor.Options{Recipe: r, RecipePath: path, RecipeErr: err, RequireGPU: f.gpu, TorchPython: f.python}
	builtin := func() (string, error) { return model.BuiltinDir(env.Builtin) }
	if env.Builtin == nil {
		builtin = func() (string, error) {
			return "", fmt.Errorf("this binary has no built-in model")
		}
	}
	var kernels func() device.KernelChoice
	if r != nil {
		kernels = func() device.KernelChoice { return f.kernels(env, r) }
	}
	return doctor.Run(cmp.Or(ctx, context.Background()), o, doctor.SystemEnv(builtin, kernels))
}

// kernels is the CPU kernel set a run of r would use, from the cache (measured only with
// --measure-kernels): the work recipeKernels chooses for, without restarting anything.
func (f *doctorFlags) kernels(env Env, r *recipes.Recipe) device.KernelChoice {
	req := device.Request{Kind: r.Backend.Kind, PluginPath: r.Backend.Plugin}
	if f.gpu {
		req.Kind = device.CUDA
	}
	if !device.GoBackend(req) {
		return device.KernelChoice{Reason: "not used: a run of this recipe computes on the GPU"}
	}
	w := kernelWork{dir: r.Model.Path, slots: cmp.Or(int(r.Memory.KVSlots), min(cpuSlots, r.BatchSize())),
		micro: cmp.Or(int(r.Train.MicroBatch), min(cpuMicro, r.BatchSize())), maxLen: r.Rollout.MaxTotalTokens,
		dtype: dtypes.Float32, backend: req}
	if r.Model.DType == "bf16" {
		w.dtype = dtypes.BFloat16
	}
	if w.dir == "" {
		w.dir = builtinDir(env)
	}
	return w.choose(env, false, f.measure)
}
