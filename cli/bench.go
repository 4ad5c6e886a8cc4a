package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/cobra"

	"agentrl/engine/bench"
	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/residency"
	"agentrl/engine/rollout"
	"agentrl/engine/sft"
	"agentrl/engine/tokenizer"
	"agentrl/engine/torchref"
	"agentrl/engine/train"
)

// benchCommand groups the throughput measurements.
func benchCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench TARGET",
		Short: "measure the engine: bench rollout, bench train, bench serve",
	}
	verbs(cmd, "bench needs a target: bench rollout, bench train or bench serve")
	cmd.AddCommand(benchRolloutCommand(env), benchTrainCommand(env), benchSFTCommand(env), benchServeCommand(env))
	return cmd
}

// benchModelFlags are what both benchmarks load a model with: --model or --shape, the backend and
// the compute dtype, and the python of the PyTorch reference.
type benchModelFlags struct {
	bf                        backendFlags
	dir, shape, dtype, python string
	blas                      string // --torch-blas
	asJSON                    bool
	attention                 string // bench train's --attention ("" for rollout: auto)
	attentionBlock            int
	cpuProfile                string // --cpuprofile: a Go CPU profile of the whole command
	stopProfile               func() // set by load when profiling; printBench calls it
}

func (f *benchModelFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.bf.register(fl)
	fl.StringVar(&f.dir, "model", "", "HuggingFace model folder")
	fl.StringVar(&f.shape, "shape", "", "a known shape with random weights instead of --model: "+knownShapes())
	fl.StringVar(&f.dtype, "dtype", "", "compute dtype (default: bfloat16 on cuda, float32 on go)")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fl.StringVar(&f.python, "torch-python", torchref.Auto, "python3 with torch for the PyTorch reference (auto: "+
		strings.Join(torchref.Candidates(), ", then ")+"; on cuda it needs transformers too); empty skips it")
	fl.StringVar(&f.blas, "torch-blas", torchref.BLASAuto, "the BLAS of the CPU PyTorch reference (Debian's torch loads whichever libblas.so.3 it finds): "+
		"auto (OpenBLAS when installed, else the system's), system, openblas, reference, or a folder holding libblas.so.3; the output names the one loaded")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the command to this file (go tool pprof; give --torch-python '' to profile the engine alone)")
}

// load opens the backend (saying which on w) and loads the model to measure.
func (f *benchModelFlags) load(w io.Writer, verb string) (*model.Model, *device.Choice, error) {
	if (f.dir == "") == (f.shape == "") {
		return nil, nil, fmt.Errorf("bench %s: give exactly one of --model DIR or --shape NAME", verb)
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return nil, nil, err
		}
		f.stopProfile = stop
	}
	var params int64 // picks the Go backend's op scheduler
	if f.shape != "" {
		if sh, err := ledger.KnownShape(f.shape); err == nil {
			params = sh.Params()
		}
	} else if sh, err := ledger.ReadShape(f.dir); err == nil {
		params = sh.Params()
	}
	choice, err := f.bf.openFor(w, params)
	if err != nil {
		return nil, nil, err
	}
	dt := dtypes.Float32
	if choice.Kind == device.CUDA {
		dt = dtypes.BFloat16
	}
	if f.dtype != "" {
		if dt, err = parseDType(f.dtype); err != nil {
			return nil, nil, fmt.Errorf("bench %s: %w", verb, err)
		}
	}
	attn, err := model.ParseAttention(f.attention)
	if err != nil {
		return nil, nil, fmt.Errorf("bench %s: %w", verb, err)
	}
	m, err := bench.ModelWith(choice, f.dir, f.shape, model.Options{Compute: dt, Attention: attn, AttentionBlock: f.attentionBlock})
	return m, choice, err
}

// cacheStats is what the backend's compilation cache did so far (nil without one).
func cacheStats(c *device.Choice) *device.CompileCacheStats {
	if c.Cache == nil {
		return nil
	}
	s := c.Cache.Stats()
	return &s
}

// reportReference says on w why the PyTorch reference did not run, if it did not.
func reportReference(w io.Writer, v bench.Versus) {
	for _, s := range []string{v.ReferenceSkipped, v.ReferenceError} {
		if s != "" {
			fmt.Fprintln(w, s)
		}
	}
}

