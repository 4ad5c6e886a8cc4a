package hint

import (
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/recipes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRulesHintsAreWhole renders every rules hint with the built-in tokenizer and with Qwen3's and
// checks that, at both ReTool recipes' hinter.max_hint_tokens, the teacher gets the whole hint,
// ending in its instruction's full stop.
func TestRulesHintsAreWhole(t *testing.T) {
	toks := map[string]string{"built-in": filepath.Join("..", "..", model.BuiltinSourceDir), "qwen3": filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer")}
	for _, name := range []string{"retool.yaml", "retool-baseline.yaml"} {
		r, err := recipes.Load(filepath.Join("..", "..", "recipes", name), recipes.Options{IgnoreEnv: true})
		if err != nil {
			t.Fatal(err)
		}
		for tname, dir := range toks {
			tok, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			// A task whose reference program is as long as a hint names (48 characters, digits
			// that the built-in tokenizer spends a token each on).
			task := envs.Task{Meta: map[string]string{"code": "print(" + strings.Repeat("1234567 * ", 5)[:41] + ")"}}
			for _, s := range retool.RulesHintCases {
				for _, h := range []string{retool.RulesHint(s), retool.RulesHintFor(s, task)} {
					got, cut := wholeHint(tok, h, r.Hinter.MaxHintTokens)
					if h == "" || got != h || cut != "" || !strings.HasSuffix(got, ".") {
						t.Errorf("%s, %s tokenizer (%d tokens of %d): hint %q reaches the teacher as %q (%s)", name, tname,
							len(tok.Encode(h)), r.Hinter.MaxHintTokens, h, got, cut)
					}
				}
			}
		}
	}
}

// TestWholeHint: a hint over the budget loses whole trailing sentences, never part of one, and one
// whose first sentence does not fit is dropped.
func TestWholeHint(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	two := "Print the sum first. Then copy the printed number into the box."
	first := len(tok.Encode("Print the sum first."))
	for _, tc := range []struct {
		name, hint string
		n          int
		want, cut  string
	}{
		{"fits", two, 64, two, ""},
		{"second sentence left out", two, first, "Print the sum first.", Shortened},
		{"first sentence too long", two, first - 1, "", Dropped},
		{"no budget", two, 0, two, ""},
		{"empty", "", 8, "", ""},
	} {
		if got, cut := wholeHint(tok, tc.hint, tc.n); got != tc.want || cut != tc.cut {
			t.Errorf("%s: got %q (%q); want %q (%q)", tc.name, got, cut, tc.want, tc.cut)
		}
	}
}

// TestFitHintStripsSpecialTokens: a rules hint quoting an answer the policy wrote with a chat
// marker in it reaches the teacher as one user turn: the marker's text is gone before the hint
// is fitted and encoded.
func TestFitHintStripsSpecialTokens(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", model.BuiltinSourceDir))
	if err != nil {
		t.Fatal(err)
	}
	r := &recipes.Recipe{}
	r.Hinter.MaxHintTokens = 128
	h := &Hinting{cfg: Config{Tokenizer: tok, Recipe: r}}
	text := retool.RulesHint(envs.Summary{Answered: true, ToolCalls: 1, LastOutput: "86143986\n", Answer: "861<|im_start|>1986"})
	if !strings.Contains(text, "<|im_start|>") {
		t.Fatalf("the rules hint %q no longer quotes the answer; the test needs one that does", text)
	}
	got, cut := h.Fit(text)
	if want := strings.ReplaceAll(text, "<|im_start|>", ""); got != want || cut != "" {
		t.Errorf("Fit = %q (%q), want %q", got, cut, want)
	}
	imStart, _ := tok.TokenID("<|im_start|>")
	for _, id := range tok.Encode(got) {
		if id == imStart {
			t.Errorf("the fitted hint %q encodes <|im_start|>", got)
		}
	}
}
