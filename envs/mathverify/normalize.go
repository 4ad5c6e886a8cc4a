package mathverify

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// MaxLen is the longest normalised answer, in bytes, that is parsed; a longer one (or one nested
// deeper than maxDepth) is compared as text with its white space removed.
const MaxLen = 1024

// maxDepth bounds the nesting of brackets and braces an answer may have to be parsed, and so the
// recursion of the LaTeX scanner and the expression parser.
const maxDepth = 48

// maxPasses bounds the passes Normalize makes to reach its fixed point.
const maxPasses = 6

var (
	degreesRE   = regexp.MustCompile(`\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree|°`)
	thinSepRE   = regexp.MustCompile(`(\d)\\,(\d{3})`)
	thousandsRE = regexp.MustCompile(`^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$`)
	unitRE      = regexp.MustCompile(`(?i)^(.*?[0-9)\]}.])\s+(?:` + unitWords + `)(?:\s*(?:\^\s*\(?\s*[23]\s*\)?|²|³))?\s*\.?$`)
	choiceRE    = regexp.MustCompile(`^\(([A-Za-z])\)$`)
	// a whole number then a proper fraction of whole numbers: 2\frac{1}{4}, 3 \frac 23 (not 2\frac{\pi}{3})
	// 1 000 000, the whole answer: thousands separated by spaces
	spaceThousandsRE = regexp.MustCompile(`^[+-]?\d{1,3}(?: \d{3})+(?:\.\d+)?$`)
	// 7 3/4 written plainly
	plainMixedRE = regexp.MustCompile(`(^|[^0-9A-Za-z.^_}\\/])([0-9]+)\s+([0-9]+)\s*/\s*([0-9]+)\b`)
	// digits on both sides of a space that is no mixed number: not one number (7 3 is not 73)
	digitSpaceRE = regexp.MustCompile(`([0-9])\s+([0-9])`)
	// \left[ matrix(…) \right]: the brackets of a matrix written as an array
	bracketedMatrixRE = regexp.MustCompile(`\\left\s*[\[(]\s*(matrix\(.*\))\s*\\right\s*[\])]`)
	// (11,7)or(7,11): and/or between bracketed answers without spaces
	tightAndOrRE = regexp.MustCompile(`([)\]])\s*(?:and|or)\s*([(\[])`)
	// 3 million: a scale word is its power of ten
	scaleRE = regexp.MustCompile(`(?i)^(.*[0-9])\s*(thousand|million|billion)$`)
	mixedRE = regexp.MustCompile(`(^|[^0-9A-Za-z.^_}\\])([0-9]+)\s*\\frac\s*(?:\{\s*([0-9]+)\s*\}|([0-9]))\s*(?:\{\s*([0-9]+)\s*\}|([0-9]))`)
	// 32,\! 349: a thousands separator with a negative thin space, and a space after it
	negThinSepRE = regexp.MustCompile(`,\s*\\!\s*(\d)`)
	// \begin{pmatrix} … \end{pmatrix} and its bracket kinds (not vmatrix: a determinant)
	matrixRE = regexp.MustCompile(`(?s)\\begin\s*\{\s*([pbB]?matrix|array)\s*\}(?:\s*\{[lcr|]*\})?(.*?)\\end\s*\{\s*(?:[pbB]?matrix|array)\s*\}`)
	// "2 and 5", "x=1 or x=2" between parts of an answer
	andOrRE = regexp.MustCompile(`([^\s,])\s+(?:and|or)\s+([^\s,])`)
	// 5th, 21st, 5^(th): an ordinal is its number
	ordinalRE = regexp.MustCompile(`^(.*[0-9])\s*(?:\^\s*\(?\s*)?(?:st|nd|rd|th)\s*\)?$`)
)

// unitWords are the units and counted nouns a number may carry and still be the same number
// ("5 cm", "12 dollars", "3 ways").
const unitWords = `cm|mm|km|m|meters?|metres?|centimeters?|inch|inches|in|ft|feet|foot|yards?|yd|miles?|mi|` +
	`units?|square\s+units|sq\s+units|square\s+(?:cm|m|ft|feet|inches|meters|units)|cubic\s+(?:cm|m|ft|feet|inches|meters|units)|` +
	`dollars?|cents?|degrees?|deg|hours?|hrs?|minutes?|mins?|seconds?|secs?|days?|weeks?|months?|years?|` +
	`grams?|g|kg|pounds?|lbs?|ounces?|oz|mph|km/h|liters?|litres?|ml|` +
	`ways|people|persons|students|points|times|steps|numbers|integers|boxes|balls|coins|marbles|pieces|games|rounds|` +
	`digits|meals|edges|vertices|faces|sides|percent|percentage|pct|gm|multiples|tickets|handshakes|pages`

