package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"agentrl/engine/bench"
	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/train"
	"agentrl/recipes"
)

// What the controller runs on the Go backend when a recipe leaves it on auto: 16 decode slots of
// 512 tokens, micro-batches of 8.
const cpuSlots, cpuMaxLen, cpuMicro = 16, 512, 8

// probeTimeout bounds one measurement process (a large model compiles for a while).
const probeTimeout = 5 * time.Minute

// kernelWork is what a kernel choice is for: the model, and the shapes of the decode step and the
// training micro-step the process is about to run. The Go backend runs one of four kernel sets,
// fixed when the process starts, and which is fastest depends on the CPU (see device.KernelSet):
// the commands that compute on it choose first, and restart the process with the chosen set.
type kernelWork struct {
	dir, shape           string // a model folder, or a known shape with random weights (bench --shape)
	slots, maxLen, micro int
	dtype                dtypes.DType
	backend              device.Request
}

// key names the work in the choice cache: the model's dimensions (not its folder) and the shapes.
func (w kernelWork) key() string {
	cfg, err := model.ReadConfig(w.dir)
	if w.shape != "" {
		var sh ledger.Shape
		if sh, err = ledger.KnownShape(w.shape); err == nil {
			cfg = bench.ConfigFromShape(sh)
		}
	}
	m := w.dir + w.shape
	if err == nil {
		m = fmt.Sprintf("%s %d×%d (ffn %d, heads %d/%d×%d, vocab %d)", cfg.Family, cfg.NumLayers, cfg.HiddenSize,
			cfg.IntermediateSize, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.VocabSize)
	}
	return fmt.Sprintf("%s %s; decode %d slots × %d, train micro-batch %d", m, w.dt(), w.slots, w.maxLen, w.micro)
}

// builtinDir is the built-in model's folder, "" when there is none.
func builtinDir(env Env) string {
	if env.Builtin == nil {
		return ""
	}
	dir, _ := model.BuiltinDir(env.Builtin)
	return dir
}

func (w kernelWork) dt() string { return strings.ToLower(w.dtype.String()) } // float32, bfloat16

// args are the flags of `kernels probe` that measure w.
func (w kernelWork) args() []string {
	a := []string{"kernels", "probe", "--slots", strconv.Itoa(w.slots), "--max-len", strconv.Itoa(w.maxLen),
		"--micro-batch", strconv.Itoa(w.micro), "--dtype", w.dt()}
	if w.shape != "" {
		return append(a, "--shape", w.shape)
	}
	return append(a, "--model", w.dir)
}

// measure times w on this process's kernels: the mean step of a short generation with every slot
// busy (16 prompt tokens, 24 new), and the best of three training micro-steps of 128 tokens (32
// of them prompt), each after compiling. Small lengths, the same ops as the real work.
func (w kernelWork) measure() (device.KernelTiming, error) {
	choice, err := device.Open(device.Request{Kind: device.Go})
	if err != nil {
		return device.KernelTiming{}, err
	}
	m, cut, err := w.proxy(choice)
	if err != nil {
		return device.KernelTiming{}, err
	}
	defer m.Close()
	if cut {
		w.micro = min(w.micro, proxyMicro)
	}
	dec, err := rollout.Bench(context.Background(), m, rollout.BenchConfig{Sequences: w.slots, PromptLen: 16, NewTokens: 24, Seed: 1,
		Gen: rollout.Config{Slots: w.slots, MaxLen: model.Bucket(w.maxLen)}})
	if err != nil {
		return device.KernelTiming{}, fmt.Errorf("decode: %w", err)
	}
	tr, err := train.Bench(m, train.BenchConfig{Sequences: w.micro, Length: 128, Prompt: 32, MicroBatch: w.micro, Updates: 3, LogitsChunk: 32, Seed: 1})
	if err != nil {
		return device.KernelTiming{}, fmt.Errorf("train: %w", err)
	}
	return device.KernelTiming{Set: device.ActiveKernels(os.Getenv), DecodeMs: dec.StepMillis, TrainMs: tr.MicroStepMs}, nil
}