// printBench prints a bench result (after why its reference was skipped or failed, on stderr):
// as JSON with --json, else for a person.
func (f *benchModelFlags) printBench(env Env, v bench.Versus, res interface{ Write(io.Writer) }) error {
	if f.stopProfile != nil {
		f.stopProfile()
		f.stopProfile = nil
	}
	reportReference(env.Stderr, v)
	if f.asJSON {
		return writeJSON(env.Stdout, res)
	}
	res.Write(env.Stdout)
	return nil
}

// benchRolloutCommand measures generation: tokens/s, ms/step, slot occupancy, memory traffic.
func benchRolloutCommand(env Env) *cobra.Command {
	var f benchModelFlags
	bc := rollout.BenchConfig{Seed: 1}
	cmd := &cobra.Command{
		Use:   "rollout (--model DIR | --shape NAME) [--slots N --sequences N --prompt-len N --new N] [--json] [--torch-python PATH --torch-blas auto|openblas|…]",
		Short: "generation tokens/s, ms/step, slot occupancy and memory traffic against the device's bandwidth",
		Long: `Generates --sequences requests of --prompt-len + --new tokens with --slots concurrent
sequences and reports tokens/s, ms per decode step, slot occupancy and the memory traffic against
the device's bandwidth (on the CPU: a memcpy measured in the same run). Beside it, when a python3
with torch is found, PyTorch generates the same requests on the same shape and the ratio is
printed: on the CPU the eager reference (engine/torchref/cpu.py, a KV cache, as many threads as
the Go backend), on a GPU transformers' generate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, choice, err := f.load(env.Stderr, "rollout")
			if err != nil {
				return err
			}
			defer m.Close()
			res, err := bench.Rollout(context.Background(), m, choice.Kind, bc, bench.Torch{Python: f.python, BLAS: f.blas})
			if err != nil {
				return err
			}
			res.Model, res.Kernels, res.CompileCache = cmp.Or(f.shape, f.dir), chosenKernels(cmd), cacheStats(choice)
			return f.printBench(env, res.Versus, res)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.IntVar(&bc.Gen.Slots, "slots", 8, "KV-cache slots (concurrent sequences)")
	fl.IntVar(&bc.Sequences, "sequences", 32, "requests in total")
	fl.IntVar(&bc.PromptLen, "prompt-len", 64, "prompt tokens per request")
	fl.IntVar(&bc.NewTokens, "new", 128, "tokens generated per request")
	return cmd
}

// benchTrainCommand measures one training update: tokens/s, micro-step, share of the peak.
func benchTrainCommand(env Env) *cobra.Command {
	var f benchModelFlags
	var seqLen int
	var peak bool
	c := train.BenchConfig{Seed: 1}
	cmd := &cobra.Command{
		Use:   "train (--model DIR | --shape NAME) [--sequences 64 --length 256 --prompt 96 --micro-batch 8 --updates 2] [--json] [--torch-python PATH --torch-blas auto|openblas|…]",
		Short: "one training update of the CPU recipe's shape: tokens/s, micro-step ms, GFLOP/s and the share of the peak",
		Long: `Runs the policy-gradient update the recipes run (clipped surrogate, entropy bonus, AdamW
with weight decay and a global-norm clip, one AdamW update per micro-batch) on --sequences random
sequences of --length tokens whose first --prompt tokens are outside the loss: by default the CPU
recipe's update (recipes/retool.yaml: 64 trajectories, micro-batch 8). It reports trained tokens/s
(the best of --updates updates after one that compiles), ms per micro-step, GFLOP/s and their share
of the peak, which is the best float32 matmul of this backend measured in the same run (not the
hardware's peak; the output says so). On the Go backend, when a python3 with torch is found,
PyTorch eager (engine/torchref/cpu.py) runs the same update on the same shape with as many threads
and the ratio is printed. --seq-len N runs one micro-step of one sequence of N tokens and reports
peak_bytes: the memory the update added at its peak (on the Go backend the bytes its buffers hold,
counted as they change hands; NVML's used memory on a GPU), beside the ledger's figure for the same
micro-batch (ledger_step_bytes) and the process's resident peak; --attention picks the attention path (auto: fused on a GPU in bf16, chunked
beyond one block, dense below).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seqLen > 0 {
				c.Sequences, c.MicroBatch, c.Length, c.Prompt = 1, 1, seqLen, min(c.Prompt, seqLen/4)
			}
			if c.LogitsChunk == 0 {
				rows := c.MicroBatch
				if rows <= 0 || rows > c.Sequences {
					rows = c.Sequences
				}
				c.LogitsChunk = train.RunLogitsChunk(rows)
			}
			m, choice, err := f.load(env.Stderr, "train")
			if err != nil {
				return err
			}
			if seqLen > 0 || peak {
				c.Peak = bench.PeakMeter(choice.Kind, m.Backend)
			}
			defer m.Close()
			res, err := bench.Train(context.Background(), m, choice.Kind, c, bench.Torch{Python: f.python, BLAS: f.blas})
			if err != nil {
				return err
			}
			res.Model, res.Kernels, res.CompileCache = cmp.Or(f.shape, f.dir), chosenKernels(cmd), cacheStats(choice)
			return f.printBench(env, res.Versus, res)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.IntVar(&c.Sequences, "sequences", 64, "sequences in the update (the CPU recipe: 4 tasks × 16 samples)")
	fl.IntVar(&c.Length, "length", 256, "tokens per sequence")
	fl.IntVar(&c.Prompt, "prompt", 96, "prompt tokens per sequence, outside the loss")
	fl.IntVar(&c.MicroBatch, "micro-batch", 8, "sequences per forward/backward pass and AdamW update (the CPU recipe's auto)")
	fl.IntVar(&c.Updates, "updates", 2, "timed updates after the first; the best is reported")
	fl.IntVar(&c.LogitsChunk, "logits-chunk", 0, "positions projected onto the vocabulary at once (0: as a recipe run picks for the micro-batch, 32 from 8 rows)")
	fl.IntVar(&seqLen, "seq-len", 0, "one micro-step of one sequence of N tokens (sets --sequences 1 --micro-batch 1 --length N, a prompt of at most N/4) and its peak_bytes")
	fl.BoolVar(&peak, "peak", false, "measure peak_bytes of one more update (implied by --seq-len)")
	fl.StringVar(&f.attention, "attention", "auto", "attention over whole sequences: auto, dense, chunked, fused")
	fl.IntVar(&f.attentionBlock, "attention-block", 0, "query block of chunked attention (0: the default)")
	return cmd
}

// benchSFTCommand measures the SFT step of sft --data against PyTorch eager's supervised step.
func benchSFTCommand(env Env) *cobra.Command {
	var f benchModelFlags
	c := sft.BenchConfig{BenchConfig: train.BenchConfig{Seed: 1}}
	cmd := &cobra.Command{
		Use:   "sft (--model DIR | --shape NAME) [--sequences 8 --length 512 --prompt 128 --micro-batch 1 --updates 2] [--json] [--torch-python PATH --torch-blas auto|openblas|…]",
		Short: "one SFT step as sft --data takes it: trained tokens/s against PyTorch eager's supervised step",
		Long: `Runs the supervised step of sft --data (forward and backward in micro-batches of
--micro-batch, their gradients summed into one AdamW update with weight decay and a global-norm
clip) on --sequences random sequences of --length tokens whose first --prompt tokens are outside
the loss, and reports trained tokens/s (the best of --updates steps after one that compiles). On the Go backend, when a python3 with torch
is found, PyTorch eager (engine/torchref/cpu.py) runs a supervised step on the same shape, tokens
and micro-batches with as many threads (cross-entropy on the same tokens, gradients accumulated,
one AdamW update) and the ratio is printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, choice, err := f.load(env.Stderr, "sft")
			if err != nil {
				return err
			}
			defer m.Close()
			res, err := bench.SFT(context.Background(), m, choice.Kind, c, bench.Torch{Python: f.python, BLAS: f.blas})
			if err != nil {
				return err
			}
			res.Kernels = chosenKernels(cmd)
			return f.printBench(env, res.Versus, res)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.IntVar(&c.Sequences, "sequences", 8, "conversations in the step")
	fl.IntVar(&c.Length, "length", 512, "tokens per conversation")
	fl.IntVar(&c.Prompt, "prompt", 128, "prompt tokens per conversation, outside the loss")
	fl.IntVar(&c.MicroBatch, "micro-batch", 1, "conversations per forward/backward pass (their gradients summed into the step's one update)")
	fl.IntVar(&c.Updates, "updates", 2, "timed steps after the first; the best is reported")
	fl.IntVar(&c.LogitsChunk, "logits-chunk", 64, "positions projected onto the vocabulary at once, as sft --data does")
	fl.BoolVar(&c.GradientCheckpointing, "gradient-checkpointing", false, "recompute each layer in the backward pass (sft --gradient-checkpointing; no PyTorch reference then)")
	fl.IntVar(&c.OptimizerBits, "optimizer-bits", 32, "AdamW moments in 32 or 8 bits (sft --optimizer-bits)")
	fl.StringVar(&f.attention, "attention", "auto", "attention over whole sequences: auto, dense, chunked, fused")
	fl.IntVar(&f.attentionBlock, "attention-block", 0, "query block of chunked attention (0: the default)")
	return cmd
}

// benchServeCommand measures the HTTP endpoint against the generator it serves from.
func benchServeCommand(env Env) *cobra.Command {
	var bf backendFlags
	var dir, dtype string
	var asJSON bool
	c := bench.ServeConfig{Bench: rollout.BenchConfig{Seed: 1}}
	cmd := &cobra.Command{
		Use:   "serve [--model DIR] [--clients 16 --slots 16 --sequences 64 --prompt-len 64 --new 128 --rounds 2] [--json]",
		Short: "requests/s and tokens/s through the OpenAI-compatible endpoint against bench rollout's, on the same engine",
		Long: `Runs bench rollout's requests (--sequences of --prompt-len random tokens, --new tokens each at
temperature 1, through --slots slots) straight into a generator, then the same requests as
/v1/completions of token ids through the HTTP endpoint (engine/serve) from --clients concurrent
clients, each an API key sending one request at a time; --rounds times, alternating. It reports
requests/s and tokens/s of each pass and what the HTTP layer costs: 1 − best HTTP tokens/s ÷ best
generator tokens/s. Without --model it serves the built-in model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				var err error
				if dir, err = model.BuiltinDir(env.Builtin); err != nil {
					return err
				}
			}
			choice, err := bf.open(env.Stderr)
			if err != nil {
				return err
			}
			dt := dtypes.Float32
			if choice.Kind == device.CUDA {
				dt = dtypes.BFloat16
			}
			if dtype != "" {
				if dt, err = parseDType(dtype); err != nil {
					return fmt.Errorf("bench serve: %w", err)
				}
			}
			tok, err := tokenizer.Load(dir)
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			loaded, err := model.Load(choice.Backend, dir, model.Options{Compute: dt})
			if err != nil {
				return err
			}
			defer loaded.Close()
			m, done, err := residency.InferenceModel(loaded, false) // as serve decodes (see serve)
			if err != nil {
				return fmt.Errorf("bench serve: %w", err)
			}
			defer done()
			res, err := bench.Serve(context.Background(), m, tok, c)
			if err != nil {
				return err
			}
			res.Kernels = chosenKernels(cmd)
			if choice.Kind == device.Go {
				res.CPU = device.CPUModel()
			}
			if asJSON {
				return writeJSON(env.Stdout, res)
			}
			res.Write(env.Stdout)
			return nil
		},
	}
	fl := cmd.Flags()
	bf.register(fl)
	fl.StringVar(&dir, "model", "", "HuggingFace model folder with tokenizer.json (default: the built-in model)")
	fl.StringVar(&dtype, "dtype", "", "compute dtype (default: bfloat16 on cuda, float32 on go)")
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fl.IntVar(&c.Clients, "clients", 16, "concurrent HTTP clients (agents)")
	fl.IntVar(&c.Rounds, "rounds", 2, "alternating generator and HTTP passes; the best of each is compared")
	fl.IntVar(&c.Bench.Gen.Slots, "slots", 16, "KV-cache slots (concurrent sequences)")
	fl.IntVar(&c.Bench.Sequences, "sequences", 64, "requests in each pass")
	fl.IntVar(&c.Bench.PromptLen, "prompt-len", 64, "prompt tokens per request")
	fl.IntVar(&c.Bench.NewTokens, "new", 128, "tokens generated per request")
	return cmd
}

// kernelsKey is the context key under which kernelsHook leaves the choice's reason.
type kernelsKey struct{}

// chosenKernels is the kernel choice kernelsHook made for cmd ("" when none was).
func chosenKernels(cmd *cobra.Command) string {
	s, _ := cmd.Context().Value(kernelsKey{}).(string)
	return s
}
