// Package tokenizer implements HuggingFace byte-level BPE tokenizers (tokenizer.json) as used by
// Qwen2/Qwen3, and the Qwen chat format. Encodings match HF `tokenizers` exactly: NFC
// normalisation, added tokens split out first, the regex pre-tokenizer (with its look-ahead),
// the byte→unicode map, merges by rank.
package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// AddedToken is an entry of tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// Tokenizer encodes and decodes text. It is safe for concurrent use.
type Tokenizer struct {
	vocab   map[string]int32
	tokens  []string // id → token string (byte-level alphabet, or added-token content)
	ranks   map[[2]string]int
	added   []AddedToken // longest content first, for matching
	addedID map[int32]AddedToken
	pattern *regexp2.Regexp // nil when the pattern is Qwen's, split by splitQwen
	nfc     bool

	firstByte [256]bool // first bytes of added tokens

	cacheMu sync.RWMutex
	cache   map[string][]int32
}

// file mirrors the parts of tokenizer.json that this package reads.
type file struct {
	AddedTokens []AddedToken    `json:"added_tokens"`
	Normalizer  json.RawMessage `json:"normalizer"`
	PreTok      json.RawMessage `json:"pre_tokenizer"`
	Model       struct {
		Type   string            `json:"type"`
		Vocab  map[string]int32  `json:"vocab"`
		Merges []json.RawMessage `json:"merges"`
	} `json:"model"`
}

// Load reads tokenizer.json (or tokenizer.json.gz) from a folder, or the named file.
func Load(path string) (*Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		for _, name := range []string{"tokenizer.json", "tokenizer.json.gz"} {
			p := filepath.Join(path, name)
			if _, err := os.Stat(p); err == nil {
				return Load(p)
			}
		}
		return nil, fmt.Errorf("no tokenizer.json in %s: point at a HuggingFace model folder or a tokenizer.json file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer %s not found", path)
		}
		return nil, fmt.Errorf("reading tokenizer: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse builds a tokenizer from tokenizer.json bytes.
func Parse(data []byte) (*Tokenizer, error) {
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("invalid tokenizer.json: %w", err)
	}
	if f.Model.Type != "BPE" {
		return nil, fmt.Errorf("model.type %q is not supported: want BPE", f.Model.Type)
	}
	if len(f.Model.Vocab) == 0 {
		return nil, errors.New("model.vocab is empty")
	}
	t := &Tokenizer{vocab: f.Model.Vocab, ranks: make(map[[2]string]int, len(f.Model.Merges)), addedID: map[int32]AddedToken{}, cache: map[string][]int32{}}
	for i, m := range f.Model.Merges {
		var pair [2]string
		var s string
		if err := json.Unmarshal(m, &s); err == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("model.merges[%d] %q: want two tokens separated by a space", i, s)
			}
			pair = [2]string{a, b}
		} else {
			var arr []string
			if err := json.Unmarshal(m, &arr); err != nil || len(arr) != 2 {
				return nil, fmt.Errorf("model.merges[%d]: want \"a b\" or [\"a\", \"b\"]", i)
			}
			pair = [2]string{arr[0], arr[1]}
		}
		if _, dup := t.ranks[pair]; !dup {
			t.ranks[pair] = i
		}
	}
	n := int32(0)
	for _, id := range f.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		n = max(n, a.ID+1)
	}
	t.tokens = make([]string, n)
	for s, id := range f.Model.Vocab {
		t.tokens[id] = s
	}
	t.added = append(t.added, f.AddedTokens...)
	for i := range t.added {
		a := t.added[i]
		t.tokens[a.ID] = a.Content
		t.addedID[a.ID] = a
		if _, ok := t.vocab[a.Content]; !ok {
			t.vocab[a.Content] = a.ID
		}
	}
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].Content) > len(t.added[j].Content) })
	for _, a := range t.added {
		if a.Content != "" {
			t.firstByte[a.Content[0]] = true
		}
	}

	var normalizer struct{ Type string }
	if len(f.Normalizer) > 0 && string(f.Normalizer) != "null" {
		if err := json.Unmarshal(f.Normalizer, &normalizer); err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
		switch normalizer.Type {
		case "NFC":
			t.nfc = true
		default:
			return nil, fmt.Errorf("normalizer type %q is not supported: want NFC or none", normalizer.Type)
		}
	}
	pat, err := splitPattern(f.PreTok)
	if err != nil {
		return nil, err
	}
	if pat != qwenPattern {
		if t.pattern, err = regexp2.Compile(pat, regexp2.Unicode); err != nil {
			return nil, fmt.Errorf("pre_tokenizer regex: %w", err)
		}
	}
	return t, nil
}

