package engine

import (
	"context"

	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
)

// GenerateOnce runs one request through a one-slot rollout engine: prompt, then at most maxNew
// tokens sampled as s says, stopping at the model's end-of-sequence ids and, when tok is given,
// at its chat end tokens.
func GenerateOnce(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, prompt []int32, maxNew int, s rollout.Sampling) (rollout.Result, error) {
	truncate := s.TopK > 0 || s.TopP < 1
	gcfg := rollout.Config{Slots: 1, MaxLen: model.Bucket(len(prompt) + maxNew + 1), Truncation: truncate, TopKMax: max(64, s.TopK)}
	stops := m.Config.EOSTokenIDs
	if tok != nil {
		gcfg.Decode = func(ids []int32) string { return tok.Decode(ids, false) }
		for _, name := range []string{"<|im_end|>", "<|endoftext|>"} {
			if id, ok := tok.TokenID(name); ok && int(id) < m.Config.VocabSize {
				stops = append(stops, id)
			}
		}
	}
	g, err := rollout.New(m, gcfg)
	if err != nil {
		return rollout.Result{}, err
	}
	defer g.Close()
	return g.Generate(ctx, rollout.Request{Append: prompt, MaxNew: maxNew, StopIDs: stops, Sampling: s})
}