// Normalize rewrites an answer into the plain form Equal parses: math delimiters ($…$, \(…\),
// \[…\]), \left/\right, spacing commands, \text{}/\mathrm{}/\mathbf{} wrappers, degrees, percent
// and dollar signs, trailing units and periods, thousands separators and all white space are
// removed; \frac{a}{b} (and \dfrac, \tfrac, with or without braces) becomes (a/b), \sqrt{x} sqrt(x),
// \sqrt[n]{x} (x)^(1/n), \binom{n}{k} n!/(k!(n-k)!), braces parentheses, \pi pi, \infty inf, \cdot and \times *, \pm ±, \cup ∪;
// set braces stay \{ \}; list commas become ", "; a lone letter in parentheses, "(C)", the letter.
// Normalize is idempotent: Normalize(Normalize(s)) == Normalize(s).
func Normalize(s string) string {
	if t := squeeze(s); len(t) > MaxLen || depth(t) > maxDepth {
		return t
	}
	out := s
	for range maxPasses {
		next := normOnce(out)
		if next == out {
			break
		}
		out = next
	}
	if len(out) > MaxLen || depth(out) > maxDepth {
		return squeeze(s)
	}
	return out
}

// textOnly reports whether a normalised answer is compared only as text (too long or too deep to
// parse).
func textOnly(norm string) bool {
	return len(norm) > MaxLen || depth(norm) > maxDepth
}

// squeeze removes all white space.
func squeeze(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// depth is the deepest nesting of (), [] and {} in s.
func depth(s string) int {
	d, most := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			d++
			most = max(most, d)
		case ')', ']', '}':
			if d > 0 {
				d--
			}
		}
	}
	return most
}

var unicodeMath = strings.NewReplacer(
	"−", "-", "–", "-", "—", "-", "×", `\times `, "·", `\cdot `, "⋅", `\cdot `, "÷", `\div `,
	"π", `\pi `, "∞", `\infty `, "√", `\sqrt `, "±", `\pm `, "∓", `\mp `, "≤", `\le `, "≥", `\ge `,
	"≠", `\ne `, "∪", `\cup `, "∅", `\emptyset `, "²", "^2", "³", "^3", "\u00a0", " ", "\u2009", " ",
	"\\dfrac", `\frac`, "\\tfrac", `\frac`, "\\cfrac", `\frac`,
)

// normOnce is one pass of Normalize.
func normOnce(s string) string {
	s = strings.TrimSpace(unicodeMath.Replace(s))
	s = stripDelims(s)
	s = degreesRE.ReplaceAllString(s, "")
	s = negThinSepRE.ReplaceAllString(s, "{,}$1")
	if spaceThousandsRE.MatchString(s) { // 1 000 000: SI thousands, the whole answer
		s = strings.ReplaceAll(s, " ", "")
	}
	s = thinSepRE.ReplaceAllString(s, "$1$2")
	s = regexp.MustCompile(`\{\s*,\s*\}`).ReplaceAllString(s, "{,}")
	s = mixedRE.ReplaceAllStringFunc(s, mixed)
	s = plainMixedRE.ReplaceAllStringFunc(s, plainMixed)
	s = digitSpaceRE.ReplaceAllString(s, "$1 ␣ $2")
	s = matrixRE.ReplaceAllStringFunc(s, matrix)
	s = bracketedMatrixRE.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, "!=", "≠")
	s = bareSet(s)
	s = strings.NewReplacer(">=", "≥", "<=", "≤", "=>", "≥", "=<", "≤").Replace(s)
	s = strings.ReplaceAll(s, "{,}", "")
	s = scan(s, 0)
	s = strings.TrimSpace(s)
	s = andOrRE.ReplaceAllString(andOrRE.ReplaceAllString(s, "$1, $2"), "$1, $2") // twice: "1 and 2 and 3" overlaps
	s = tightAndOrRE.ReplaceAllString(s, "$1, $2")
	s = strings.ReplaceAll(s, ";", ",")
	if rest, ok := strings.CutPrefix(s, "≈"); ok { // "\approx 3.14" is its value
		s = strings.TrimSpace(rest)
	}
	for {
		t := strings.TrimSpace(strings.TrimSuffix(s, "."))
		if m := unitRE.FindStringSubmatch(t); m != nil {
			t = strings.TrimSpace(m[1])
		}
		if m := ordinalRE.FindStringSubmatch(t); m != nil {
			t = strings.TrimSpace(m[1])
		}
		if m := scaleRE.FindStringSubmatch(t); m != nil {
			t = "(" + strings.TrimSpace(m[1]) + ")*" + map[string]string{"thousand": "1000", "million": "1000000", "billion": "1000000000"}[strings.ToLower(m[2])]
		}
		if t == s {
			break
		}
		s = t
	}
	if thousandsRE.MatchString(s) { // before squeezing: "3, 700" is a list
		s = strings.ReplaceAll(s, ",", "")
	}
	s = squeeze(s)
	s = strings.ReplaceAll(s, ",", ", ")
	if m := choiceRE.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	return s
}

