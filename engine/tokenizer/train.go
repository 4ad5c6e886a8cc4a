package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ChatSpecials returns the special tokens of the Qwen chat format, added after the BPE vocabulary.
func ChatSpecials() []string {
	return []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
}

// Train learns a byte-level BPE of vocabSize ids in all (256 byte tokens, merges, then the
// specials as added tokens) from texts, with the Qwen pre-tokenizer, and returns it as a
// tokenizer.json document (load it with Parse, or write it with os.WriteFile). Ties between
// equally frequent pairs break by the pair's text, so training is deterministic.
func Train(texts []string, vocabSize int, specials []string) ([]byte, error) {
	if vocabSize < 256+len(specials)+1 {
		return nil, fmt.Errorf("tokenizer train: vocab %d is too small: need at least 256 byte tokens + %d specials + 1", vocabSize, len(specials))
	}
	// Count pre-tokenized words (specials are cut out: they never take part in merges).
	freq := map[string]int{}
	for _, text := range texts {
		for _, seg := range splitSpecials(text, specials) {
			splitQwen(seg, func(w string) { freq[w]++ })
		}
	}
	type word struct {
		parts []string
		n     int
	}
	words := make([]*word, 0, len(freq))
	keys := make([]string, 0, len(freq))
	for w := range freq {
		keys = append(keys, w)
	}
	sort.Strings(keys)
	for _, w := range keys {
		parts := make([]string, len(w))
		for i := 0; i < len(w); i++ {
			parts[i] = byteToRune[w[i]]
		}
		words = append(words, &word{parts, freq[w]})
	}
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[byteToRune[b]] = b
	}
	var merges [][2]string
	for len(vocab) < vocabSize-len(specials) {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.parts); i++ {
				pairs[[2]string{w.parts[i], w.parts[i+1]}] += w.n
			}
		}
		var best [2]string
		bestN := 0
		for p, n := range pairs {
			if n > bestN || (n == bestN && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			break // nothing left worth merging
		}
		merged := best[0] + best[1]
		merges = append(merges, best)
		vocab[merged] = len(vocab)
		for _, w := range words {
			out := w.parts[:0:0]
			for i := 0; i < len(w.parts); i++ {
				if i+1 < len(w.parts) && w.parts[i] == best[0] && w.parts[i+1] == best[1] {
					out = append(out, merged)
					i++
					continue
				}
				out = append(out, w.parts[i])
			}
			w.parts = out
		}
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var addedTokens []added
	for i, s := range specials {
		addedTokens = append(addedTokens, added{ID: len(vocab) + i, Content: s, Special: strings.HasPrefix(s, "<|")})
	}
	mergeStrs := make([][]string, len(merges))
	for i, m := range merges {
		mergeStrs[i] = []string{m[0], m[1]}
	}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": addedTokens,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenPattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": mergeStrs},
	}
	return json.MarshalIndent(doc, "", " ")
}

func splitSpecials(text string, specials []string) []string {
	segs := []string{text}
	for _, s := range specials {
		var next []string
		for _, seg := range segs {
			next = append(next, strings.Split(seg, s)...)
		}
		segs = next
	}
	return segs
}

// ChatTemplateConfig is a tokenizer_config.json naming the chat specials, written next to a trained
// tokenizer.json so that other tools know the end-of-turn token.
func ChatTemplateConfig() []byte {
	return []byte(`{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "model_max_length": 1024}` + "\n")
}

// WriteTrained writes tokenizer.json and tokenizer_config.json into dir.
func WriteTrained(dir string, doc []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), doc, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), ChatTemplateConfig(), 0o644)
}
