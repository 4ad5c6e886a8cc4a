package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	_ "github.com/gomlx/compute/gobackend"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/device"
	"agentrl/store/safetensors"
)

// golden mirrors testdata/fixtures/*/golden.json, produced by HF transformers in float32.
type golden struct {
	Cases []struct {
		InputIDs           []int32   `json:"input_ids"`
		LastLogitsFirst16  []float64 `json:"last_logits_first16"`
		LogitsSumPerPos    []float64 `json:"logits_sum_per_pos"`
		ArgmaxPerPos       []int32   `json:"argmax_per_pos"`
		NextTokenLogprobs  []float64 `json:"next_token_logprobs"`
		GreedyContinuation []int32   `json:"greedy_continuation"`
	} `json:"cases"`
}

var fixtureModels = []string{"qwen3-tiny", "qwen3-tiny-untied", "qwen2-tiny"}

func fixtureDir(name string) string { return filepath.Join("..", "..", "testdata", "fixtures", name) }

func goBackend(t testing.TB) compute.Backend {
	t.Helper()
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatalf("go backend: %v", err)
	}
	return b
}

func readGolden(t *testing.T, name string) golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir(name), "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) == 0 {
		t.Fatalf("%s: golden.json has no cases", name)
	}
	return g
}

const tol = 1e-4

// TestFixtureParity checks every golden case of every fixture model on the Go backend in float32:
// logits and log-probs within 1e-4 of HF, argmax and greedy continuations identical — with the
// automatic attention (dense at these lengths) and with chunked attention in blocks of 3 queries.
func TestFixtureParity(t *testing.T) {
	backend := goBackend(t)
	for _, name := range fixtureModels {
		for _, opts := range []Options{{Compute: dtypes.Float32}, {Compute: dtypes.Float32, Attention: AttentionChunked, AttentionBlock: 3}} {
			t.Run(name+"/"+string(opts.Attention), func(t *testing.T) { fixtureParity(t, backend, name, opts) })
		}
	}
}

