package batch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"agentrl/engine/tokenizer"
	"agentrl/envs"
)

// formatsFixture is testdata/fixtures/formats.json (scripts/chat-fixture.py --write): one
// conversation per trajectory format and what the real Qwen3 chat template, rendered as
// transformers renders it, makes of it.
type formatsFixture struct {
	Conversations []struct {
		Format   string           `json:"format"`
		Tools    []tokenizer.Tool `json:"tools"`
		Messages []envs.Message   `json:"messages"`
		Contexts []struct {
			Messages int    `json:"messages"`
			Text     string `json:"text"`
		} `json:"contexts"`
		Full string `json:"full"`
	} `json:"conversations"`
}

func readFormats(t *testing.T) formatsFixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", "formats.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f formatsFixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Conversations) != 3 {
		t.Fatalf("got %d conversations; want one per format", len(f.Conversations))
	}
	return f
}

func join(ps []Piece) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text)
	}
	return b.String()
}

// The layout of each format reads, at every point the model generates from and as a whole,
// exactly as the HF chat template renders the same messages.
func TestTurnPiecesMatchTemplate(t *testing.T) {
	for _, c := range readFormats(t).Conversations {
		t.Run(c.Format, func(t *testing.T) {
			for _, ctx := range c.Contexts {
				ps, err := TurnPieces(c.Messages[:ctx.Messages], c.Tools)
				if err != nil {
					t.Fatal(err)
				}
				if got := join(ps); got != ctx.Text {
					t.Errorf("after %d messages the layout reads\n%q\nthe template renders\n%q", ctx.Messages, got, ctx.Text)
				}
				if got, err := tokenizer.RenderChat(c.Messages[:ctx.Messages], c.Tools, true); err != nil || got != ctx.Text {
					t.Errorf("RenderChat after %d messages: %v\n%q\nwant\n%q", ctx.Messages, err, got, ctx.Text)
				}
			}
			ps, err := TurnPieces(c.Messages, c.Tools)
			if err != nil {
				t.Fatal(err)
			}
			if got := join(ps) + "\n"; got != c.Full {
				t.Errorf("the whole conversation reads\n%q\nthe template renders\n%q", got, c.Full)
			}
			// Trained: exactly the assistant's own text; the retool format's <interpreter>
			// blocks are masked as the prompt is.
			var masked []string
			for _, p := range ps[1:] {
				if !p.Policy {
					masked = append(masked, p.Text)
				}
			}
			var want []string
			switch c.Format {
			case "chat":
				want = []string{"\n<|im_start|>user\n<interpreter>\n42\n</interpreter><|im_end|>\n<|im_start|>assistant\n"}
			case "retool":
				want = []string{"\n<interpreter>\n42\n</interpreter>\n", "\n<interpreter>\nTrue\n</interpreter>\n"}
			case "tool_call":
				want = []string{
					"\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
					"\n<|im_start|>user\n<tool_response>\nTrue\n</tool_response><|im_end|>\n<|im_start|>assistant\n"}
			}
			if !reflect.DeepEqual(masked, want) {
				t.Errorf("masked pieces %q; want %q", masked, want)
			}
		})
	}
}

func TestAssistantPieces(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []Piece
	}{
		{"no block", "hi<|im_end|>", []Piece{{"hi<|im_end|>", true}}},
		{"retool spacing", "<code>x</code>\n<interpreter>\n1\n</interpreter>\n\nso<|im_end|>",
			[]Piece{{"<code>x</code>", true}, {"\n<interpreter>\n1\n</interpreter>\n", false}, {"\nso<|im_end|>", true}}},
		{"no newlines around", "a<interpreter>1</interpreter>b", []Piece{{"a", true}, {"<interpreter>1</interpreter>", false}, {"b", true}}},
		{"block first", "<interpreter>\n1\n</interpreter>\nb", []Piece{{"<interpreter>\n1\n</interpreter>\n", false}, {"b", true}}},
		{"unclosed", "a\n<interpreter>\n1", []Piece{{"a", true}, {"\n<interpreter>\n1", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := assistantPieces(tc.text); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v; want %+v", got, tc.want)
			}
		})
	}
}

