package cli

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"agentrl/engine/torchref"
)

// benchTrainJSON is the part of `bench train --json` the tests read.
type benchTrainJSON struct {
	TrainedTokens         int     `json:"trained_tokens"`
	TokensPerSec          float64 `json:"tokens_per_s"`
	MicroStepMs           float64 `json:"micro_step_ms"`
	FLOPsPerSec           float64 `json:"flops_per_s"`
	PeakFLOPs             float64 `json:"peak_flops"`
	PeakSource            string  `json:"peak_source"`
	PeakShare             float64 `json:"peak_share"`
	Threads               int     `json:"threads"`
	ReferenceTokensPerSec float64 `json:"reference_tokens_per_s"`
	Ratio                 float64 `json:"ratio"`
	ReferenceSkipped      string  `json:"reference_skipped"`
	Compiles              struct {
		Programs int                        `json:"programs"`
		Seconds  float64                    `json:"seconds"`
		Kinds    map[string]json.RawMessage `json:"kinds"`
	} `json:"compiles"`
	Reference *struct {
		Torch   string `json:"torch"`
		Threads int    `json:"threads"`
	} `json:"reference"`
}

// TestBenchTrainJSON runs `bench train --json` on the tiny fixture, without the PyTorch reference
// and (when /usr/bin/python3 has torch) with it, and checks the numbers hang together.
func TestBenchTrainJSON(t *testing.T) {
	tiny := []string{"bench", "train", "--model", fixture("qwen3-tiny"), "--backend", "go", "--sequences", "4", "--length", "16",
		"--prompt", "6", "--micro-batch", "2", "--updates", "1", "--json"}
	for _, tc := range []struct {
		name, python string
		torch        bool
	}{
		{"no reference", "", false},
		{"reference", "/usr/bin/python3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.torch {
				if p, skipped := torchref.Find(context.Background(), tc.python); p == "" {
					t.Skip(skipped)
				}
			}
			out, err := runCmd(t, append(tiny, "--torch-python", tc.python)...)
			if err != nil {
				t.Fatal(err)
			}
			var r benchTrainJSON
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("bench train --json printed %q: %v", out, err)
			}
			if r.TrainedTokens != 4*(16-6) || r.TokensPerSec <= 0 || r.MicroStepMs <= 0 {
				t.Errorf("%d trained tokens at %v tokens/s, %v ms per micro-step; want 40 at > 0", r.TrainedTokens, r.TokensPerSec, r.MicroStepMs)
			}
			if r.PeakFLOPs <= 0 || !strings.Contains(r.PeakSource, "matmul of this backend") || math.Abs(r.PeakShare-r.FLOPsPerSec/r.PeakFLOPs) > 1e-9 {
				t.Errorf("peak %v (%q), share %v; want > 0, named as this backend's matmul, flops_per_s ÷ peak", r.PeakFLOPs, r.PeakSource, r.PeakShare)
			}
			if c := r.Compiles; c.Programs != 1 || c.Seconds <= 0 || c.Kinds["train"] == nil {
				t.Errorf("compiles %+v; want 1 program (the fused micro-step, kind train) in > 0 s", c)
			}
			if !tc.torch {
				if r.Reference != nil || r.Ratio != 0 || r.ReferenceSkipped == "" {
					t.Errorf("reference %+v, ratio %v, skipped %q; want none, and why", r.Reference, r.Ratio, r.ReferenceSkipped)
				}
				return
			}
			if r.ReferenceTokensPerSec <= 0 || r.Reference == nil || r.Reference.Torch == "" || r.Reference.Threads != r.Threads {
				t.Fatalf("reference %+v at %v tokens/s; want torch on the engine's %d threads at > 0 tokens/s", r.Reference, r.ReferenceTokensPerSec, r.Threads)
			}
			if want := r.TokensPerSec / r.ReferenceTokensPerSec; math.Abs(r.Ratio-want) > 1e-9*want {
				t.Errorf("ratio %v; want tokens_per_s ÷ reference_tokens_per_s = %v", r.Ratio, want)
			}
		})
	}
}

// TestBenchNeedsOneModel: bench train and bench rollout want exactly one of --model and --shape.
func TestBenchNeedsOneModel(t *testing.T) {
	for _, verb := range []string{"train", "rollout"} {
		for _, args := range [][]string{{}, {"--model", fixture("qwen3-tiny"), "--shape", "qwen3-0.6b"}} {
			_, err := runCmd(t, append([]string{"bench", verb, "--backend", "go"}, args...)...)
			if err == nil || !strings.Contains(err.Error(), "exactly one of --model DIR or --shape NAME") {
				t.Errorf("bench %s %v: %v; want an error asking for one of --model or --shape", verb, args, err)
			}
		}
	}
}
