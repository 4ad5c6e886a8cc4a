package batch

import (
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
)

// Piece is a stretch of a trajectory's text; policy pieces are the model's own tokens.
type Piece struct {
	Text   string
	Policy bool
}

// TurnPieces lays a conversation out exactly as the rollout builds a trajectory (engine/play), and as SFT trains on it: the
// rendered opening with the generation prompt, then each assistant turn's content closed by
// <|im_end|> (policy), and each observation as a user turn followed by a new generation prompt
// (a tool turn is the user turn wrapping its text in <tool_response>, as the template renders it).
// (The chat template would add an empty <think> block to a final assistant turn; rollouts never
// produce one.)
func TurnPieces(conv []envs.Message) ([]Piece, error) {
	opening, err := tokenizer.RenderChat(conv[:2], nil, true)
	if err != nil {
		return nil, err
	}
	pieces := []Piece{{opening, false}}
	for _, m := range conv[2:] {
		if m.Role == "assistant" {
			pieces = append(pieces, Piece{m.Content + "<|im_end|>", true})
		} else {
			pieces = append(pieces, Piece{tokenizer.ObservationTurn(m), false})
		}
	}
	return pieces, nil
}

// MaskAssistant tokenizes a conversation piece by piece and marks the assistant's own tokens
// (its content and the closing <|im_end|>) as trained.
func MaskAssistant(tok *tokenizer.Tokenizer, conv []envs.Message) (train.Sequence, bool) {
	pieces, err := TurnPieces(conv)
	if err != nil {
		return train.Sequence{}, false
	}
	var s train.Sequence
	for _, p := range pieces {
		ids := tok.Encode(p.Text)
		s.Tokens = append(s.Tokens, ids...)
		for range ids {
			s.LossMask = append(s.LossMask, p.Policy)
		}
	}
	return s, true
}