// MaskAssistant with the real Qwen3 tokenizer: the untrained tokens of a ReTool conversation
// decode to the opening and its <interpreter> blocks, and the rest to the assistant's own text.
func TestMaskAssistantReTool(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	c := readFormats(t).Conversations[1]
	ids, mask, err := MaskAssistant(tok, c.Messages, c.Tools)
	if err != nil {
		t.Fatalf("not laid out: %v", err)
	}
	var masked, trained []int32
	for i, id := range ids {
		if mask[i] {
			trained = append(trained, id)
		} else {
			masked = append(masked, id)
		}
	}
	opening := c.Contexts[0].Text
	if got, want := tok.Decode(masked, false), opening+"\n<interpreter>\n42\n</interpreter>\n\n<interpreter>\nTrue\n</interpreter>\n"; got != want {
		t.Errorf("masked tokens read %q; want %q", got, want)
	}
	if got := tok.Decode(trained, false); !strings.HasSuffix(got, "Answer: \\boxed{42}<|im_end|>") || strings.Contains(got, "<interpreter>") {
		t.Errorf("trained tokens read %q", got)
	}
}

// The ReTool-SFT sample conversations, in ReTool's own inline layout and as verl converts them to
// tool calls (testdata/data/retool-sft*.jsonl), lay out with the real Qwen3 tokenizer so that
// every interpreter output or tool response, and every piece of chat markup between turns, is
// masked, and everything the assistant wrote is trained on: the same mask SFT and the RL trainer
// use for such a conversation.
func TestMaskAssistantSFTSamples(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	tools := []tokenizer.Tool{}
	if err := json.Unmarshal([]byte(`[{"type": "function", "function": {"name": "code_interpreter", "description": "Runs Python.", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}]`), &tools); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file     string
		tools    []tokenizer.Tool
		observed string // what every observation is wrapped in, masked
	}{
		{"retool-sft.jsonl", nil, "<interpreter>"},
		{"retool-sft-toolcalls.jsonl", tools, "<tool_response>"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "data", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d conversations; want the 3 samples", len(lines))
			}
			for i, line := range lines {
				var row struct {
					Messages []envs.Message `json:"messages"`
				}
				if err := json.Unmarshal([]byte(line), &row); err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				conv := append([]envs.Message{{Role: "system", Content: "You are a helpful assistant."}}, row.Messages...)
				ids, mask, err := MaskAssistant(tok, conv, tc.tools)
				if err != nil {
					t.Fatalf("line %d: not laid out: %v", i+1, err)
				}
				var trained, masked []int32
				for j, id := range ids {
					if mask[j] {
						trained = append(trained, id)
					} else {
						masked = append(masked, id)
					}
				}
				tr, ma := tok.Decode(trained, false), tok.Decode(masked, false)
				var outputs []string // the observations' text, each must be masked and none trained
				for _, m := range conv {
					switch {
					case m.Role == "tool":
						outputs = append(outputs, m.Content)
					case m.Role == "assistant" && tc.tools == nil:
						for _, part := range strings.Split(m.Content, "<interpreter>\n")[1:] {
							outputs = append(outputs, part[:strings.Index(part, "\n</interpreter>")])
						}
					}
				}
				if len(outputs) == 0 {
					t.Fatalf("line %d: no observations in the sample", i+1)
				}
				for _, o := range outputs {
					if !strings.Contains(ma, tc.observed+"\n"+o+"\n") || strings.Contains(tr, o+"\n</") {
						t.Errorf("line %d: observation %q is not masked (masked %q)", i+1, o, ma)
					}
				}
				if strings.Contains(tr, tc.observed) || !strings.HasSuffix(tr, "Answer: \\boxed{"+answerOf(conv)+"}\n</answer><|im_end|>") {
					t.Errorf("line %d: trained text %q", i+1, tr)
				}
				if tc.tools != nil && strings.Count(tr, "<tool_call>") != len(outputs) {
					t.Errorf("line %d: %d tool calls trained; want %d", i+1, strings.Count(tr, "<tool_call>"), len(outputs))
				}
			}
		})
	}
}

// answerOf is the boxed answer of a conversation's last message.
func answerOf(conv []envs.Message) string {
	last := conv[len(conv)-1].Content
	i := strings.LastIndex(last, `\boxed{`)
	return last[i+len(`\boxed{`) : i+strings.Index(last[i:], "}")]
}
