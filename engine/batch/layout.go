package batch

import (
	"fmt"
	"strings"

	"agentrl/engine/tokenizer"
	"agentrl/envs"
)

// Piece is a stretch of a trajectory's text; policy pieces are the model's own tokens.
type Piece struct {
	Text   string
	Policy bool
}

// TurnPieces lays a conversation out exactly as the rollout builds a trajectory (engine/play),
// and as SFT trains on it, in each of the trajectory formats (env.format), from the message list
// an episode leaves: the rendered opening (the system turn with tools, the problem, the
// generation prompt; a conversation that opens with the user's message, as the PRM's does, has no
// system turn); then each assistant message's content, its tool calls as the template
// renders them, and the closing <|im_end|> (policy), except the <interpreter> blocks inside its
// content (the retool format's observations, appended in the turn: "\n<interpreter>\n…
// \n</interpreter>\n", masked like the prompt); each observation as a user turn, and a run of
// tool messages as the one user turn of <tool_response>s the template makes of them, followed by
// a new generation prompt. (The chat template would add an empty <think> block to a final
// assistant turn without one; rollouts never produce one.)
func TurnPieces(conv []envs.Message, tools []tokenizer.Tool) ([]Piece, error) {
	open := 2 // the system message and the user's
	if len(conv) > 0 && conv[0].Role == "user" {
		open = 1 // no system message: a PRM's or judge's user turn, as it renders them
	}
	if len(conv) < open {
		return nil, fmt.Errorf("batch: a conversation of %d messages has no opening", len(conv))
	}
	opening, err := tokenizer.RenderChat(conv[:open], tools, true)
	if err != nil {
		return nil, err
	}
	pieces := []Piece{{opening, false}}
	for i := open; i < len(conv); i++ {
		m := conv[i]
		switch m.Role {
		case "assistant":
			calls, err := tokenizer.ToolCallText(m.Content, m.ToolCalls)
			if err != nil {
				return nil, err
			}
			pieces = append(pieces, assistantPieces(m.Content+calls+"<|im_end|>")...)
		case "tool":
			j := i
			for j+1 < len(conv) && conv[j+1].Role == "tool" {
				j++
			}
			pieces = append(pieces, Piece{tokenizer.ToolTurn(conv[i : j+1]), false})
			i = j
		default:
			pieces = append(pieces, Piece{tokenizer.ObservationTurn(m), false})
		}
	}
	return pieces, nil
}

// assistantPieces splits an assistant turn's text around its <interpreter> blocks, each taken
// with the newline before and after it when there is one (what the retool format appends after
// </code>); an unclosed block runs to the end.
func assistantPieces(text string) []Piece {
	var pieces []Piece
	for {
		i := strings.Index(text, "<interpreter>")
		if i < 0 {
			break
		}
		end := len(text)
		if j := strings.Index(text[i:], "</interpreter>"); j >= 0 {
			end = i + j + len("</interpreter>")
			if end < len(text) && text[end] == '\n' {
				end++
			}
		}
		if i > 0 && text[i-1] == '\n' {
			i--
		}
		if i > 0 {
			pieces = append(pieces, Piece{text[:i], true})
		}
		pieces = append(pieces, Piece{text[i:end], false})
		text = text[end:]
	}
	if text != "" {
		pieces = append(pieces, Piece{text, true})
	}
	return pieces
}

// MaskAssistant tokenizes a conversation piece by piece (TurnPieces, tools in the system turn)
// and marks the assistant's own tokens (its content outside <interpreter> blocks, its tool calls
// and the closing <|im_end|>) as trained: ids are the conversation's tokens, mask[i] whether
// ids[i] is trained (a sequence's loss mask, as a trajectory's Mask is). The error is
// TurnPieces': a conversation the chat template cannot render.
func MaskAssistant(tok *tokenizer.Tokenizer, conv []envs.Message, tools []tokenizer.Tool) (ids []int32, mask []bool, err error) {
	pieces, err := TurnPieces(conv, tools)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pieces {
		piece := tok.Encode(p.Text)
		ids = append(ids, piece...)
		for range piece {
			mask = append(mask, p.Policy)
		}
	}
	return ids, mask, nil
}
