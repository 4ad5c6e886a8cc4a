package serve

import (
	_ "embed" // the Qwen3 chat template, to compare a model folder's with
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// qwen3Template is the chat_template of Qwen3's tokenizer_config.json, which
// tokenizer.RenderChat implements (testdata/fixtures/qwen3-tokenizer holds the file it is from).
//
//go:embed qwen3_chat_template.jinja
var qwen3Template string

// CheckTemplate says which chat template a model folder asks for and what the server renders:
// always Qwen3's (tokenizer.RenderChat). ok is false when the folder's tokenizer_config.json
// names another template, so prompts may differ from what transformers' apply_chat_template
// would make for that model (the drift probe cannot see this: it compares with Qwen3's too).
func CheckTemplate(dir string) (note string, ok bool, err error) {
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "no tokenizer_config.json in " + dir + ": chats render with Qwen3's chat template", true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading the chat template: %w", err)
	}
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", false, fmt.Errorf("%s: %w", path, err)
	}
	var tmpl string
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return path + " has no chat_template: chats render with Qwen3's chat template", true, nil
	}
	if err := json.Unmarshal(cfg.ChatTemplate, &tmpl); err != nil {
		return path + "'s chat_template is not one string (a list of named templates): chats render with Qwen3's chat template, which may differ from it", false, nil
	}
	if strings.TrimSpace(tmpl) == strings.TrimSpace(qwen3Template) {
		return path + "'s chat_template is Qwen3's: chats render with it", true, nil
	}
	return path + "'s chat_template differs from Qwen3's: chats render with Qwen3's, so prompts may differ from what this model's own template makes", false, nil
}
