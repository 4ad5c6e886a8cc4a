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
	spec := struct {
		model.Config
		DType     string `json:"dtype"`
		Slots     int    `json:"slots"`
		Sequences int    `json:"sequences"`
		PromptLen int    `json:"prompt_len"`
		NewTokens int    `json:"new_tokens"`
	}{*c, dtype, bc.Gen.Slots, bc.Sequences, bc.PromptLen, bc.NewTokens}
	var r GenerateResult
	if err := runScript(ctx, python, generateScript, spec, &r, ""); err != nil {
		return nil, err
	}
	return &r, nil
}
