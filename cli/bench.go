package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/cobra"

	"agentrl/engine"
	"agentrl/engine/device"
	"agentrl/engine/rollout"
)

// benchCommand groups the throughput measurements.
func benchCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench TARGET",
		Short: "measure the engine: bench rollout",
	}
	verbs(cmd, "bench needs a target: bench rollout")
	cmd.AddCommand(benchRolloutCommand(env))
	return cmd
}

// benchRolloutCommand measures generation: tokens/s, ms/step, slot occupancy, memory traffic.
func benchRolloutCommand(env Env) *cobra.Command {
	var bf backendFlags
	var dir, shape, dtype, python string
	var asJSON bool
	bc := rollout.BenchConfig{Seed: 1}
	cmd := &cobra.Command{
		Use:   "rollout (--model DIR | --shape NAME) [--slots N --sequences N --prompt-len N --new N]",
		Short: "generation tokens/s, ms/step, slot occupancy and memory traffic against the device's bandwidth",
		Long: `Generates --sequences requests of --prompt-len + --new tokens with --slots concurrent
sequences and reports tokens/s, ms per decode step, slot occupancy and the memory traffic against
the device's bandwidth (on the CPU: a memcpy measured in the same run). On a GPU it also runs
transformers' generate on the same shape with --torch-python and prints the ratio.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (dir == "") == (shape == "") {
				return errors.New("bench rollout: give exactly one of --model DIR or --shape NAME")
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
					return fmt.Errorf("bench rollout: %w", err)
				}
			}
			m, err := engine.BenchModel(choice, dir, shape, dt)
			if err != nil {
				return err
			}
			defer m.Close()
			res, err := engine.BenchRollout(context.Background(), m, choice.Kind, bc, python)
			if err != nil {
				return err
			}
			if res.TorchErr != nil {
				fmt.Fprintln(env.Stderr, res.TorchErr)
			}
			if asJSON {
				return writeJSON(env.Stdout, res)
			}
			res.Write(env.Stdout, res.Bandwidth, res.BandwidthSource)
			if t := res.Torch; t != nil {
				fmt.Fprintf(env.Stdout, "PyTorch %s generate on %s: %.1f tokens/s; this engine / PyTorch = %.2f\n",
					t.Torch, t.Device, t.TokensPerSec, res.TokensPerSec/t.TokensPerSec)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	bf.register(fl)
	fl.StringVar(&dir, "model", "", "HuggingFace model folder")
	fl.StringVar(&shape, "shape", "", "a known shape with random weights instead of --model: "+knownShapes())
	fl.IntVar(&bc.Gen.Slots, "slots", 8, "KV-cache slots (concurrent sequences)")
	fl.IntVar(&bc.Sequences, "sequences", 32, "requests in total")
	fl.IntVar(&bc.PromptLen, "prompt-len", 64, "prompt tokens per request")
	fl.IntVar(&bc.NewTokens, "new", 128, "tokens generated per request")
	fl.StringVar(&dtype, "dtype", "", "compute dtype (default: bfloat16 on cuda, float32 on go)")
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fl.StringVar(&python, "torch-python", "python3", "python with torch+transformers for the GPU reference run; empty skips it")
	return cmd
}
