package play

import (
	"path/filepath"
	"slices"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
)

// testTokenizer is the built-in model's tokenizer (as the engine's tests load it).
func testTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join("..", "..", model.BuiltinSourceDir))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAgentTeacherPrompt: the teacher reads an agent's own first prompt with the hint before the
// problem (retool.WithHint's place); a prompt without the problem's text takes no hint.
func TestAgentTeacherPrompt(t *testing.T) {
	tok := testTokenizer(t)
	p := &Phase{Tokenizer: tok}
	render := func(user string) []int32 {
		text, err := tokenizer.RenderChat([]envs.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: user}}, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		return tok.Encode(text)
	}
	task := envs.Task{ID: "t", Prompt: "What is 12 + 30?"}
	prompt := render("Task: " + task.Prompt)
	tr := &batch.Trajectory{Task: task, Tokens: append(slices.Clone(prompt), 5, 6), PromptLen: len(prompt), Agent: &AgentRun{}}
	ids, ok, err := p.TeacherPrompt(tr, "Add the numbers with code.")
	if err != nil || !ok {
		t.Fatalf("TeacherPrompt: %v, %v", ok, err)
	}
	if want := render("Task: " + retool.WithHint(task.Prompt, "Add the numbers with code.")); tok.Decode(ids, false) != tok.Decode(want, false) {
		t.Errorf("hinted prompt reads %q; want %q", tok.Decode(ids, false), tok.Decode(want, false))
	}
	if ids, ok, _ := p.TeacherPrompt(tr, ""); !ok || !slices.Equal(ids, prompt) {
		t.Errorf("the prompt without a hint is not the agent's own tokens")
	}
	tr.Task.Prompt = "What is 1 + 1?"
	if _, ok, err := p.TeacherPrompt(tr, "a hint"); ok || err != nil {
		t.Errorf("a prompt without the problem's text took a hint (%v, %v)", ok, err)
	}
}
