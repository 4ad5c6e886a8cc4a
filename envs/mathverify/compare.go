package mathverify

import (
	"regexp"
	"strings"
)

// maxElems bounds the elements of a list, set or tuple that are compared.
const maxElems = 64

// maxNest bounds how deep lists, tuples, unions and equations nest in a comparison.
const maxNest = 8

// shape kinds.
const (
	scalar = iota
	list   // a, b: order-insensitive
	set    // \{a, b\}: order-insensitive
	seq    // (a, b), [a, b): in order, brackets compared
)

type shape struct {
	kind        int
	open, close byte
	elems       []string
}

// maxCompares bounds the element comparisons one Equal makes (lists of lists compare every
// element with every other); past it the answers are unequal.
const maxCompares = 4096

// comparer compares normalised answers within a budget of comparisons.
type comparer struct{ budget int }

// equalNorm compares two normalised answers.
func equalNorm(p, t string) bool {
	c := comparer{budget: maxCompares}
	return c.equal(p, t, 0)
}

// equal compares two normalised answers nested nest deep.
func (c *comparer) equal(p, t string, nest int) bool {
	c.budget--
	if p == "" || t == "" || c.budget < 0 {
		return false
	}
	if strings.EqualFold(p, t) {
		return true
	}
	if textOnly(p) || textOnly(t) || nest > maxNest {
		return false
	}
	if p, t = relation(approx(p)), relation(approx(t)); strings.EqualFold(p, t) {
		return true
	}
	pu, tu := splitTop(p, "∪"), splitTop(t, "∪")
	if len(pu) > 1 || len(tu) > 1 {
		return c.pairwise(pu, tu, nest)
	}
	if pe, te := equationSides(p), equationSides(t); (len(pe) == 2 || len(te) == 2) && len(splitTop(p, ",")) == 1 && len(splitTop(t, ",")) == 1 {
		return c.equation(pe, te, nest)
	}
	ps, ts := shapeOf(p), shapeOf(t)
	if ps.kind != ts.kind && !(collection(ps.kind) && collection(ts.kind)) {
		return false
	}
	switch ps.kind {
	case seq:
		return ps.open == ts.open && ps.close == ts.close && c.pairwise(ps.elems, ts.elems, nest)
	case list, set:
		pe, te := ps.elems, ts.elems
		if ps.kind == set && ts.kind == set { // a set names each element once however often written; a list keeps its multiplicity (roots 1, 1, 2)
			pe, te = c.distinct(pe, nest), c.distinct(te, nest)
		}
		return c.multiset(pe, te, nest)
	}
	return sameExpr(p, t)
}

// collection reports whether answers of a kind are compared in any order: a list of answers and
// a set are the same answer ("3, 7" and \{7, 3\}).
func collection(kind int) bool { return kind == list || kind == set }

// distinct drops the elements equal to an earlier one: a set names each once however often it
// is written.
func (c *comparer) distinct(elems []string, nest int) []string {
	if len(elems) > maxElems {
		return elems
	}
	var out []string
	for _, e := range elems {
		dup := false
		for _, o := range out {
			if strings.EqualFold(e, o) || c.equal(e, o, nest+1) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, e)
		}
	}
	return out
}

// approx reads an answer with "≈": an exact value followed by its approximation
// (\frac{\sqrt3}{3} ≈ 0.577, x = 1/3 ≈ 0.33) is the exact value; a name or nothing before it
// (x ≈ 3.14, ≈ 3.14) makes it the value after it.
func approx(s string) string {
	before, after, ok := strings.Cut(s, "≈")
	if !ok {
		return s
	}
	switch {
	case before == "":
		return after
	case labelOK(before):
		return before + "=" + after
	}
	return before
}

// pairwise compares two sequences element by element.
func (c *comparer) pairwise(a, b []string, nest int) bool {
	if len(a) != len(b) || len(a) > maxElems {
		return false
	}
	for i := range a {
		if !c.equal(a[i], b[i], nest+1) {
			return false
		}
	}
	return true
}

