package engine

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/recipes"
)

// TestSFTWritesLoadableModel runs a very small SFT and checks that its folder loads as a model and
// a tokenizer, and that the demonstrations' assistant tokens are the only trained ones.
func TestSFTWritesLoadableModel(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	backend, _ := device.NewGo(device.GoConfig)
	out := filepath.Join(t.TempDir(), "builtin")
	if err := SFT(context.Background(), SFTOptions{Recipe: r, Backend: backend, Out: out, Examples: 40, Vocab: 300, Hidden: 32, Layers: 1, Steps: 3, Batch: 2}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(backend, out, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.VocabSize != tok.VocabSize() {
		t.Errorf("model vocab %d, tokenizer %d", m.Config.VocabSize, tok.VocabSize())
	}
	conv := []tokenizer.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "What is 2 + 2?"},
		{Role: "assistant", Content: "<code>\nprint(2 + 2)\n</code>"}, {Role: "user", Content: "<interpreter>\n4\n</interpreter>"},
		{Role: "assistant", Content: `\boxed{4}`}}
	s, _ := maskAssistant(tok, conv)
	var trained []int32
	for i, id := range s.Tokens {
		if s.LossMask[i] {
			trained = append(trained, id)
		}
	}
	if got := tok.Decode(trained, false); got != "<code>\nprint(2 + 2)\n</code><|im_end|>\\boxed{4}<|im_end|>" {
		t.Errorf("trained text %q", got)
	}
	if got := tok.Decode(s.Tokens, false); got[len(got)-len(`\boxed{4}<|im_end|>`):] != `\boxed{4}<|im_end|>` {
		t.Errorf("sequence ends %q", got)
	}
}

// TestSFTHintedDemonstrations: with --hint-share 1 every demonstration's user message carries the
// rules hint for a flawed attempt, where the controller puts hints, and the log says how many.
func TestSFTHintedDemonstrations(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	backend, _ := device.NewGo(device.GoConfig)
	var log strings.Builder
	out := filepath.Join(t.TempDir(), "hinted")
	if err := SFT(context.Background(), SFTOptions{Recipe: r, Backend: backend, Out: out, Examples: 20, Vocab: 300, Hidden: 32,
		Layers: 1, Steps: 1, Batch: 2, HintShare: 1, Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "20 demonstrations (20 with a bridge thought)") {
		t.Errorf("log:\n%s", log.String())
	}
}

// TestSFTRejectsHintShare: a share outside [0, 1] is refused with the flag's name and range,
// before any demonstration is built.
func TestSFTRejectsHintShare(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	backend, _ := device.NewGo(device.GoConfig)
	for _, share := range []float64{-0.5, 1.5, math.NaN()} {
		err := SFT(context.Background(), SFTOptions{Recipe: r, Backend: backend, Out: t.TempDir(), HintShare: share})
		if err == nil || !strings.Contains(err.Error(), "--hint-share") || !strings.Contains(err.Error(), "want 0 (none) to 1 (all)") {
			t.Errorf("hint share %v: %v", share, err)
		}
	}
}
