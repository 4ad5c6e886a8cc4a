package ui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// pyKeywords and pyBuiltins are coloured in code blocks (Python and Starlark share them).
var (
	pyKeywords = wordSet("and as assert async await break class continue def del elif else except False finally for from global if import in is lambda load None nonlocal not or pass raise return True try while with yield")
	pyBuiltins = wordSet("abs all any bool dict divmod enumerate filter float format int isinstance len list map max min pow print range repr reversed round set sorted str sum tuple type zip math")
)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }

// highlight colours one line of Python-like code: keywords, builtins, strings, numbers and
// comments. It works line by line (a string spanning lines is coloured on its first line only).
func highlight(t *Theme, line string) string {
	if !t.Color {
		return line
	}
	var sb strings.Builder
	emit := func(s string, st *lipgloss.Style) {
		if st == nil {
			sb.WriteString(s)
		} else {
			sb.WriteString(st.Render(s))
		}
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '#':
			emit(line[i:], &t.CodeComment)
			i = len(line)
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(line) && line[j] != c {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(line))
			emit(line[i:j], &t.CodeString)
			i = j
		case isDigit(c):
			j := i
			for j < len(line) && (isDigit(line[j]) || line[j] == '.' || line[j] == '_' || line[j] == 'e' || line[j] == 'x') {
				j++
			}
			emit(line[i:j], &t.CodeNumber)
			i = j
		case isIdentStart(c):
			j := i
			for j < len(line) && (isIdentStart(line[j]) || isDigit(line[j])) {
				j++
			}
			w := line[i:j]
			switch {
			case pyKeywords[w]:
				emit(w, &t.CodeKeyword)
			case pyBuiltins[w]:
				emit(w, &t.CodeBuiltin)
			default:
				emit(w, nil)
			}
			i = j
		default:
			j := i + 1
			for j < len(line) && !isIdentStart(line[j]) && !isDigit(line[j]) && line[j] != '#' && line[j] != '"' && line[j] != '\'' {
				j++
			}
			emit(line[i:j], nil)
			i = j
		}
	}
	return sb.String()
}
