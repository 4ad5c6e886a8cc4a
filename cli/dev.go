package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/cobra"

	"agentrl/engine/device"
	"agentrl/engine/doctor"
	"agentrl/store/safetensors"
)

// devCommand groups the hidden helpers of scripts/gpu-check.sh (a random-weight model folder, HF
// parity on the fixtures, an NVML peak around a command, and the report), a stored run's
// fingerprint and a synthetic DAPO-Math-17k Parquet file.
func devCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "dev VERB",
		Short:  "helpers of scripts/gpu-check.sh (random-model, parity, op-parity, watch, gpu-report), a run's fingerprint and a synthetic DAPO file (dapo-parquet)",
		Hidden: true,
	}
	verbs(cmd, "dev needs a verb: random-model, parity, op-parity, watch, gpu-report, fingerprint or dapo-parquet")
	cmd.AddCommand(randomModelCommand(env), parityCommand(env), opParityCommand(env), watchCommand(env), gpuReportCommand(env), fingerprintCommand(env),
		dapoParquetCommand(env))
	return cmd
}

// randomModelCommand writes a HuggingFace folder with random weights of a known shape.
func randomModelCommand(env Env) *cobra.Command {
	var o doctor.RandomModel
	var dtype string
	cmd := &cobra.Command{
		Use:   "random-model (--shape NAME | --like DIR) --out DIR [--tokenizer PATH] [--dtype bf16]",
		Short: "write a HuggingFace folder with random weights: config.json, model.safetensors, the tokenizer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch dtype {
			case "bf16", "bfloat16":
				o.DType = safetensors.BF16
			case "f32", "float32":
				o.DType = safetensors.F32
			default:
				return fmt.Errorf("dev random-model: --dtype %q is not bf16 or f32", dtype)
			}
			t0 := time.Now()
			if err := doctor.WriteRandomModel(o); err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "wrote %s in %.1fs\n", o.Out, time.Since(t0).Seconds())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Shape, "shape", "", "a known shape: "+knownShapes())
	fl.StringVar(&o.Like, "like", "", "a model folder whose config.json (and, unless --tokenizer, tokenizer) to copy")
	fl.StringVar(&o.Tokenizer, "tokenizer", "", "a tokenizer folder (tokenizer.json[.gz], tokenizer_config.json) or file, e.g. testdata/fixtures/qwen3-tokenizer")
	fl.StringVar(&o.Out, "out", "", "the folder to write")
	fl.StringVar(&dtype, "dtype", "bf16", "weights dtype in the file: bf16 or f32")
	fl.Uint64Var(&o.Seed, "seed", 1, "random seed")
	return cmd
}

// parityCommand compares every model fixture with its HF golden values in each dtype.
func parityCommand(env Env) *cobra.Command {
	var bf backendFlags
	var root, dts string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "parity [--fixtures DIR] [--dtypes float32,bfloat16] [--backend cuda] [--json]",
		Short: "HF parity of every model fixture: log-prob error, argmax, greedy through score and generate",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dirs, err := doctor.Fixtures(root)
			if err != nil {
				return err
			}
			var types []dtypes.DType
			for _, s := range strings.Split(dts, ",") {
				dt, err := parseDType(strings.TrimSpace(s))
				if err != nil {
					return fmt.Errorf("dev parity: %w", err)
				}
				types = append(types, dt)
			}
			choice, err := bf.open(env.Stderr)
			if err != nil {
				return err
			}
			defer choice.Backend.Finalize()
			rep := doctor.ParityReport{Backend: choice.Kind, Rows: doctor.Parity(context.Background(), choice.Backend, dirs, types)}
			if asJSON {
				return writeJSON(env.Stdout, rep)
			}
			for _, r := range rep.Rows {
				fmt.Fprintf(env.Stdout, "%-20s %-9s ok=%-5v logprob err %.3g, argmax %.0f%%, greedy score %d/%d generate %d/%d %s\n",
					r.Fixture, r.DType, r.OK, r.MaxLogProbErr, 100*r.ArgmaxAgree, r.ScoreGreedy, r.Cases, r.Generate, r.Cases, r.Error)
			}
			return nil
		},
	}
	bf.register(cmd.Flags())
	cmd.Flags().StringVar(&root, "fixtures", filepath.Join("testdata", "fixtures"), "folder of model fixtures (config.json, model.safetensors, golden.json)")
	cmd.Flags().StringVar(&dts, "dtypes", "float32,bfloat16", "compute dtypes, comma-separated")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return cmd
}

// opParityCommand runs the forward pass's float32 operations one by one on a backend against
// float64: where dev parity says how far a backend's logits are from HF's, this says which
// operation puts them there.
func opParityCommand(env Env) *cobra.Command {
	var bf backendFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "op-parity [--backend cuda] [--json]",
		Short: "each float32 op of the forward pass (exp, log, sqrt, logistic, cos/sin, dot, RMS norm, softmax, log-probs) against float64",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			choice, err := bf.open(env.Stderr)
			if err != nil {
				return err
			}
			defer choice.Backend.Finalize()
			rep := doctor.OpParityReport{Backend: choice.Kind, Rows: doctor.OpParity(choice.Backend)}
			if asJSON {
				return writeJSON(env.Stdout, rep)
			}
			fmt.Fprintf(env.Stdout, "float32 ops on the %s backend against float64 (error relative to what each element sums; 1 ulp = 1.19e-7)\n", rep.Backend)
			for _, r := range rep.Rows {
				if r.Error != "" {
					fmt.Fprintf(env.Stdout, "%-40s %s\n", r.Op, r.Error)
					continue
				}
				fmt.Fprintf(env.Stdout, "%-40s %9.3g  %8.1f ulps  (%s)\n", r.Op, r.MaxRel, r.Ulps, r.Worst)
			}
			return nil
		},
	}
	bf.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return cmd
}

// watchCommand runs a command while sampling NVML, and writes the peak.
func watchCommand(env Env) *cobra.Command {
	var out string
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "watch --out PEAK.json [--every 100ms] -- COMMAND [ARGS...]",
		Short: "run a command while sampling GPU memory through NVML; write the peak as JSON",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" || every <= 0 {
				return errors.New("dev watch: give --out FILE and --every > 0")
			}
			c := exec.Command(args[0], args[1:]...)
			c.Stdout, c.Stderr = env.Stdout, env.Stderr
			mon := device.NewMonitor()
			peak, runErr := doctor.Watch(c, mon, every)
			mon.Close()
			data, err := json.Marshal(peak)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
				return err
			}
			if runErr != nil {
				return fmt.Errorf("dev watch: %s: %w", args[0], runErr)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write the peak to")
	cmd.Flags().DurationVar(&every, "every", 100*time.Millisecond, "sampling period")
	return cmd
}

// gpuReportCommand assembles the self-check's report from its steps' files.
func gpuReportCommand(env Env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "gpu-report STEPS_DIR --out DIR",
		Short: "read scripts/gpu-check.sh's step files; write report.json and report.md, print the markdown",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := doctor.BuildReport(args[0])
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Dir(filepath.Clean(args[0]))
			}
			data, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			md := rep.Markdown()
			if err := os.WriteFile(filepath.Join(out, "report.json"), append(data, '\n'), 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, "report.md"), []byte(md), 0o644); err != nil {
				return err
			}
			if _, err := fmt.Fprint(env.Stdout, md); err != nil {
				return err
			}
			if !rep.OK {
				return errors.New("gpu-report: not every step ran and every parity row held (see the report)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder for report.json and report.md (default: STEPS_DIR's parent)")
	return cmd
}
