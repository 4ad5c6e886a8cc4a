package play

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
)

// TestSFTMaskIsTemplateAndRLMask checks the loss mask of supervised fine-tuning token by token,
// for the conversation of each trajectory format in testdata/fixtures/formats.json (rendered by
// scripts/chat-fixture.py from the real Qwen3 template), with the real Qwen3 tokenizer:
//
//   - against the template: batch.MaskAssistant's tokens decode, one by one, to the template's
//     rendering of the whole conversation, and a token is trained exactly when it lies in an
//     assistant turn of that rendering (from after "<|im_start|>assistant\n" to its "<|im_end|>"
//     inclusive) and, in the retool format, outside the "\n<interpreter>\n…\n</interpreter>\n"
//     blocks — a mask derived from the rendered text alone, not from TurnPieces;
//   - against RL: the same conversation played through a rollout episode of the format (the
//     assistant's turns as the generator would return them, the observations from the sandbox)
//     leaves the same tokens with the same mask, which is what the RL trainer trains on
//     (engine/update.go). Where a turn was cut by a stop string (the generator stopped at </code>
//     or </tool_call>) the episode closes the turn with an <|im_end|> the policy did not sample,
//     masked, while SFT trains on the template's closing <|im_end|>: those tokens, and only those,
//     differ.
func TestSFTMaskIsTemplateAndRLMask(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := tok.TokenID("<|im_end|>")
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "formats.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Conversations []struct {
			Format   string           `json:"format"`
			Tools    []tokenizer.Tool `json:"tools"`
			Messages []envs.Message   `json:"messages"`
			Full     string           `json:"full"`
		} `json:"conversations"`
	}
	if err := json.Unmarshal(data, &fixture); err != nil {
		t.Fatal(err)
	}
	formats := map[string]bool{}
	for _, c := range fixture.Conversations {
		formats[c.Format] = true
		t.Run(c.Format, func(t *testing.T) {
			ids, mask, err := batch.MaskAssistant(tok, c.Messages, c.Tools)
			if err != nil {
				t.Fatal(err)
			}
			// The template's view: which bytes of the rendering are the assistant's own.
			full := strings.TrimSuffix(c.Full, "\n") // the template ends the last turn with a newline nothing generates
			own := make([]bool, len(full))
			for at := 0; ; {
				i := strings.Index(full[at:], "<|im_start|>assistant\n")
				if i < 0 {
					break
				}
				from := at + i + len("<|im_start|>assistant\n")
				to := from + strings.Index(full[from:], "<|im_end|>") + len("<|im_end|>")
				for k := from; k < to; k++ {
					own[k] = true
				}
				if c.Format == "retool" {
					turn := full[from:to]
					for off := 0; ; {
						j := strings.Index(turn[off:], "\n<interpreter>\n")
						if j < 0 {
							break
						}
						end := off + j + strings.Index(turn[off+j:], "\n</interpreter>\n") + len("\n</interpreter>\n")
						for k := from + off + j; k < from+end; k++ {
							own[k] = false
						}
						off = end
					}
				}
				at = to
			}
			pos, trained := 0, 0
			for i, id := range ids {
				piece := tok.Decode([]int32{id}, false)
				if !strings.HasPrefix(full[pos:], piece) {
					t.Fatalf("token %d (%d, %q) at byte %d: the rendering reads %q there", i, id, piece, pos, full[pos:min(len(full), pos+len(piece)+8)])
				}
				want := own[pos]
				for k := pos; k < pos+len(piece); k++ {
					if own[k] != want {
						t.Fatalf("token %d %q straddles the boundary of an assistant stretch at byte %d", i, piece, k)
					}
				}
				if mask[i] != want {
					t.Errorf("token %d %q at byte %d: trained %v; the template says %v", i, piece, pos, mask[i], want)
				}
				if want {
					trained++
				}
				pos += len(piece)
			}
			if pos != len(full) || trained == 0 {
				t.Fatalf("the tokens read %d of the rendering's %d bytes, %d trained", pos, len(full), trained)
			}

			// The RL view: the conversation played through an episode of the format.
			for _, cut := range []bool{false, true} {
				tr, cuts := playFixture(t, tok, imEnd, c.Format, c.Tools, c.Messages, cut)
				if !slices.Equal(tr.Tokens, ids) {
					t.Fatalf("cut %v: the episode's tokens\n%q\nMaskAssistant's\n%q", cut, tok.Decode(tr.Tokens, false), tok.Decode(ids, false))
				}
				var differ []int
				for i := range tr.Mask {
					if tr.Mask[i] != mask[i] {
						differ = append(differ, i)
					}
				}
				if !slices.Equal(differ, cuts) {
					t.Errorf("cut %v: the masks differ at tokens %v; want %v (the <|im_end|> closing turns cut by a stop string)", cut, differ, cuts)
				}
				t.Logf("%s, stop strings %v: %d tokens, %d trained by SFT; RL's mask differs at %v", c.Format, cut, len(ids), trained, differ)
			}
		})
	}
	if len(formats) != 3 {
		t.Errorf("formats %v; want chat, retool and tool_call", formats)
	}
}

