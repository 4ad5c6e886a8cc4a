package bench

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/torchref"
	"agentrl/engine/train"
)

// systemTorch is the python the reference tests run: Debian's, where python3-torch puts torch.
func systemTorch(t *testing.T) string {
	t.Helper()
	p, skipped := torchref.Find(context.Background(), "/usr/bin/python3")
	if p == "" {
		t.Skip(skipped)
	}
	return p
}

// checkVersus checks a benchmark's reference against the engine's tokens/s: with want, a real run
// (reference tokens/s > 0, ratio = engine ÷ reference); without, a skip line and no numbers.
func checkVersus(t *testing.T, v Versus, engineTPS float64, want bool) {
	t.Helper()
	if v.ReferenceError != "" {
		t.Fatalf("reference failed: %s", v.ReferenceError)
	}
	if !want {
		if v.Reference != nil || v.Ratio != 0 || !strings.Contains(v.ReferenceSkipped, "skipped") {
			t.Errorf("reference %+v, ratio %v, skipped %q; want none and a line saying it was skipped", v.Reference, v.Ratio, v.ReferenceSkipped)
		}
		return
	}
	if v.ReferenceTokensPerSec <= 0 || v.Reference == nil || v.Reference.Torch == "" {
		t.Fatalf("reference %+v at %v tokens/s; want a run with a torch version and > 0 tokens/s", v.Reference, v.ReferenceTokensPerSec)
	}
	if want := engineTPS / v.ReferenceTokensPerSec; math.Abs(v.Ratio-want) > 1e-9*want {
		t.Errorf("ratio %v; want tokens/s ÷ reference = %v", v.Ratio, want)
	}
}

// TestTrain runs the training benchmark on the tiny fixture with and without the PyTorch
// reference: tokens/s, the peak and its share, and the reference's numbers when it ran.
func TestTrain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		torch  bool
		config train.BenchConfig
	}{
		{"no reference", false, train.BenchConfig{Sequences: 4, Length: 16, Prompt: 6, MicroBatch: 2, Updates: 1}},
		{"reference", true, train.BenchConfig{Sequences: 3, Length: 12, Prompt: 0, MicroBatch: 8, Updates: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			python := ""
			if tc.torch {
				python = systemTorch(t)
			}
			choice, m := tinyBenchModel(t)
			res, err := Train(context.Background(), m, choice.Kind, tc.config, Torch{Python: python})
			if err != nil {
				t.Fatal(err)
			}
			c := tc.config
			wantMicro := min(c.MicroBatch, c.Sequences)
			if res.Config.MicroBatch != wantMicro || res.TrainedTokens != c.Sequences*(c.Length-max(c.Prompt, 1)) {
				t.Errorf("micro-batch %d, %d trained tokens; want %d, %d", res.Config.MicroBatch, res.TrainedTokens, wantMicro, c.Sequences*(c.Length-max(c.Prompt, 1)))
			}
			if res.TokensPerSec <= 0 || res.FLOPsPerSec <= 0 || res.PeakFLOPs <= 0 || res.PeakShare <= 0 || res.PeakSource == "" {
				t.Errorf("tokens/s %v, FLOP/s %v, peak %v (%q), share %v; want all > 0 and a source", res.TokensPerSec, res.FLOPsPerSec, res.PeakFLOPs, res.PeakSource, res.PeakShare)
			}
			checkVersus(t, res.Versus, res.TokensPerSec, tc.torch)
			// One micro-batch shape (rows × the length bucket 16), one fused step: one program.
			if cs := res.Compiles; cs.Programs != 1 || cs.Kinds["train"].Programs != 1 || cs.Seconds <= 0 {
				t.Errorf("compiled %s; want 1 program (train 1) in > 0 s", cs)
			}
			if tc.torch {
				if r := res.Reference; r.Train.TrainedTokens != res.TrainedTokens || r.Params != m.Config.NumParams() || r.Threads != res.Threads {
					t.Errorf("reference trained %d tokens with %d parameters on %d threads; want the engine's %d, %d, %d",
						r.Train.TrainedTokens, r.Params, r.Threads, res.TrainedTokens, m.Config.NumParams(), res.Threads)
				}
			}
		})
	}
}

// tinyBenchModel opens the Go backend and the tiny Qwen3 fixture, closed when the test ends.
func tinyBenchModel(t *testing.T) (*device.Choice, *model.Model) {
	t.Helper()
	choice, err := device.Open(device.Request{Kind: device.Go})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Model(choice, filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tiny"), "", dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return choice, m
}

// tinyRolloutBench is tinyBenchModel with a bench rollout of 3 sequences of 4 prompt and 5 new
// tokens on 2 slots.
func tinyRolloutBench(t *testing.T) (*device.Choice, *model.Model, rollout.BenchConfig) {
	t.Helper()
	choice, m := tinyBenchModel(t)
	return choice, m, rollout.BenchConfig{Sequences: 3, PromptLen: 4, NewTokens: 5, Seed: 1, Gen: rollout.Config{Slots: 2}}
}

// TestRolloutReference: on the CPU, bench rollout runs the eager reference on the same
// requests (skipped when /usr/bin/python3 has no torch).
func TestRolloutReference(t *testing.T) {
	python := systemTorch(t)
	choice, m, bc := tinyRolloutBench(t)
	res, err := Rollout(context.Background(), m, choice.Kind, bc, Torch{Python: python})
	if err != nil {
		t.Fatal(err)
	}
	checkVersus(t, res.Versus, res.TokensPerSec, true)
	if d := res.Reference.Decode; d.Tokens != int(res.Tokens) {
		t.Errorf("reference sampled %d tokens; want the engine's %d", d.Tokens, res.Tokens)
	}
}

// TestRolloutCompiles: bench rollout reports the generator's programs, one per step shape:
// decode (chunk 1) and prefill (chunk 64) at the one attention bucket of a 16-row cache.
func TestRolloutCompiles(t *testing.T) {
	choice, m, bc := tinyRolloutBench(t)
	res, err := Rollout(context.Background(), m, choice.Kind, bc, Torch{})
	if err != nil {
		t.Fatal(err)
	}
	if cs := res.Compiles; cs.Programs != 2 || cs.Kinds["decode"].Programs != 1 || cs.Kinds["prefill"].Programs != 1 {
		t.Errorf("compiled %s; want 2 programs (decode 1, prefill 1)", cs)
	}
}