// multiset compares two collections in any order, each element of one matched to one of the other.
func (c *comparer) multiset(a, b []string, nest int) bool {
	if len(a) != len(b) || len(a) > maxElems {
		return false
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for j, y := range b {
			if !used[j] && c.equal(x, y, nest+1) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// equationSides splits an answer at its top-level "=" and "≈": a chain x = 5+6 = 11 keeps its
// first and last sides (the label and the value it ends at), one without either is one side.
func equationSides(s string) []string {
	parts := splitTop(s, "=")
	if len(parts) > 2 {
		parts = []string{parts[0], parts[len(parts)-1]}
	}
	return parts
}

// relation rewrites an inequality in one variable as the interval it describes (x ≥ 5 and
// 5 ≤ x as [5, inf), -2 ≤ x < 7 as [-2, 7)) and a membership x ∈ S as S, so that every notation of
// the same set compares equal; anything else is returned as it is.
func relation(s string) string {
	if x, set, ok := strings.Cut(s, "∈"); ok && labelOK(x) {
		return set
	}
	var parts []string
	var ops []string
	from := 0
	for i := 0; i < len(s); {
		op, n := relOp(s[i:])
		if n == 0 {
			i++
			continue
		}
		parts, ops = append(parts, s[from:i]), append(ops, op)
		i += n
		from = i
	}
	parts = append(parts, s[from:])
	if len(ops) == 0 || len(ops) > 2 || depth(s) > 0 && strings.ContainsAny(s, "([") && !relBalanced(parts) {
		return s
	}
	bound := func(op string, lower bool) (open string) {
		strict := op == "<" || op == ">"
		switch {
		case lower && strict:
			return "("
		case lower:
			return "["
		case strict:
			return ")"
		}
		return "]"
	}
	switch len(ops) {
	case 1:
		v, a, op := parts[0], parts[1], ops[0]
		if neg, ok := strings.CutPrefix(v, "-"); ok && labelOK(neg) && numericText(a) { // -x > -1 is x < 1
			v, a, op = neg, "-("+a+")", flip(op)
			if n, ok := numeric(a); ok && n.r != nil {
				a = n.r.RatString()
			}
		}
		if !labelOK(v) {
			if !labelOK(a) {
				return s
			}
			v, a, op = a, v, flip(op)
		}
		if op == ">" || op == "≥" {
			return bound(op, true) + a + ", inf)"
		}
		return "(-inf, " + a + bound(op, false)
	case 2:
		lo, v, hi := parts[0], parts[1], parts[2]
		o1, o2 := ops[0], ops[1]
		if !labelOK(v) {
			return s
		}
		if (o1 == ">" || o1 == "≥") && (o2 == ">" || o2 == "≥") { // 7 > x ≥ -2
			lo, hi, o1, o2 = hi, lo, flip(o2), flip(o1)
		}
		if (o1 != "<" && o1 != "≤") || (o2 != "<" && o2 != "≤") {
			return s
		}
		return bound(o1, true) + lo + ", " + hi + bound(o2, false)
	}
	return s
}

// numericText reports whether s is a constant expression (no variable).
func numericText(s string) bool {
	_, ok := numeric(s)
	return ok
}

// relOp is the relation at the start of s and its length in bytes, or 0.
func relOp(s string) (string, int) {
	for _, op := range []string{"≤", "≥", "<", ">"} {
		if strings.HasPrefix(s, op) {
			return op, len(op)
		}
	}
	return "", 0
}

// flip is the relation read from the other side: a < x is x > a.
func flip(op string) string {
	return map[string]string{"<": ">", ">": "<", "≤": "≥", "≥": "≤"}[op]
}

// relBalanced reports whether every side of a relation has balanced brackets (a relation inside
// a tuple is not one relation).
func relBalanced(parts []string) bool {
	for _, p := range parts {
		if p == "" || closesAll(p) != 0 {
			return false
		}
	}
	return true
}

// closesAll is the bracket depth at the end of s (0 when balanced).
func closesAll(s string) int {
	d := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			d++
		case ')', ']', '}':
			d--
		}
	}
	return d
}

// shapeOf reads what kind of answer a normalised string is. A ± expands a scalar or a list
// element into its two values.
func shapeOf(s string) shape {
	if inner, ok := strings.CutPrefix(s, "matrix("); ok && closes(s[len("matrix"):]) == len(s)-len("matrix")-1 {
		return shape{kind: seq, open: 'm', close: 'm', elems: splitTop(inner[:len(inner)-1], ",")}
	}
	if strings.HasPrefix(s, `\{`) && strings.HasSuffix(s, `\}`) && closes(s) == len(s)-2 {
		inner := s[2 : len(s)-2]
		if inner == "" {
			return shape{kind: set}
		}
		return shape{kind: set, elems: expandPM(splitTop(inner, ","))}
	}
	if len(s) >= 2 && (s[0] == '(' || s[0] == '[') && (s[len(s)-1] == ')' || s[len(s)-1] == ']') && closes(s) == len(s)-1 {
		if elems := splitTop(s[1:len(s)-1], ","); len(elems) >= 2 {
			return shape{kind: seq, open: s[0], close: s[len(s)-1], elems: elems}
		}
	}
	elems := expandPM(splitTop(s, ","))
	if len(elems) >= 2 {
		return shape{kind: list, elems: elems}
	}
	return shape{kind: scalar}
}

// closes is the index of the bracket that closes the one opening s, or -1: ( and [ close with
// either ) or ], \{ with \}.
func closes(s string) int {
	d := 0
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], `\{`):
			d++
			i++
		case strings.HasPrefix(s[i:], `\}`):
			d--
			if d == 0 {
				return i
			}
			i++
		case s[i] == '(' || s[i] == '[':
			d++
		case s[i] == ')' || s[i] == ']':
			d--
			if d == 0 {
				return i
			}
		}
	}
	return -1
}

