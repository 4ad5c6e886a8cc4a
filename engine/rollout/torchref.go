package rollout

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"agentrl/engine/model"
)

//go:embed torchref/generate.py
var torchGenerateScript string

// TorchResult is what the PyTorch reference measured.
type TorchResult struct {
	Tokens       int     `json:"tokens"`
	WallSeconds  float64 `json:"wall_s"`
	TokensPerSec float64 `json:"tokens_per_s"`
	Torch        string  `json:"torch"`
	Device       string  `json:"device"`
}

// TorchReference runs transformers' generate on a random model of the same shape, batch
// (slots) and lengths as bc, with python (a python3 that has torch, transformers and CUDA).
// It is the reference `bench rollout` compares with on a GPU.
func TorchReference(ctx context.Context, python string, c *model.Config, dtype string, bc BenchConfig) (*TorchResult, error) {
	spec, err := json.Marshal(map[string]any{
		"model_type": string(c.Family), "vocab_size": c.VocabSize, "hidden_size": c.HiddenSize,
		"intermediate_size": c.IntermediateSize, "num_hidden_layers": c.NumLayers,
		"num_attention_heads": c.NumHeads, "num_key_value_heads": c.NumKVHeads, "head_dim": c.HeadDim,
		"tie_word_embeddings": c.TieWordEmbeddings, "dtype": dtype,
		"slots": bc.Gen.Slots, "sequences": bc.Sequences, "prompt_len": bc.PromptLen, "new_tokens": bc.NewTokens,
	})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python, "-c", torchGenerateScript, string(spec))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		tail := errb.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return nil, fmt.Errorf("PyTorch reference (%s) failed: %w\n%s", python, err, tail)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r TorchResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return nil, fmt.Errorf("PyTorch reference printed %q: %w", out.String(), err)
	}
	return &r, nil
}