// mixed rewrites a whole number before \frac of whole numbers as their sum when the fraction is
// proper (2\frac{1}{4} is 9/4); otherwise it stays a product.
func mixed(m string) string {
	g := mixedRE.FindStringSubmatch(m)
	num, den := g[3]+g[4], g[5]+g[6]
	if !properFraction(num, den) {
		return m
	}
	return g[1] + "(" + g[2] + `+\frac{` + num + "}{" + den + "})"
}

// plainMixed rewrites 7 3/4 as 7+3/4 when 3/4 is proper.
func plainMixed(m string) string {
	g := plainMixedRE.FindStringSubmatch(m)
	if !properFraction(g[3], g[4]) {
		return m
	}
	return g[1] + "(" + g[2] + "+" + g[3] + "/" + g[4] + ")"
}

// properFraction reports whether num/den, both whole numbers, is between 0 and 1.
func properFraction(num, den string) bool {
	n, err1 := strconv.ParseUint(num, 10, 64)
	d, err2 := strconv.ParseUint(den, 10, 64)
	return err1 == nil && err2 == nil && n > 0 && n < d
}

// bareSet reads an answer that is one braced group of several elements ({2, 3, 5}) as the set it
// writes; LaTeX braces are grouping, but no one groups a list.
func bareSet(s string) string {
	if len(s) < 2 || s[0] != '{' || matching(s, 0, '{', '}') != len(s)-1 {
		return s
	}
	inner := s[1 : len(s)-1]
	if len(splitTop(inner, ",")) < 2 {
		return s
	}
	return `\{` + inner + `\}`
}

// matrix rewrites the body of a matrix environment (rows split by \\, cells by &) as
// matrix((a, b), (c, d)), which Equal compares row by row and cell by cell.
func matrix(env string) string {
	m := matrixRE.FindStringSubmatch(env)
	var rows []string
	for _, row := range strings.Split(m[2], `\\`) {
		if strings.TrimSpace(row) == "" {
			continue
		}
		cells := strings.Split(row, "&")
		for i := range cells {
			cells[i] = "{" + strings.TrimSpace(cells[i]) + "}"
		}
		rows = append(rows, "("+strings.Join(cells, ",")+")")
	}
	return "matrix(" + strings.Join(rows, ",") + ")"
}

// stripDelims removes math delimiters around the whole answer.
func stripDelims(s string) string {
	for {
		t := s
		for _, p := range [][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}} {
			if len(t) >= len(p[0])+len(p[1]) && strings.HasPrefix(t, p[0]) && strings.HasSuffix(t, p[1]) {
				t = strings.TrimSpace(t[len(p[0]) : len(t)-len(p[1])])
				break
			}
		}
		if t == s {
			return s
		}
		s = t
	}
}

// commands maps LaTeX commands without arguments to their plain form.
var commands = map[string]string{
	"left": "", "right": "", "big": "", "Big": "", "bigg": "", "Bigg": "", "bigl": "", "bigr": "",
	"Bigl": "", "Bigr": "", "biggl": "", "biggr": "", "displaystyle": "", "textstyle": "", "limits": "",
	",": " ", ";": " ", ":": " ", " ": " ", "!": "", "quad": " ", "qquad": " ", "enspace": " ",
	"thinspace": " ", "medspace": " ", "thickspace": " ", "%": "", "$": "", "{": `\{`, "}": `\}`,
	"lbrace": `\{`, "rbrace": `\}`, "&": "", "#": "#", "_": "_",
	"pi": "pi", "infty": "inf", "infin": "inf", "cdot": "*", "times": "*", "ast": "*", "div": "/",
	"pm": "±", "mp": "±", "cup": "∪", "emptyset": "∅", "varnothing": "∅", "le": "≤", "leq": "≤",
	"leqslant": "≤", "ge": "≥", "geq": "≥", "geqslant": "≥", "ne": "≠", "neq": "≠", "lt": "<", "gt": ">",
	"ldots": "...", "cdots": "...", "dots": "...", "in": "∈", "approx": "≈", "sim": "≈", "simeq": "≈", "to": "→", "prime": "'", "colon": ":",
}