// gpt2Pattern is the ByteLevel pre-tokenizer's own regex (use_regex: true).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// splitPattern finds the regex of a Split pre-tokenizer (alone or in a Sequence), or the
// ByteLevel one.
func splitPattern(raw json.RawMessage) (string, error) {
	type preTok struct {
		Type    string `json:"type"`
		Pattern struct {
			Regex  string `json:"Regex"`
			String string `json:"String"`
		} `json:"pattern"`
		Behavior      string            `json:"behavior"`
		UseRegex      *bool             `json:"use_regex"`
		AddPrefix     bool              `json:"add_prefix_space"`
		PreTokenizers []json.RawMessage `json:"pretokenizers"`
	}
	var p preTok
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("pre_tokenizer: %w", err)
	}
	parts := []preTok{p}
	if p.Type == "Sequence" {
		parts = nil
		for _, r := range p.PreTokenizers {
			var q preTok
			if err := json.Unmarshal(r, &q); err != nil {
				return "", fmt.Errorf("pre_tokenizer: %w", err)
			}
			parts = append(parts, q)
		}
	}
	pattern := ""
	for _, q := range parts {
		switch q.Type {
		case "Split":
			if q.Behavior != "Isolated" {
				return "", fmt.Errorf("pre_tokenizer Split behavior %q is not supported: want Isolated", q.Behavior)
			}
			pattern = q.Pattern.Regex
			if pattern == "" {
				pattern = regexp2.Escape(q.Pattern.String)
			}
		case "ByteLevel":
			if q.AddPrefix {
				return "", errors.New("pre_tokenizer ByteLevel add_prefix_space: true is not supported")
			}
			if q.UseRegex == nil || *q.UseRegex {
				pattern = gpt2Pattern
			}
		default:
			return "", fmt.Errorf("pre_tokenizer type %q is not supported: want Split and ByteLevel", q.Type)
		}
	}
	if pattern == "" {
		return "", errors.New("pre_tokenizer has no split regex")
	}
	return pattern, nil
}

// VocabSize is the number of ids (base vocabulary and added tokens).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenID returns the id of a token string (a vocabulary entry in the byte-level alphabet, or an
// added token's content).
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	id, ok := t.vocab[s]
	return id, ok
}

// ChatStopIDs are the ids of the tokens a chat turn ends with, of those this tokenizer has:
// Qwen's <|im_end|> and <|endoftext|>, in that order.
func (t *Tokenizer) ChatStopIDs() []int32 {
	var ids []int32
	for _, name := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := t.TokenID(name); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// StripSpecial removes the text of every special added token (<|im_start|>, <|im_end|>,
// <|endoftext|> in Qwen's) from s: text written into a prompt from a model's output (a hint
// quoting its answer) would otherwise encode as the token itself and open or close a chat turn.
func (t *Tokenizer) StripSpecial(s string) string {
	for _, a := range t.added { // longest first: one marker inside another goes with the outer
		if a.Special && a.Content != "" {
			s = strings.ReplaceAll(s, a.Content, "")
		}
	}
	return s
}

// Token returns the token string of an id ("" when out of range).
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Tokens maps ids to their token strings.
func (t *Tokenizer) Tokens(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.Token(id)
	}
	return out
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int32) bool {
	a, ok := t.addedID[id]
	return ok && a.Special
}

