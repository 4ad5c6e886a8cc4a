package torchref

import (
	"context"
	_ "embed"

	"agentrl/engine/model"
	"agentrl/engine/rollout"
)

//go:embed generate.py
var generateScript string

// GenerateResult is what transformers' generate measured.
type GenerateResult struct {
	Tokens       int     `json:"tokens"`
	WallSeconds  float64 `json:"wall_s"`
	TokensPerSec float64 `json:"tokens_per_s"`
	Torch        string  `json:"torch"`
	Device       string  `json:"device"`
}

// Generate runs transformers' generate on a random model of the same shape, batch (slots) and
// lengths as bc, with python (a python3 that has torch, transformers and CUDA). It is the
// reference `bench rollout` compares with on a GPU; cpu.py (Run) is the one on the CPU.
func Generate(ctx context.Context, python string, c *model.Config, dtype string, bc rollout.BenchConfig) (*GenerateResult, error) {
	spec := map[string]any{
		"model_type": string(c.Family), "vocab_size": c.VocabSize, "hidden_size": c.HiddenSize,
		"intermediate_size": c.IntermediateSize, "num_hidden_layers": c.NumLayers,
		"num_attention_heads": c.NumHeads, "num_key_value_heads": c.NumKVHeads, "head_dim": c.HeadDim,
		"tie_word_embeddings": c.TieWordEmbeddings, "dtype": dtype,
		"slots": bc.Gen.Slots, "sequences": bc.Sequences, "prompt_len": bc.PromptLen, "new_tokens": bc.NewTokens,
	}
	var r GenerateResult
	if err := runScript(ctx, python, generateScript, spec, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