// playFixture plays a fixture conversation through a rollout episode of its format: each
// assistant turn (in retool, each stretch of the one turn up to its observation) as the
// generator returns it. With cut, a turn followed by an observation ends at its stop string
// without <|im_end|> (the episode closes it); otherwise every turn samples its own <|im_end|>.
// cuts are the positions of the closing tokens the episode added.
func playFixture(t *testing.T, tok *tokenizer.Tokenizer, imEnd int32, format string, tools []tokenizer.Tool, msgs []envs.Message, cut bool) (*batch.Trajectory, []int) {
	t.Helper()
	r := recipes.Default()
	r.Env.Format, r.Env.Observation.Format, r.Env.Session = format, retool.FormatInterpreter, "persistent"
	r.Env.SystemPrompt = msgs[0].Content
	if tools != nil {
		js, _ := json.Marshal(tools)
		r.Env.Tools = string(js)
	}
	r.Rollout.MaxTotalTokens = 4096
	p := &Phase{Recipe: r, Tokenizer: tok, Exec: &sandbox.Starlark{}, Weights: retool.Weights{Outcome: 1, FormatPenalty: 0.1}, Stops: []int32{imEnd}}
	tr := &batch.Trajectory{Task: envs.Task{ID: "t", Prompt: msgs[1].Content, Answer: "42"}}
	ctx := context.Background()
	ep, err := p.newEpisode(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.env.Close()
	var turns []string
	for _, m := range msgs[2:] {
		if m.Role != "assistant" {
			continue
		}
		calls, err := tokenizer.ToolCallText(m.Content, m.ToolCalls)
		if err != nil {
			t.Fatal(err)
		}
		text := m.Content + calls
		if format != "retool" {
			turns = append(turns, text)
			continue
		}
		for {
			i := strings.Index(text, "\n<interpreter>\n")
			if i < 0 {
				turns = append(turns, text)
				break
			}
			turns = append(turns, text[:i])
			j := strings.Index(text, "\n</interpreter>\n")
			text = text[j+len("\n</interpreter>\n"):]
		}
	}
	var cuts []int
	for i, text := range turns {
		last := i == len(turns)-1
		ids := tok.Encode(text)
		stop := rollout.StopString
		if last || (!cut && format != "retool") {
			ids, stop = append(ids, imEnd), rollout.StopToken
		}
		ep.add(ids, true, make([]float32, len(ids)))
		closing := len(tr.Tokens) // where the episode closes a turn cut by a stop string
		_, done, err := ep.turn(ctx, i+1, rollout.Result{IDs: ids, Stop: stop})
		if err != nil {
			t.Fatal(err)
		}
		if done != last {
			t.Fatalf("turn %d of %d: done %v (reward %+v)", i+1, len(turns), done, tr.Reward)
		}
		if stop == rollout.StopString && format != "retool" {
			cuts = append(cuts, closing)
		}
	}
	if tr.Drift != "" {
		t.Errorf("token drift: %s", tr.Drift)
	}
	return tr, cuts
}
