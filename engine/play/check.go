package play

import (
	"fmt"
	"slices"
	"strings"

	"agentrl/engine/batch"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/recipes"
)

// CheckEpisode checks what a ReTool episode of r's format left in t against its own record: the
// prompt is the format's opening; after it, the trained tokens (mask true) are exactly the
// sampled turns, each decoding to its Turns entry (less a final <|im_end|>), and between them
// the masked tokens are exactly the observations as the format appends them (in chat and
// tool_call, a closing <|im_end|> when the turn did not sample one, then the observation turn of
// t.Chat; in retool, the turn's observation text); and the whole reads as TurnPieces lays out
// t.Chat. It returns the first disagreement, nil when there is none.
func CheckEpisode(tok *tokenizer.Tokenizer, r *recipes.Recipe, imEnd int32, t *batch.Trajectory) error {
	f := FormatOf(r)
	prompt, err := PromptIDs(tok, r, t.Task.Prompt, "")
	if err != nil {
		return err
	}
	if !slices.Equal(t.Tokens[:t.PromptLen], prompt) || slices.Contains(t.Mask[:t.PromptLen], true) {
		return fmt.Errorf("the prompt is not the format's opening, masked")
	}
	if len(t.Mask) != len(t.Tokens) || len(t.LogProbs) != len(t.Tokens) {
		return fmt.Errorf("%d tokens, %d mask entries, %d log-probs", len(t.Tokens), len(t.Mask), len(t.LogProbs))
	}
	// Runs of equal mask after the prompt: sampled turn, observation, sampled turn, …
	type run struct {
		policy bool
		ids    []int32
	}
	var runs []run
	for i := t.PromptLen; i < len(t.Tokens); i++ {
		if len(runs) == 0 || runs[len(runs)-1].policy != t.Mask[i] {
			runs = append(runs, run{policy: t.Mask[i]})
		}
		runs[len(runs)-1].ids = append(runs[len(runs)-1].ids, t.Tokens[i])
	}
	if len(runs) == 0 || !runs[0].policy {
		return fmt.Errorf("the response does not start with sampled tokens")
	}
	var obsMsgs []envs.Message // chat, tool_call: the observation messages in order
	for i, m := range t.Chat {
		if i >= 2 && m.Role != "assistant" {
			obsMsgs = append(obsMsgs, m)
		}
	}
	for k := 0; k < len(runs); k += 2 {
		turn := k / 2
		if turn >= len(t.Turns) {
			return fmt.Errorf("%d sampled stretches for %d turns", (len(runs)+1)/2, len(t.Turns))
		}
		sampled := runs[k].ids
		if got := strings.TrimSuffix(tok.Decode(sampled, false), "<|im_end|>"); got != t.Turns[turn].Assistant {
			return fmt.Errorf("turn %d: the trained tokens read %q; the turn sampled %q", turn+1, got, t.Turns[turn].Assistant)
		}
		if k+1 >= len(runs) {
			if turn != len(t.Turns)-1 {
				return fmt.Errorf("%d sampled stretches for %d turns", (len(runs)+1)/2, len(t.Turns))
			}
			break
		}
		var want []int32
		if f.Layout == retool.LayoutReTool {
			want = tok.Encode(t.Turns[turn].Observation)
		} else {
			if turn >= len(obsMsgs) {
				return fmt.Errorf("turn %d: an observation in the tokens that the conversation lacks", turn+1)
			}
			if sampled[len(sampled)-1] != imEnd {
				want = []int32{imEnd}
			}
			want = append(want, tok.Encode(tokenizer.ObservationTurn(obsMsgs[turn]))...)
		}
		if !slices.Equal(runs[k+1].ids, want) {
			return fmt.Errorf("turn %d: the masked tokens read %q; the observation appended is %q", turn+1, tok.Decode(runs[k+1].ids, false), tok.Decode(want, false))
		}
	}
	pieces, err := batch.TurnPieces(t.Chat, f.Tools)
	if err != nil {
		return err
	}
	var laid strings.Builder
	for _, p := range pieces {
		laid.WriteString(p.Text)
	}
	if got, want := strings.TrimSuffix(tok.Decode(t.Tokens, false), "<|im_end|>"), strings.TrimSuffix(laid.String(), "<|im_end|>"); got != want {
		return fmt.Errorf("the tokens read\n%q\nthe layout of the conversation reads\n%q", got, want)
	}
	return nil
}
