package rollout

import (
	"context"
	"slices"

	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
)

// GenerateOnce runs one request through a one-slot Generator made for it and closed after:
// prompt, then at most maxNew tokens sampled as s says, stopping at the model's end-of-sequence
// ids and, when tok is given, at its chat end tokens. It is for one-off generations (the
// generate command, doctor's parity check), not for a loop: each call compiles the generator's
// programs again.
func GenerateOnce(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, prompt []int32, maxNew int, s Sampling) (Result, error) {
	truncate := s.TopK > 0 || s.TopP < 1
	gcfg := Config{Slots: 1, MaxLen: model.Bucket(len(prompt) + maxNew + 1), Truncation: truncate, TopKMax: max(64, s.TopK)}
	stops := slices.Clone(m.Config.EOSTokenIDs) // appended to below: not into the config
	if tok != nil {
		gcfg.Decode = func(ids []int32) string { return tok.Decode(ids, false) }
		for _, id := range tok.ChatStopIDs() {
			if int(id) < m.Config.VocabSize {
				stops = append(stops, id)
			}
		}
	}
	g, err := New(m, gcfg)
	if err != nil {
		return Result{}, err
	}
	defer g.Close()
	return g.Generate(ctx, Request{Append: prompt, MaxNew: maxNew, StopIDs: stops, Sampling: s})
}