// A big model's kernels are measured on proxyLayers of its layers and at most proxyVocab words: its
// layers are alike, so which set is fastest shows in two of them, and a 0.6B model's 28 layers and
// 151,936-word head took over 150 s on a 16-core Xeon (the second H100 run) without finishing.
// Its training micro-step is timed on at most proxyMicro sequences: 8 × 128 tokens took 37 s a set
// on a busy 2-core EPYC even so.
const proxyLayers, proxyVocab, proxyMicro = 2, 16384, 2

// proxy is the model w measures: the model itself when it is small (the built-in one), else random
// weights of its config cut to proxyLayers layers and proxyVocab words (every layer's matrices the
// same).
func (w kernelWork) proxy(choice *device.Choice) (m *model.Model, cut bool, err error) {
	var cfg *model.Config
	if w.shape != "" {
		sh, err := ledger.KnownShape(w.shape)
		if err != nil {
			return nil, false, err
		}
		cfg = bench.ConfigFromShape(sh)
	} else if cfg, err = model.ReadConfig(w.dir); err != nil {
		return nil, false, err
	}
	small := proxyConfig(cfg)
	if small == nil {
		m, err = bench.Model(choice, w.dir, w.shape, w.dtype)
		return m, false, err
	}
	m, err = model.New(choice.Backend, model.RandomParams(small, 1, 0.02), model.Options{Compute: w.dtype})
	return m, true, err
}

// proxyConfig is cfg cut to proxyLayers layers and proxyVocab words where its layers hold 10M
// weights or more; nil where the model is measured as it is.
func proxyConfig(cfg *model.Config) *model.Config {
	if cfg.NumLayers <= proxyLayers || layerParams(cfg) < 10_000_000 {
		return nil
	}
	cut := *cfg
	cut.NumLayers, cut.VocabSize = proxyLayers, min(cfg.VocabSize, proxyVocab)
	return &cut
}

// layerParams counts the weights of cfg's decoder layers (attention and MLP matrices).
func layerParams(cfg *model.Config) int64 {
	h, q, kv := int64(cfg.HiddenSize), int64(cfg.NumHeads*cfg.HeadDim), int64(cfg.NumKVHeads*cfg.HeadDim)
	return int64(cfg.NumLayers) * (h*q*2 + h*kv*2 + 3*h*int64(cfg.IntermediateSize))
}

// choose decides w's kernels, measuring when needed (each set in a process of its own; a test
// binary only its own set, in place) and unless measure is false, with a line on stderr per set.
func (w kernelWork) choose(env Env, fresh, measure bool) device.KernelChoice {
	o := device.KernelOptions{Shape: w.key(), Fresh: fresh, Progress: func(msg string) { fmt.Fprintln(env.Stderr, msg) }}
	if measure {
		o.Probe = device.ProcessProbe(w.args(), probeTimeout, w.measure)
	}
	return device.ChooseKernels(o)
}

// applyKernels chooses w's kernels and, when they are not the ones this process runs, restarts
// the process with them: then it does not return. It prints the choice's reason (which names the
// set) on stderr and returns it; "" when w does not run on the Go backend or names no model.
func applyKernels(env Env, w kernelWork) string {
	if _, err := ledger.KnownShape(w.shape); (w.shape != "" && err != nil) || (w.shape == "" && (w.dir == "" || !model.HasConfig(w.dir))) ||
		!device.GoBackend(w.backend) {
		return "" // no model there (the command says so), or a GPU
	}
	// A test binary runs what it has, unmeasured or as cached: it cannot restart itself.
	c := device.ApplyKernels(w.choose(env, false, device.CanRestart()))
	fmt.Fprintln(env.Stderr, c.Reason)
	return c.Reason
}

