package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckTemplate: Qwen3's own tokenizer_config.json is recognised as the template the server
// renders; the built-in model's (no chat_template) and a folder without the file say Qwen3's is
// used; another template is flagged.
func TestCheckTemplate(t *testing.T) {
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "tokenizer_config.json"), []byte(`{"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		ok        bool
		says      string
	}{
		{"Qwen3's", filepath.Join("..", "..", "testdata", "fixtures", "qwen3-tokenizer"), true, "is Qwen3's"},
		{"the built-in model's", builtinDir, true, "has no chat_template"},
		{"no file", t.TempDir(), true, "no tokenizer_config.json"},
		{"another template", other, false, "differs from Qwen3's"},
	} {
		note, ok, err := CheckTemplate(tc.dir)
		if err != nil || ok != tc.ok || !strings.Contains(note, tc.says) {
			t.Errorf("%s: %q, ok %v, %v; want ok %v and a note saying %q", tc.name, note, ok, err, tc.ok, tc.says)
		}
	}
}
