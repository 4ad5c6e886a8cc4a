package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// qwenPattern is the Split regex of Qwen2/Qwen3 (and GPT-4o-style) tokenizers. Text with this
// pattern is split by splitQwen, a hand-written scanner equivalent to the regex (checked against
// regexp2 by a differential fuzz test); other patterns go through regexp2.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

func isL(r rune) bool  { return unicode.IsLetter(r) }
func isN(r rune) bool  { return unicode.IsNumber(r) }
func isWS(r rune) bool { return unicode.IsSpace(r) }
func isNL(r rune) bool { return r == '\r' || r == '\n' }

// other is [^\s\p{L}\p{N}].
func other(r rune) bool { return !isWS(r) && !isL(r) && !isN(r) }

// splitQwen calls emit for each piece of s, in order, exactly as the alternation in qwenPattern
// would match it (leftmost, first alternative that matches).
func splitQwen(s string, emit func(string)) {
	for i := 0; i < len(s); {
		n := matchQwen(s, i)
		emit(s[i : i+n])
		i += n
	}
}

// matchQwen returns the length of the match starting at i (always ≥ 1 byte).
func matchQwen(s string, i int) int {
	c, w := utf8.DecodeRuneInString(s[i:])
	// 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if c == '\'' {
		rest := s[i+1:]
		for _, suf := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
			if len(rest) >= len(suf) && equalFoldASCII(rest[:len(suf)], suf) {
				return 1 + len(suf)
			}
		}
	}
	// 2. [^\r\n\p{L}\p{N}]?\p{L}+
	if isL(c) {
		return w + letters(s, i+w)
	}
	if !isNL(c) && !isN(c) && i+w < len(s) {
		if d, _ := utf8.DecodeRuneInString(s[i+w:]); isL(d) {
			return w + letters(s, i+w)
		}
	}
	// 3. \p{N}
	if isN(c) {
		return w
	}
	// 4. ' '?[^\s\p{L}\p{N}]+[\r\n]*
	start := i
	if c == ' ' && i+1 < len(s) {
		if d, _ := utf8.DecodeRuneInString(s[i+1:]); other(d) {
			start = i + 1
		}
	}
	if d, _ := utf8.DecodeRuneInString(s[start:]); other(d) {
		j := start
		for j < len(s) {
			r, rw := utf8.DecodeRuneInString(s[j:])
			if !other(r) {
				break
			}
			j += rw
		}
		for j < len(s) && isNL(rune(s[j])) {
			j++
		}
		return j - i
	}
	// Whitespace alternatives: c is whitespace here.
	end := i
	lastNL := -1
	for end < len(s) {
		r, rw := utf8.DecodeRuneInString(s[end:])
		if !isWS(r) {
			break
		}
		if isNL(r) {
			lastNL = end
		}
		end += rw
	}
	// 5. \s*[\r\n]+ : up to and including the last newline of the run.
	if lastNL >= 0 {
		return lastNL + 1 - i
	}
	// 6. \s+(?!\S) : the whole run at the end of text, else all but its last character.
	if end == len(s) {
		return end - i
	}
	_, lw := utf8.DecodeLastRuneInString(s[i:end])
	if end-lw > i {
		return end - lw - i
	}
	// 7. \s+
	return end - i
}

func letters(s string, j int) int {
	start := j
	for j < len(s) {
		r, rw := utf8.DecodeRuneInString(s[j:])
		if !isL(r) {
			break
		}
		j += rw
	}
	return j - start
}

func equalFoldASCII(a, b string) bool {
	for k := 0; k < len(a); k++ {
		x := a[k]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != b[k] {
			return false
		}
	}
	return true
}