// recipeKernels is applyKernels for a recipe's run.
func recipeKernels(env Env, r *recipes.Recipe) string {
	w := kernelWork{dir: r.Model.Path, slots: cmp.Or(int(r.Memory.KVSlots), min(cpuSlots, r.BatchSize())),
		micro: cmp.Or(int(r.Train.MicroBatch), min(cpuMicro, r.BatchSize())), maxLen: r.Rollout.MaxTotalTokens,
		dtype: dtypes.Float32, backend: device.Request{Kind: r.Backend.Kind, PluginPath: r.Backend.Plugin}}
	if r.Model.DType == "bf16" {
		w.dtype = dtypes.BFloat16
	}
	if w.dir == "" {
		w.dir = builtinDir(env)
	}
	return applyKernels(env, w)
}

// kernelsHook is the root's PersistentPreRunE: the model commands that compute choose their
// kernels from their flags before they start (a recipe run chooses in execute, once its recipe
// is loaded). A command whose flags name no model is left to say so itself.
func kernelsHook(env Env) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		switch strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") {
		case "bench rollout", "bench train", "bench serve", "sft", "generate", "score", "serve":
		default:
			return nil
		}
		fl := cmd.Flags() // a flag the command lacks reads as "" or 0
		str := func(name string) string { v, _ := fl.GetString(name); return v }
		slots, _ := fl.GetInt("slots")
		micro, _ := fl.GetInt("micro-batch")
		w := kernelWork{dir: str("model"), shape: str("shape"), slots: cmp.Or(slots, cpuSlots), micro: cmp.Or(micro, cpuMicro), maxLen: cpuMaxLen,
			dtype: dtypes.Float32, backend: device.Request{Kind: str("backend"), PluginPath: str("plugin")}}
		if dt, err := parseDType(str("dtype")); err == nil {
			w.dtype = dt
		}
		if w.dir == "" && w.shape == "" && (cmd.Name() == "sft" || cmd.Name() == "serve" && str("store") == "") {
			w.dir = builtinDir(env) // sft trains a model of the built-in's shape; serve and bench serve default to it
		}
		cmd.SetContext(context.WithValue(cmd.Context(), kernelsKey{}, applyKernels(env, w)))
		return nil
	}
}

// kernelsReport is what `kernels --json` prints: the choice for the work, the machine it is for,
// the set this process runs and every measured set's score (lower is better, 2 the best).
type kernelsReport struct {
	Work    string `json:"work"`
	CPU     string `json:"cpu"`
	Compute string `json:"gomlx_compute"`
	device.KernelChoice
	Active device.KernelSet             `json:"active"`
	Scores map[device.KernelSet]float64 `json:"scores,omitempty"`
}

// kernelFlags name the work that kernels and kernels probe choose for, at the CPU recipe's shapes.
type kernelFlags struct {
	w     kernelWork
	dtype string
}

func (f *kernelFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.w.dir, "model", "", "HuggingFace model folder (default: the built-in model)")
	fl.StringVar(&f.w.shape, "shape", "", "a known shape with random weights instead of --model: "+knownShapes())
	fl.IntVar(&f.w.slots, "slots", cpuSlots, "decode slots (the recipe's memory.kv_slots)")
	fl.IntVar(&f.w.maxLen, "max-len", cpuMaxLen, "tokens per slot (the recipe's rollout.max_total_tokens)")
	fl.IntVar(&f.w.micro, "micro-batch", cpuMicro, "training micro-batch (the recipe's train.micro_batch)")
	fl.StringVar(&f.dtype, "dtype", "float32", "compute dtype: float32 or bfloat16")
}

// work is the work the flags name, on the Go backend; the built-in model when they name none.
func (f *kernelFlags) work(env Env) (kernelWork, error) {
	w := f.w
	w.backend = device.Request{Kind: device.Go}
	if w.dir == "" && w.shape == "" {
		if w.dir = builtinDir(env); w.dir == "" {
			return w, errors.New("kernels: this binary has no built-in model; give --model DIR")
		}
	}
	var err error
	if w.dtype, err = parseDType(f.dtype); err != nil || w.slots <= 0 || w.micro <= 0 || w.maxLen <= 0 {
		return w, fmt.Errorf("kernels: want --slots, --max-len and --micro-batch > 0 and --dtype float32 or bfloat16")
	}
	return w, nil
}

