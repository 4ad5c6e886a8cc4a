package torchref

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/engine/model"
)

// systemTorch is the python the tests run the reference with: Debian's, where python3-torch puts
// torch. Tests that need it skip, naming why, when it has no torch.
func systemTorch(t *testing.T) string {
	t.Helper()
	p, skipped := Find(context.Background(), "/usr/bin/python3")
	if p == "" {
		t.Skip(skipped)
	}
	return p
}

// TestReferenceMatchesHF loads each HF fixture's weights into cpu.py's model and compares its
// next-token log-probs with the golden ones transformers computed, and its parameter count with
// the engine's: the reference is the engine's model, not merely one of the same size.
func TestReferenceMatchesHF(t *testing.T) {
	python := systemTorch(t)
	for _, name := range []string{"qwen3-tiny", "qwen3-tiny-untied", "qwen2-tiny"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", "fixtures", name)
			cfg, err := model.ReadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var g struct {
				Cases []struct {
					InputIDs          []int32   `json:"input_ids"`
					NextTokenLogprobs []float64 `json:"next_token_logprobs"`
				} `json:"cases"`
			}
			if err := json.Unmarshal(data, &g); err != nil {
				t.Fatal(err)
			}
			c := g.Cases[0]
			for _, x := range g.Cases {
				if len(x.InputIDs) > len(c.InputIDs) {
					c = x
				}
			}
			spec := NewSpec(cfg, 1)
			spec.Weights, spec.CheckIDs = filepath.Join(dir, "model.safetensors"), c.InputIDs
			r, err := Run(context.Background(), python, spec)
			if err != nil {
				t.Fatal(err)
			}
			if r.Params != cfg.NumParams() {
				t.Errorf("reference has %d parameters; want the engine's %d", r.Params, cfg.NumParams())
			}
			if len(r.CheckLogProbs) != len(c.NextTokenLogprobs) {
				t.Fatalf("got %d log-probs; want %d", len(r.CheckLogProbs), len(c.NextTokenLogprobs))
			}
			for i, want := range c.NextTokenLogprobs {
				if math.Abs(r.CheckLogProbs[i]-want) > 1e-4 {
					t.Errorf("log-prob %d = %v; want %v (HF)", i, r.CheckLogProbs[i], want)
				}
			}
		})
	}
}

// TestRunTimesTheWork runs a tiny decode and update and checks that the counts follow the spec.
func TestRunTimesTheWork(t *testing.T) {
	python := systemTorch(t)
	cfg, err := model.ReadConfig(filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	spec := NewSpec(cfg, 2)
	spec.Matmul = []int{32, 64}
	spec.Decode = &Decode{Slots: 2, Sequences: 3, PromptLen: 4, NewTokens: 5}
	spec.Train = &Train{Sequences: 3, Length: 12, Prompt: 4, MicroBatch: 2, Updates: 1}
	r, err := Run(context.Background(), python, spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Threads != 2 || r.Torch == "" || r.MatmulFLOPs <= 0 {
		t.Errorf("threads %d, torch %q, matmul %v; want 2, a version, > 0", r.Threads, r.Torch, r.MatmulFLOPs)
	}
	if d := r.Decode; d == nil || d.Tokens != 15 || d.TokensPerSec <= 0 {
		t.Errorf("decode %+v; want 15 tokens at > 0 tokens/s", d)
	}
	if tr := r.Train; tr == nil || tr.TrainedTokens != 3*(12-4) || tr.TokensPerSec <= 0 {
		t.Errorf("train %+v; want %d trained tokens at > 0 tokens/s", tr, 3*(12-4))
	}
}

// TestFindSkips: an empty flag, a missing python and one without torch each give one line that
// says why and how to get torch, never an error.
func TestFindSkips(t *testing.T) {
	noTorch := filepath.Join(t.TempDir(), "python3")
	script := "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n"
	if err := os.WriteFile(noTorch, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag string
		want []string
	}{
		{"", []string{"--torch-python is empty"}},
		{filepath.Join(t.TempDir(), "nosuch"), []string{"nosuch: not found", "apt-get install python3-torch"}},
		{noTorch, []string{"No module named 'torch'", "apt-get install python3-torch"}},
	} {
		python, skipped := Find(context.Background(), tc.flag)
		if python != "" {
			t.Errorf("Find(%q) = %q; want none", tc.flag, python)
		}
		for _, w := range tc.want {
			if !strings.Contains(skipped, w) || strings.Contains(skipped, "\n") {
				t.Errorf("Find(%q) said %q; want one line with %q", tc.flag, skipped, w)
			}
		}
	}
}

// TestBLASDir: --torch-blas system is the loader's choice, a folder (or the library in it) is
// taken when it holds libblas.so.3, anything else is refused; auto is OpenBLAS's folder when
// there is one.
func TestBLASDir(t *testing.T) {
	if d, err := BLASDir(BLASSystem); d != "" || err != nil {
		t.Errorf("system: %q, %v; want the system's choice", d, err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libblas.so.3")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{dir, lib} {
		if d, err := BLASDir(c); d != dir || err != nil {
			t.Errorf("%s: %q, %v; want %s", c, d, err, dir)
		}
	}
	if _, err := BLASDir(t.TempDir()); err == nil {
		t.Error("a folder without libblas.so.3 was taken")
	}
	if _, err := BLASDir("mkl"); err == nil {
		t.Error("an unknown BLAS was taken")
	}
	auto, err := BLASDir(BLASAuto)
	if err != nil {
		t.Fatal(err)
	}
	if open, err := BLASDir(BLASOpenBLAS); err == nil && auto != open {
		t.Errorf("auto is %q, OpenBLAS is installed in %q", auto, open)
	}
}
