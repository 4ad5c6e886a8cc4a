package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/envs/retool"
)

// TestGeneratePromptChat: --prompt asks the question as a ReTool rollout does (system prompt, the
// user's message, the assistant's turn opened, through the chat template) and prints the generated
// text; --raw feeds the text tokenized as it is, as --prompt did before.
func TestGeneratePromptChat(t *testing.T) {
	builtin := filepath.Join("..", model.BuiltinSourceDir)
	tok, err := tokenizer.Load(builtin)
	if err != nil {
		t.Fatal(err)
	}
	const q = "What is 77 + 87?"
	chat, err := promptIDs(tok, q, false)
	if err != nil {
		t.Fatal(err)
	}
	text := tok.Decode(chat, false)
	want := "<|im_start|>system\n" + retool.SystemFor("interpreter") + "<|im_end|>\n<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"
	if !strings.HasPrefix(text, "<|im_start|>system\n") || !strings.Contains(text, want) {
		t.Errorf("the chat prompt decodes to %q; want %q", text, want)
	}
	raw, err := promptIDs(tok, q, true)
	if err != nil || !slices.Equal(raw, tok.Encode(q)) {
		t.Errorf("--raw ids %v (%v); want the text tokenized as it is, %v", raw, err, tok.Encode(q))
	}

	out, err := runCmd(t, "generate", "--model", builtin, "--prompt", q, "--max-new", "24", "--backend", "go")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if strings.Contains(out, "new ids:") || !strings.HasPrefix(lines[len(lines)-1], "stop: ") || strings.TrimSpace(strings.Join(lines[:len(lines)-1], "\n")) == "" {
		t.Errorf("generate --prompt printed no text, or ids:\n%s", out)
	}

	// --raw is the old --prompt: the same request as --ids with the text's own tokens.
	rawOut, err := runCmd(t, "generate", "--model", builtin, "--prompt", q, "--raw", "--max-new", "8", "--backend", "go", "--json")
	if err != nil {
		t.Fatal(err)
	}
	idsOut, err := runCmd(t, "generate", "--model", builtin, "--ids", idsArg(tok.Encode(q)), "--max-new", "8", "--backend", "go", "--json")
	if err != nil || rawOut != idsOut {
		t.Errorf("generate --raw --json:\n%s\nwant what --ids of the text's tokens gives (%v):\n%s", rawOut, err, idsOut)
	}
	// Without --model: the built-in model, as run, eval and serve use.
	if own, err := runCmd(t, "generate", "--prompt", q, "--raw", "--max-new", "8", "--backend", "go", "--json"); err != nil || own != rawOut {
		t.Errorf("generate without --model:\n%s\nwant the built-in model's (%v):\n%s", own, err, rawOut)
	}
	if _, err := runCmd(t, "generate", "--model", builtin, "--ids", "1,2", "--raw"); err == nil || !strings.Contains(err.Error(), "--raw goes with --prompt") {
		t.Errorf("--raw with --ids: %v", err)
	}
}