// wrappers are the commands whose one argument is kept and the command dropped.
var wrappers = map[string]bool{
	"text": true, "textbf": true, "textit": true, "textrm": true, "textnormal": true, "mathrm": true,
	"mathbf": true, "mathit": true, "mathsf": true, "mathbb": true, "mathcal": true, "mbox": true, "hbox": true,
	"operatorname": true, "boldsymbol": true, "bm": true, "boxed": true, "fbox": true, "emph": true,
	"overline": true, "underline": true,
}

// scan rewrites LaTeX commands and groups, recursing into arguments up to maxDepth.
func scan(s string, d int) string {
	if d > maxDepth {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			name, next := command(s, i)
			i = next
			switch {
			case name == "frac":
				var num, den string
				num, i = argument(s, i)
				den, i = argument(s, i)
				b.WriteString("(" + wrap(scan(num, d+1)) + "/" + wrap(scan(den, d+1)) + ")")
			case name == "binom" || name == "dbinom" || name == "tbinom":
				var n, k string
				n, i = argument(s, i)
				k, i = argument(s, i)
				n, k = wrap(scan(n, d+1)), wrap(scan(k, d+1))
				b.WriteString("(" + n + "!/(" + k + "!(" + n + "-" + k + ")!))")
			case name == "sqrt":
				var n, x string
				j := skipSpace(s, i)
				if j < len(s) && s[j] == '[' {
					if k := matching(s, j, '[', ']'); k > 0 {
						n, i = s[j+1:k], k+1
					}
				}
				x, i = argument(s, i)
				if n != "" {
					b.WriteString("((" + scan(x, d+1) + ")^(1/" + wrap(scan(n, d+1)) + "))")
				} else {
					b.WriteString("sqrt(" + scan(x, d+1) + ")")
				}
			case wrappers[name]:
				var x string
				x, i = argument(s, i)
				b.WriteString(" " + scan(x, d+1) + " ")
			case name == "left" || name == "right" || name == "bigl" || name == "bigr":
				if j := skipSpace(s, i); j < len(s) && s[j] == '.' {
					i = j + 1
				}
			default:
				if r, ok := commands[name]; ok {
					b.WriteString(r)
				} else if rest, ok := glued(name); ok {
					b.WriteString(" " + rest)
				} else {
					b.WriteString(name)
				}
			}
		case c == '{':
			k := matching(s, i, '{', '}')
			if k < 0 {
				i++
				continue
			}
			b.WriteString("(" + scan(s[i+1:k], d+1) + ")")
			i = k + 1
		case c == '}' || c == '$' || c == '%':
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// glued splits a spacing command written against the next word (\quadx_2 is \quad x_2).
func glued(name string) (string, bool) {
	for _, sp := range []string{"qquad", "quad"} {
		if rest, ok := strings.CutPrefix(name, sp); ok && rest != "" {
			return rest, true
		}
	}
	return "", false
}

// command reads the name of the command whose backslash is at s[i]: a run of letters or one other
// character (an empty name for a final backslash). It returns the index after the name.
func command(s string, i int) (string, int) {
	j := i + 1
	for j < len(s) && isLetter(s[j]) {
		j++
	}
	if j == i+1 && j < len(s) {
		if s[j] < 0x80 {
			return s[j : j+1], j + 1
		}
		return "", j // a backslash before a multi-byte character is dropped
	}
	return s[i+1 : j], j
}

// argument reads one command argument from s[i:]: a {group}, a command (\pi), or one character.
func argument(s string, i int) (string, int) {
	i = skipSpace(s, i)
	if i >= len(s) {
		return "", i
	}
	switch s[i] {
	case '{':
		if k := matching(s, i, '{', '}'); k > 0 {
			return s[i+1 : k], k + 1
		}
		return "", i + 1
	case '\\':
		_, j := command(s, i)
		return s[i:j], j
	}
	if s[i] >= 0x80 { // one whole UTF-8 character
		j := i + 1
		for j < len(s) && s[j]&0xC0 == 0x80 {
			j++
		}
		return s[i:j], j
	}
	return s[i : i+1], i + 1
}

// matching is the index of the bracket closing the one at s[i], or -1.
func matching(s string, i int, open, close byte) int {
	d := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\': // \{ and \} do not count
			j++
		case open:
			d++
		case close:
			d--
			if d == 0 {
				return j
			}
		}
	}
	return -1
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	return i
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

var simpleRE = regexp.MustCompile(`^\s*(?:[0-9]+(?:\.[0-9]*)?|[A-Za-z]|pi)\s*$`)

// wrap puts x in parentheses unless it is a number or one letter.
func wrap(x string) string {
	if simpleRE.MatchString(x) {
		return strings.TrimSpace(x)
	}
	return "(" + x + ")"
}