// splitTop splits s at the separator where it is outside every bracket, trimming the parts.
func splitTop(s, sep string) []string {
	var parts []string
	d, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], `\{`):
			d++
			i++
		case strings.HasPrefix(s[i:], `\}`):
			d--
			i++
		case s[i] == '(' || s[i] == '[':
			d++
		case s[i] == ')' || s[i] == ']':
			d--
		case d == 0 && strings.HasPrefix(s[i:], sep):
			parts = append(parts, strings.TrimSpace(s[from:i]))
			from = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(parts, strings.TrimSpace(s[from:]))
}

// expandPM replaces each element a±b by a+(b) and a-(b) (one ± per element; more are text).
func expandPM(elems []string) []string {
	var out []string
	for _, e := range elems {
		parts := splitTop(e, "±")
		if len(parts) != 2 || parts[1] == "" {
			out = append(out, e)
			continue
		}
		out = append(out, parts[0]+"+("+parts[1]+")", parts[0]+"-("+parts[1]+")")
	}
	return out
}

var varNameRE = regexp.MustCompile(`^(?:[A-Za-z]|alpha|beta|gamma|delta|theta|lambda|mu|phi|omega|sigma|tau|rho)(?:_[0-9]+|_[A-Za-z]|_\([A-Za-z0-9]+\))?$`)

// labelRE is the left side of a labelled answer, whose value is its right side: a variable name,
// a function of names or numbers (f(x), P(3)), a length |AB|, a named segment or angle (AB,
// angleABC), a tuple of names ((p, q)), a subscripted name (a_(10)).
var labelRE = regexp.MustCompile(`^(?:` +
	`(?:[A-Za-z]|alpha|beta|gamma|delta|theta|lambda|mu|phi|omega|sigma|tau|rho)(?:_[0-9]+|_[A-Za-z]|_\([A-Za-z0-9]+\))?` +
	`|[A-Za-z]{1,3}(?:_[0-9A-Za-z]+|_\([A-Za-z0-9]+\))?\((?:[A-Za-z0-9]+)(?:, [A-Za-z0-9]+)*\)` +
	`|\|[A-Za-z]{1,4}\||[A-Z]{2,4}|(?:m)?angle[A-Z]{1,3}` +
	`|\((?:[A-Za-z](?:_[0-9]+)?)(?:, [A-Za-z](?:_[0-9]+)?)+\)` +
	`)$`)

// labelPartRE is one name in a label: a variable, a segment or angle, a function application,
// a length, each with an optional subscript.
var labelPartRE = regexp.MustCompile(`^(?:[A-Za-z]{1,4}|alpha|beta|gamma|delta|theta|lambda|mu|phi|omega|sigma|tau|rho|m?angle[A-Z]{1,3})` +
	`(?:_[0-9]+|_[A-Za-z]|_\([A-Za-z0-9]+\))?(?:\((?:[A-Za-z0-9]+)(?:, [A-Za-z0-9]+)*\))?$`)

// labelOK reports whether s names what an answer's value is of, so that "s = value" is the value:
// a label (labelRE), or names combined by : / + - * (a+b = 12, V_1:V_2 = 11:21, NO/BO = …), with no
// number outside a subscript or a function's argument.
func labelOK(s string) bool {
	if labelRE.MatchString(s) {
		return true
	}
	if len(s) > 64 {
		return false
	}
	for len(s) >= 2 && s[0] == '(' && closes(s) == len(s)-1 {
		s = s[1 : len(s)-1]
	}
	parts := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(":/+-*", r) })
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		for len(p) >= 2 && (p[0] == '(' && p[len(p)-1] == ')' && closes(p) == len(p)-1 || p[0] == '|' && p[len(p)-1] == '|') {
			p = p[1 : len(p)-1]
		}
		if !labelPartRE.MatchString(p) {
			return false
		}
	}
	return true
}

// equation compares two answers of which one or both are equations (their splits at "="): two
// equations by their right sides when the left sides are the same (or each side the other's),
// an equation whose left side is one variable name against a non-equation by its right side.
func (c *comparer) equation(pe, te []string, nest int) bool {
	switch {
	case len(pe) == 2 && len(te) == 2:
		if strings.EqualFold(pe[0], te[0]) && c.equal(pe[1], te[1], nest+1) {
			return true
		}
		if strings.EqualFold(pe[0], te[1]) && strings.EqualFold(pe[1], te[0]) {
			return true
		}
		return sameEquation(pe[0], pe[1], te[0], te[1]) // the same relation up to a factor
	case len(pe) == 2 && len(te) == 1:
		return labelOK(pe[0]) && c.equal(pe[1], te[0], nest+1)
	case len(pe) == 1 && len(te) == 2:
		return labelOK(te[0]) && c.equal(pe[0], te[1], nest+1)
	}
	return false
}