func fixtureParity(t *testing.T, backend compute.Backend, name string, opts Options) {
	g := readGolden(t, name)
	m, err := Load(backend, fixtureDir(name), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for ci, c := range g.Cases {
		logits, err := m.Logits(c.InputIDs)
		if err != nil {
			t.Fatal(err)
		}
		last := logits[len(logits)-1]
		for i, want := range c.LastLogitsFirst16 {
			if d := math.Abs(float64(last[i]) - want); d > tol {
				t.Errorf("case %d: last logits[%d] = %.7f; want %.7f (diff %.2g)", ci, i, last[i], want, d)
			}
		}
		for p, want := range c.LogitsSumPerPos {
			var sum float64
			for _, v := range logits[p] {
				sum += float64(v)
			}
			if d := math.Abs(sum - want); d > tol {
				t.Errorf("case %d: sum of logits at position %d = %.7f; want %.7f", ci, p, sum, want)
			}
		}
		s, err := m.Score([][]int32{c.InputIDs})
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range c.ArgmaxPerPos {
			if s.Argmax[0][p] != want {
				t.Errorf("case %d: argmax at %d = %d; want %d", ci, p, s.Argmax[0][p], want)
			}
		}
		if len(s.NextLogProbs[0]) != len(c.NextTokenLogprobs) {
			t.Fatalf("case %d: %d next-token log-probs; want %d", ci, len(s.NextLogProbs[0]), len(c.NextTokenLogprobs))
		}
		for p, want := range c.NextTokenLogprobs {
			if d := math.Abs(float64(s.NextLogProbs[0][p]) - want); d > tol {
				t.Errorf("case %d: log p(ids[%d]) = %.7f; want %.7f", ci, p+1, s.NextLogProbs[0][p], want)
			}
		}
		greedy, err := m.Greedy(c.InputIDs, len(c.GreedyContinuation))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range c.GreedyContinuation {
			if greedy[i] != want {
				t.Errorf("case %d: greedy = %v; want %v", ci, greedy, c.GreedyContinuation)
				break
			}
		}
	}
}

// TestBatchedScoreMatchesSingle checks that padding and batching sequences of different lengths
// does not change any sequence's log-probs (the padding mask works).
func TestBatchedScoreMatchesSingle(t *testing.T) {
	backend := goBackend(t)
	g := readGolden(t, "qwen3-tiny")
	m, err := Load(backend, fixtureDir("qwen3-tiny"), Options{LogitsChunk: 5})
	if err != nil {
		t.Fatal(err)
	}
	var seqs [][]int32
	for _, c := range g.Cases {
		seqs = append(seqs, c.InputIDs)
	}
	batch, err := m.Score(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range g.Cases {
		for p, want := range c.NextTokenLogprobs {
			if d := math.Abs(float64(batch.NextLogProbs[i][p]) - want); d > tol {
				t.Errorf("seq %d pos %d: batched log-prob %.7f; want %.7f", i, p, batch.NextLogProbs[i][p], want)
			}
		}
	}
}

func TestScoreRejectsBadIDs(t *testing.T) {
	m, err := Load(goBackend(t), fixtureDir("qwen3-tiny"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		seqs [][]int32
	}{
		{"empty batch", nil},
		{"empty sequence", [][]int32{{}}},
		{"id past vocab", [][]int32{{1, 512}}},
		{"negative id", [][]int32{{-1}}},
	} {
		if _, err := m.Score(tc.seqs); err == nil {
			t.Errorf("%s: Score returned no error", tc.name)
		}
	}
}

// TestSaveLoadRoundTrip: load → save → load gives bit-identical float32 weights and the same
// log-probs; saving in bf16 stays within bf16 rounding.
func TestSaveLoadRoundTrip(t *testing.T) {
	backend := goBackend(t)
	for _, name := range fixtureModels {
		cfg, err := ReadConfig(fixtureDir(name))
		if err != nil {
			t.Fatal(err)
		}
		p, err := LoadParams(fixtureDir(name), cfg)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := p.Save(dir, safetensors.F32); err != nil {
			t.Fatal(err)
		}
		m2, err := Load(backend, dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range p.Specs {
			a := tensors.MustCopyFlatData[float32](p.Values[i])
			b := tensors.MustCopyFlatData[float32](m2.Params.Values[i])
			for j := range a {
				if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
					t.Fatalf("%s: %s[%d] = %v after the round trip; was %v", name, s.Name, j, b[j], a[j])
				}
			}
		}
		saved, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
		again := t.TempDir()
		if err := m2.Params.Save(again, safetensors.F32); err != nil {
			t.Fatal(err)
		}
		resaved, _ := os.ReadFile(filepath.Join(again, "model.safetensors"))
		if !bytes.Equal(saved, resaved) {
			t.Errorf("%s: save → load → save is not byte-identical", name)
		}
		bf := t.TempDir()
		if err := p.Save(bf, safetensors.BF16); err != nil {
			t.Fatal(err)
		}
		cfgBF, err := ReadConfig(bf)
		if err != nil || cfgBF.DType != "bfloat16" {
			t.Fatalf("bf16 save: config dtype %v, err %v", cfgBF, err)
		}
	}
}

// TestLoadErrorsNameFileAndTensor corrupts a copy of a fixture in several ways.
func TestLoadErrorsNameFileAndTensor(t *testing.T) {
	src := fixtureDir("qwen3-tiny")
	cfgBytes, _ := os.ReadFile(filepath.Join(src, "config.json"))
	weights, _ := os.ReadFile(filepath.Join(src, "model.safetensors"))
	f, err := safetensors.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	without := func(drop string, reshape bool) []byte {
		var ts []*safetensors.Tensor
		for _, n := range f.Names() {
			tt := *f.Tensors[n]
			if n == drop && !reshape {
				continue
			}
			if n == drop {
				tt.Shape = []int{tt.Shape[1], tt.Shape[0]}
			}
			ts = append(ts, &tt)
		}
		var b bytes.Buffer
		if err := safetensors.Encode(&b, nil, ts); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, tc := range []struct {
		name    string
		weights []byte
		wants   []string
	}{
		{"truncated", weights[:len(weights)/2], []string{"model.safetensors", "outside"}},
		{"missing tensor", without("model.layers.1.mlp.up_proj.weight", false), []string{"model.safetensors", "missing tensor model.layers.1.mlp.up_proj.weight"}},
		{"shape mismatch", without("model.layers.0.self_attn.k_proj.weight", true), []string{"model.safetensors", "model.layers.0.self_attn.k_proj.weight has shape [64 32], want [32 64]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "config.json"), cfgBytes, 0o644)
			os.WriteFile(filepath.Join(dir, "model.safetensors"), tc.weights, 0o644)
			_, err := Load(goBackend(t), dir, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestBF16Compute runs the fixtures with bfloat16 matmuls and activations (float32 master
// weights, float32 softmax and norms): log-probs within 2e-2 of HF's float32, greedy identical.
//
// A backend whose bfloat16 matmuls are wrong (the Go backend built with GOEXPERIMENT=simd on an
// AVX2-only CPU, before patch 12 of third_party/compute) must refuse bfloat16 with
// ErrBadLowPrecision instead: that refusal is checked then, and the test says which of the two it
// verified.
func TestBF16Compute(t *testing.T) {
	backend := goBackend(t)
	if err := CheckComputeDType(backend, dtypes.BFloat16); err != nil {
		if !errors.Is(err, ErrBadLowPrecision) {
			t.Fatal(err)
		}
		_, lerr := Load(backend, fixtureDir(fixtureModels[0]), Options{Compute: dtypes.BFloat16})
		if !errors.Is(lerr, ErrBadLowPrecision) || !strings.Contains(lerr.Error(), "model.dtype: f32") {
			t.Fatalf("Load in bf16 on a backend with wrong bf16 matmuls: got %v; want ErrBadLowPrecision naming the fix", lerr)
		}
		t.Logf("this backend's bf16 compute is wrong, and loading in bf16 is refused: %v", err)
		return
	}
	for _, name := range fixtureModels {
		g := readGolden(t, name)
		m, err := Load(backend, fixtureDir(name), Options{Compute: dtypes.BFloat16})
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for ci, c := range g.Cases {
			s, err := m.Score([][]int32{c.InputIDs})
			if err != nil {
				t.Fatal(err)
			}
			for p, want := range c.NextTokenLogprobs {
				worst = math.Max(worst, math.Abs(float64(s.NextLogProbs[0][p])-want))
			}
			greedy, err := m.Greedy(c.InputIDs, len(c.GreedyContinuation))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(greedy, c.GreedyContinuation) {
				t.Errorf("%s case %d: bf16 greedy %v; want %v", name, ci, greedy, c.GreedyContinuation)
			}
		}
		if worst > 2e-2 {
			t.Errorf("%s: bf16 log-probs differ from HF float32 by up to %.4f; want ≤ 0.02", name, worst)
		}
		t.Logf("%s: bf16 max |Δ log-prob| = %.4f", name, worst)
	}
}
