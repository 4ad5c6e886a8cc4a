package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"agentrl/envs"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

var fixtureDir = filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer")

type goldenFile struct {
	Encodings []struct {
		Text    string   `json:"text"`
		IDs     []int32  `json:"ids"`
		Tokens  []string `json:"tokens"`
		Decoded string   `json:"decoded"`
	} `json:"encodings"`
	Chat []struct {
		Messages            []envs.Message `json:"messages"`
		Tools               []Tool         `json:"tools"`
		AddGenerationPrompt bool           `json:"add_generation_prompt"`
		Text                string         `json:"text"`
		IDs                 []int32        `json:"ids"`
	} `json:"chat"`
}

var (
	loadOnce sync.Once
	qwen     *Tokenizer
	loadErr  error
)

func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	loadOnce.Do(func() { qwen, loadErr = Load(fixtureDir) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return qwen
}

func readGolden(t testing.TB) goldenFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGoldenEncodings: all 17 HF encodings — ids, token strings and decoded text — exactly.
func TestGoldenEncodings(t *testing.T) {
	tok := qwen3(t)
	g := readGolden(t)
	if len(g.Encodings) != 17 {
		t.Fatalf("golden has %d encodings; want 17", len(g.Encodings))
	}
	for i, e := range g.Encodings {
		ids := tok.Encode(e.Text)
		if !slices.Equal(ids, e.IDs) {
			t.Errorf("%d %q:\n got ids %v\nwant ids %v", i, e.Text, ids, e.IDs)
			continue
		}
		if got := tok.Tokens(ids); !slices.Equal(got, e.Tokens) {
			t.Errorf("%d %q: tokens %q; want %q", i, e.Text, got, e.Tokens)
		}
		if got := tok.Decode(ids, false); got != e.Decoded {
			t.Errorf("%d: decoded %q; want %q", i, got, e.Decoded)
		}
	}
}

// TestGoldenChat: the 3 chat renderings byte-identical to transformers', and their ids.
func TestGoldenChat(t *testing.T) {
	tok := qwen3(t)
	g := readGolden(t)
	if len(g.Chat) != 3 {
		t.Fatalf("golden has %d chat cases; want 3", len(g.Chat))
	}
	for i, c := range g.Chat {
		text, err := RenderChat(c.Messages, c.Tools, c.AddGenerationPrompt)
		if err != nil {
			t.Fatal(err)
		}
		if text != c.Text {
			t.Errorf("chat %d:\n got %q\nwant %q", i, text, c.Text)
			continue
		}
		if ids := tok.Encode(text); !slices.Equal(ids, c.IDs) {
			t.Errorf("chat %d: ids %v; want %v", i, ids, c.IDs)
		}
	}
}

func TestChatRendering(t *testing.T) {
	reasoning := "think hard"
	for _, tc := range []struct {
		name string
		msgs []envs.Message
		gen  bool
		want string
	}{
		{"user only with prompt", []envs.Message{{Role: "user", Content: "hi"}}, true,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
		{"final assistant after query gets a think block", []envs.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}, false,
			"<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\na<|im_end|>\n"},
		{"inline think split out", []envs.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "<think>\nhmm\n</think>\n\nok"}}, false,
			"<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nok<|im_end|>\n"},
		{"reasoning_content field", []envs.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "ok", ReasoningContent: &reasoning}}, false,
			"<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nthink hard\n</think>\n\nok<|im_end|>\n"},
		{"consecutive tool messages share one user turn", []envs.Message{{Role: "user", Content: "q"},
			{Role: "assistant", Content: "run", ToolCalls: []envs.ToolCall{{Name: "python", Arguments: json.RawMessage(`{"code":"1"}`)}, {Name: "python", Arguments: json.RawMessage(`"{\"code\": \"2\"}"`)}}},
			{Role: "tool", Content: "1"}, {Role: "tool", Content: "2"}}, false,
			"<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nrun\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"1\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"2\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response><|im_end|>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderChat(tc.msgs, nil, tc.gen)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	if _, err := RenderChat([]envs.Message{{Role: "robot", Content: "x"}}, nil, false); err == nil || !strings.Contains(err.Error(), `role "robot"`) {
		t.Errorf("bad role: got %v", err)
	}
	if _, err := RenderChat(nil, nil, true); err == nil {
		t.Error("no messages accepted")
	}
}

func TestPyJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"b":1,"a":[true,null,"x"]}`, `{"b": 1, "a": [true, null, "x"]}`},
		{`{"s":"<a&b> é \u2028 \n \u0001"}`, "{\"s\": \"<a&b> é \u2028 \\n \\u0001\"}"},
		{`1.50`, `1.50`},
	} {
		got, err := pyJSON(json.RawMessage(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("pyJSON(%s) = %s; want %s", tc.in, got, tc.want)
		}
	}
	if _, err := pyJSON(json.RawMessage(`{"a":`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("empty folder: got %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing file: got %v", err)
	}
	bad := filepath.Join(dir, "tokenizer.json")
	os.WriteFile(bad, []byte(`{"model":{"type":"Unigram"}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "Unigram") || !strings.Contains(err.Error(), bad) {
		t.Errorf("unigram: got %v", err)
	}
	os.WriteFile(bad, []byte(`{`), 0o644)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("corrupt: got %v", err)
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := qwen3(t)
	g := readGolden(t)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < 20; r++ {
				for _, e := range g.Encodings {
					if ids := tok.Encode(e.Text); !slices.Equal(ids, e.IDs) {
						t.Errorf("concurrent encode of %q differs", e.Text)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzRoundTrip(f *testing.F) {
	tok := qwen3(f)
	for _, e := range readGolden(f).Encodings {
		f.Add(e.Text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		want := norm.NFC.String(s)
		if got := tok.Decode(tok.Encode(s), false); got != want {
			t.Fatalf("decode(encode(%q)) = %q; want %q", s, got, want)
		}
	})
}

// benchText is ~100 KB of mixed English, code, math and CJK.
func benchText() string {
	parts := []string{
		"The quick brown fox jumps over the lazy dog while computing 37*49+12 mod 1000. ",
		"def f(a, b):\n    return sum(i**2 for i in range(a, b)) % 1000\n",
		"x = 12345678901234567890; y = 3.14159e-9; \\boxed{825}\n",
		"中文字符 日本語のテキスト 한국어 — “quotes” and émojis 🚀\n",
		"<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(1)\"}}\n</tool_call>\n",
	}
	var b strings.Builder
	for i := 0; b.Len() < 100_000; i++ {
		b.WriteString(parts[i%len(parts)])
		b.WriteString(strings.Repeat("z", i%7)) // vary words so the cache does not see only repeats
		b.WriteByte(' ')
	}
	return b.String()
}

// BenchmarkEncode reports MB/s of Encode on mixed text; BenchmarkEncodeRegexOnly runs only the
// pre-tokenizer regex over the same text, the floor Encode is compared with.
func BenchmarkEncode(b *testing.B) {
	tok := qwen3(b)
	text := benchText()
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		tok.Encode(text)
	}
}

func BenchmarkPreTokenize(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		splitQwen(text, func(string) {})
	}
}

// BenchmarkPreTokenizeRegexp2 is the same split with the regex engine, for the ratio.
func BenchmarkPreTokenizeRegexp2(b *testing.B) {
	re := regexp2.MustCompile(qwenPattern, regexp2.Unicode)
	text := benchText()
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		m, _ := re.FindStringMatch(text)
		for m != nil {
			m, _ = re.FindNextMatch(m)
		}
	}
}

// regexSplit is the reference: the pattern run by regexp2.
func regexSplit(t testing.TB, s string) []string {
	re := regexp2.MustCompile(qwenPattern, regexp2.Unicode)
	var out []string
	m, err := re.FindStringMatch(s)
	for m != nil && err == nil {
		out = append(out, m.String())
		m, err = re.FindNextMatch(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scanSplit(s string) []string {
	var out []string
	splitQwen(s, func(w string) { out = append(out, w) })
	return out
}

func TestSplitQwenMatchesRegex(t *testing.T) {
	cases := []string{"", " ", "  x", "a  \n\n b", "x \t\n", "it's I'LL 'Re", "a'", "12ab", "¿Qué?", "  \u00a0x", "x\r\n\r\ny", "!!\n\n", " !", "\u3000日本", "a\u2028b", "e\u0301"}
	for _, e := range readGolden(t).Encodings {
		cases = append(cases, e.Text)
	}
	cases = append(cases, benchText()[:5000])
	for _, c := range cases {
		if got, want := scanSplit(c), regexSplit(t, c); !slices.Equal(got, want) {
			t.Errorf("split(%q):\n got %q\nwant %q", c, got, want)
		}
	}
}

func FuzzSplitQwen(f *testing.F) {
	for _, e := range readGolden(f).Encodings {
		f.Add(e.Text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got, want := scanSplit(s), regexSplit(t, s); !slices.Equal(got, want) {
			t.Fatalf("split(%q):\n got %q\nwant %q", s, got, want)
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Load(fixtureDir); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTrainRoundTrip trains a small BPE on chat-formatted text, loads the written tokenizer.json
// with this package's loader, and checks round trips, special tokens and determinism.
func TestTrainRoundTrip(t *testing.T) {
	var texts []string
	for i := 0; i < 200; i++ {
		msgs := []envs.Message{{Role: "user", Content: "What is " + strings.Repeat("12", i%4+1) + " * 7 mod 97?"},
			{Role: "assistant", Content: "<code>\nprint((12 * 7) % 97)\n</code>"}}
		text, _ := RenderChat(msgs, nil, false)
		texts = append(texts, text)
	}
	doc, err := Train(texts, 400, ChatSpecials())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Train(texts, 400, ChatSpecials())
	if string(doc) != string(again) {
		t.Error("training is not deterministic")
	}
	tok, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() > 400 {
		t.Errorf("vocab %d > 400", tok.VocabSize())
	}
	for _, s := range append(texts[:3], "unseen ü text 🚀 <|im_end|>", "") {
		ids := tok.Encode(s)
		if got := tok.Decode(ids, false); got != s {
			t.Errorf("round trip %q → %q", s, got)
		}
	}
	if id, ok := tok.TokenID("<|im_end|>"); !ok || !tok.IsSpecial(id) {
		t.Error("<|im_end|> is not a special token")
	}
	if n := len(tok.Encode(texts[0])); n >= len(texts[0])/2 {
		t.Errorf("%d tokens for %d bytes: the merges do not compress", n, len(texts[0]))
	}
	if _, err := Train(texts, 100, ChatSpecials()); err == nil {
		t.Error("vocab 100 accepted")
	}
}

// TestStripSpecial: the text of Qwen3's special tokens leaves a string, other added tokens
// (<think>, <tool_call>) and ordinary text stay, and what is left encodes without a special id.
func TestStripSpecial(t *testing.T) {
	tok := qwen3(t)
	for _, tc := range []struct{ in, want string }{
		{"the final answer was 861<|im_start|>1986", "the final answer was 8611986"},
		{"a<|im_end|>\n<|im_start|>assistant\nb<|endoftext|>", "a\nassistant\nb"},
		{"keep <think> and <tool_call> and <|not_a_token|>", "keep <think> and <tool_call> and <|not_a_token|>"},
		{"<|im_start|><|im_start|>", ""},
		{"", ""},
	} {
		got := tok.StripSpecial(tc.in)
		if got != tc.want {
			t.Errorf("StripSpecial(%q) = %q, want %q", tc.in, got, tc.want)
		}
		for _, id := range tok.Encode(got) {
			if id == 151643 || id == 151644 || id == 151645 { // <|endoftext|>, <|im_start|>, <|im_end|>
				t.Errorf("StripSpecial(%q) = %q still encodes special id %d", tc.in, got, id)
			}
		}
	}
}

// TestChatStopIDs: Qwen3's chat end tokens are <|im_end|> (151645) and <|endoftext|> (151643),
// the ids its tokenizer.json gives them, in that order.
func TestChatStopIDs(t *testing.T) {
	if got := qwen3(t).ChatStopIDs(); !slices.Equal(got, []int32{151645, 151643}) {
		t.Errorf("ChatStopIDs = %v; want [151645 151643]", got)
	}
}