// Encode turns text into ids, recognising added tokens in it; no special tokens are added.
func (t *Tokenizer) Encode(text string) []int32 {
	var ids []int32
	for len(text) > 0 {
		pos, a := t.nextAdded(text)
		if pos < 0 {
			ids = t.encodeSegment(text, ids)
			break
		}
		seg := text[:pos]
		if a.LStrip {
			seg = strings.TrimRight(seg, " \t\n\r")
		}
		ids = t.encodeSegment(seg, ids)
		ids = append(ids, a.ID)
		text = text[pos+len(a.Content):]
		if a.RStrip {
			text = strings.TrimLeft(text, " \t\n\r")
		}
	}
	return ids
}

// nextAdded finds the earliest added token in text (the longest one at that position).
func (t *Tokenizer) nextAdded(text string) (int, *AddedToken) {
	for p := 0; p < len(text); p++ {
		if !t.firstByte[text[p]] {
			continue
		}
		for i := range t.added { // longest first
			if strings.HasPrefix(text[p:], t.added[i].Content) {
				return p, &t.added[i]
			}
		}
	}
	return -1, nil
}

func (t *Tokenizer) encodeSegment(s string, ids []int32) []int32 {
	if s == "" {
		return ids
	}
	if t.nfc {
		s = norm.NFC.String(s)
	}
	if t.pattern == nil {
		splitQwen(s, func(w string) { ids = append(ids, t.bpeWord(w)...) })
		return ids
	}
	m, _ := t.pattern.FindStringMatch(s)
	for m != nil {
		ids = append(ids, t.bpeWord(m.String())...)
		m, _ = t.pattern.FindNextMatch(m)
	}
	return ids
}

// bpeWord encodes one pre-token: bytes → byte-level characters → merges by rank → ids.
func (t *Tokenizer) bpeWord(word string) []int32 {
	t.cacheMu.RLock()
	cached, ok := t.cache[word]
	t.cacheMu.RUnlock()
	if ok {
		return cached
	}
	parts := make([]string, 0, len(word))
	for i := 0; i < len(word); i++ {
		parts = append(parts, byteToRune[word[i]])
	}
	for len(parts) > 1 {
		bestRank, bestAt := -1, -1
		for i := 0; i+1 < len(parts); i++ {
			if r, ok := t.ranks[[2]string{parts[i], parts[i+1]}]; ok && (bestRank < 0 || r < bestRank) {
				bestRank, bestAt = r, i
			}
		}
		if bestAt < 0 {
			break
		}
		a, b := parts[bestAt], parts[bestAt+1]
		merged := parts[:0:0]
		for i := 0; i < len(parts); i++ {
			if i+1 < len(parts) && parts[i] == a && parts[i+1] == b {
				merged = append(merged, a+b)
				i++
				continue
			}
			merged = append(merged, parts[i])
		}
		parts = merged
	}
	out := make([]int32, 0, len(parts))
	for _, p := range parts {
		if id, ok := t.vocab[p]; ok {
			out = append(out, id)
			continue
		}
		for _, r := range p { // no byte fallback in byte-level BPE: every single byte is in the vocabulary
			if id, ok := t.vocab[string(r)]; ok {
				out = append(out, id)
			}
		}
	}
	if len(word) <= 64 {
		t.cacheMu.Lock()
		if len(t.cache) > 1<<16 {
			t.cache = map[string][]int32{}
		}
		t.cache[word] = out
		t.cacheMu.Unlock()
	}
	return out
}

// Decode turns ids back into text; skipSpecial drops special added tokens.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	var b strings.Builder
	var buf []byte
	flush := func() {
		b.Write(buf)
		buf = buf[:0]
	}
	for _, id := range ids {
		if a, ok := t.addedID[id]; ok {
			if skipSpecial && a.Special {
				continue
			}
			flush()
			b.WriteString(a.Content)
			continue
		}
		for _, r := range t.Token(id) {
			if by, ok := runeToByte[r]; ok {
				buf = append(buf, by)
			} else {
				buf = append(buf, string(r)...)
			}
		}
	}
	flush()
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// byteToRune and runeToByte are GPT-2's reversible map from bytes to printable characters.
var byteToRune, runeToByte = byteLevelMaps()

func byteLevelMaps() ([256]string, map[rune]byte) {
	var b2r [256]string
	r2b := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = rune(256 + n)
			n++
		}
		b2r[b] = string(r)
		r2b[r] = byte(b)
	}
	return b2r, r2b
}