// kernelsCommand shows the kernel choice for a model, the sets side by side, and (--env)
// the chosen set's environment for a shell.
func kernelsCommand(env Env) *cobra.Command {
	var f kernelFlags
	var fresh, asJSON, asEnv bool
	cmd := &cobra.Command{
		Use:   "kernels [--model DIR | --shape NAME] [--fresh] [--json | --env]",
		Short: "the CPU matrix kernels (AVX-512, AVX-512 GEMM, AVX2, portable) runs use on this machine, measured side by side",
		Long: `Which of the Go backend's matrix kernels (AVX-512; AVX2 with AVX-512 for large products, avx512-gemm;
AVX2; portable) is fastest depends on the CPU. A
command that computes on the CPU times a decode step and a training micro-step of its model with each
set, once per CPU model, GoMLX version and model shape (cached in the user's cache folder), and
restarts itself with the set of the lowest score: each phase's time over the fastest set's, summed
(2 = fastest at both). A model whose layers hold 10M weights or more (Qwen3-0.6B and up) is timed
on two of its layers, a 16,384-word vocabulary and two training sequences, random weights: the
same matrices, in a fraction of the time. GOMLX_SIMD_AVX512 / _AVX512_GEMM / _AVX2 in the environment win. This shows the
choice for --model (default: the built-in model); eval "$(agentrl-tui kernels --env)" applies it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := f.work(env)
			if err != nil {
				return err
			}
			c := w.choose(env, fresh, true)
			switch {
			case asEnv:
				_, err = fmt.Fprintf(env.Stdout, "# %s\nexport %s\n", c.Reason, strings.Join(c.Set.Env(), " "))
			case asJSON:
				err = writeJSON(env.Stdout, kernelsReport{Work: w.key(), CPU: device.CPUModel(), Compute: device.ComputeVersion(),
					KernelChoice: c, Active: device.ActiveKernels(os.Getenv), Scores: c.Scores()})
			default:
				writeKernels(env.Stdout, w, c)
			}
			return err
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&fresh, "fresh", false, "measure again, whatever the cache holds")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the choice and every set's timings as JSON")
	cmd.Flags().BoolVar(&asEnv, "env", false, "print the chosen set's environment as shell assignments")
	cmd.AddCommand(kernelsProbeCommand(env))
	return cmd
}

// writeKernels prints the choice for a person: the work, the machine, the sets side by side.
func writeKernels(out io.Writer, w kernelWork, c device.KernelChoice) {
	fmt.Fprintf(out, "%s\non %s, gomlx/compute %s; this process runs the %s kernels\n\n", w.key(), device.CPUModel(), device.ComputeVersion(), device.ActiveKernels(os.Getenv))
	if len(c.Timings) > 0 {
		fmt.Fprintf(out, "%-11s %12s %17s %6s\n", "kernels", "decode step", "train micro-step", "score")
		for _, t := range c.Timings {
			mark := ""
			if t.Set == c.Set {
				mark = "  ← chosen"
			}
			fmt.Fprintf(out, "%-11s %9.2f ms %14.1f ms %6.2f%s\n", t.Set, t.DecodeMs, t.TrainMs, c.Scores()[t.Set], mark)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "chosen: %s\n", c.Reason)
}

// kernelsProbeCommand is what a measurement runs in a process of its own, started with one set's
// environment: it prints that set's KernelTiming as JSON.
func kernelsProbeCommand(env Env) *cobra.Command {
	var f kernelFlags
	cmd := &cobra.Command{
		Use:    "probe (--model DIR | --shape NAME) --slots N --max-len N --micro-batch N --dtype DTYPE",
		Short:  "time one decode step and one training micro-step on this process's kernels (JSON)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := f.work(env)
			if err != nil {
				return err
			}
			t, err := w.measure()
			if err != nil {
				return err
			}
			return writeJSON(env.Stdout, t)
		},
	}
	f.register(cmd.Flags())
	return cmd
}
