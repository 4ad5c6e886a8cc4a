package mathverify

import (
	"errors"
	"hash/fnv"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
)

// node is an expression tree over a normalised answer.
type node struct {
	op   byte // 'n' number, 'v' variable, 'c' constant (pi, e, inf), 'f' function, '+', '-', '*', '/', '^', 'u' negation, '!' factorial
	num  *big.Rat
	name string
	kids []*node
}

var errParse = errors.New("not an expression")

// functions are the names parsed as one-argument functions.
var functions = []string{"arcsin", "arccos", "arctan", "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "ln", "log", "exp"}

// names are the other multi-letter words: constants and Greek letters used as variables.
var names = []string{"alpha", "beta", "gamma", "delta", "epsilon", "theta", "lambda", "sigma", "omega", "varphi", "phi", "tau", "rho", "mu", "pi", "inf"}

// parser is a recursive-descent parser of normalised expressions: + - * / ^ !, parentheses and
// brackets, implicit multiplication, functions, variables with subscripts.
type parser struct {
	s     string
	i     int
	depth int
	vars  map[string]bool
	inf   bool // an inf literal appears
}

// parseExpr parses a whole normalised expression.
func parseExpr(s string) (*node, *parser, error) {
	p := &parser{s: s, vars: map[string]bool{}}
	n, err := p.sum()
	if err != nil {
		return nil, nil, err
	}
	if p.i != len(p.s) {
		return nil, nil, errParse
	}
	return n, p, nil
}

func (p *parser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > 4*maxDepth {
		return errParse
	}
	return nil
}

func (p *parser) sum() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l, err := p.product()
	if err != nil {
		return nil, err
	}
	for c := p.peek(); c == '+' || c == '-'; c = p.peek() {
		p.i++
		r, err := p.product()
		if err != nil {
			return nil, err
		}
		l = &node{op: c, kids: []*node{l, r}}
	}
	return l, nil
}

func (p *parser) product() (*node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		c := p.peek()
		switch {
		case c == '*' || c == '/':
			p.i++
			r, err := p.unary()
			if err != nil {
				return nil, err
			}
			l = &node{op: c, kids: []*node{l, r}}
		case startsPrimary(c):
			r, err := p.power()
			if err != nil {
				return nil, err
			}
			l = &node{op: '*', kids: []*node{l, r}}
		default:
			return l, nil
		}
	}
}

func startsPrimary(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == '(' || c == '[' || isLetter(c)
}

func (p *parser) unary() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	switch p.peek() {
	case '-':
		p.i++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &node{op: 'u', kids: []*node{x}}, nil
	case '+':
		p.i++
		return p.unary()
	}
	return p.power()
}

func (p *parser) power() (*node, error) {
	b, err := p.postfix()
	if err != nil {
		return nil, err
	}
	if p.peek() != '^' {
		return b, nil
	}
	p.i++
	var e *node
	if c := p.peek(); c >= '0' && c <= '9' { // 2^10: every digit, as plain text writes it
		e, err = p.number()
	} else {
		e, err = p.unary()
	}
	if err != nil {
		return nil, err
	}
	return &node{op: '^', kids: []*node{b, e}}, nil
}

func (p *parser) postfix() (*node, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for p.peek() == '!' {
		p.i++
		x = &node{op: '!', kids: []*node{x}}
	}
	return x, nil
}

func (p *parser) primary() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	c := p.peek()
	switch {
	case c >= '0' && c <= '9' || c == '.':
		return p.number()
	case c == '(' || c == '[':
		p.i++
		x, err := p.sum()
		if err != nil {
			return nil, err
		}
		if c := p.peek(); c != ')' && c != ']' {
			return nil, errParse
		}
		p.i++
		return x, nil
	case isLetter(c):
		return p.word()
	}
	return nil, errParse
}

func (p *parser) number() (*node, error) {
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	if j < len(p.s) && p.s[j] == '.' {
		j++
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
	}
	text := p.s[p.i:j]
	if text == "." || len(text) > 400 {
		return nil, errParse
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return nil, errParse
	}
	p.i = j
	return &node{op: 'n', num: r}, nil
}

// word reads a function application, a constant or a variable. A run of three or more letters
// that are not known words is text, not a product of variables ("Monday").
func (p *parser) word() (*node, error) {
	rest := p.s[p.i:]
	for _, f := range functions {
		if strings.HasPrefix(rest, f) {
			p.i += len(f)
			var arg, exp *node
			var err error
			if p.peek() == '^' { // sin^2 x, sec^(2)y: a power of the function's value
				if exp, err = p.functionPower(); err != nil {
					return nil, err
				}
			}
			if p.peek() == '(' || p.peek() == '[' {
				arg, err = p.primary()
			} else {
				arg, err = p.power()
			}
			if err != nil {
				return nil, err
			}
			call := &node{op: 'f', name: f, kids: []*node{arg}}
			if exp != nil {
				return &node{op: '^', kids: []*node{call, exp}}, nil
			}
			return call, nil
		}
	}
	for _, n := range names {
		if strings.HasPrefix(rest, n) {
			p.i += len(n)
			switch n {
			case "pi":
				return &node{op: 'c', name: n}, nil
			case "inf":
				p.inf = true
				return &node{op: 'c', name: n}, nil
			}
			return p.variable(n)
		}
	}
	// A single letter. Count the run of unknown letters it starts.
	run := 0
	for j := p.i; j < len(p.s) && isLetter(p.s[j]) && !knownAt(p.s[j:]); j++ {
		run++
	}
	if run >= 3 {
		return nil, errParse
	}
	name := p.s[p.i : p.i+1]
	p.i++
	if name == "e" && p.peek() != '_' {
		return &node{op: 'c', name: "e"}, nil
	}
	return p.variable(name)
}

// functionPower reads the exponent written between a function's name and its argument, a whole
// number, bare or in parentheses (sin^2 x, sin^(2)x). Any other (sin^(-1) x, which may mean
// arcsin) does not parse, so the answer is compared as text.
func (p *parser) functionPower() (*node, error) {
	p.i++ // the ^
	paren := p.peek() == '('
	if paren {
		p.i++
	}
	if c := p.peek(); c < '0' || c > '9' {
		return nil, errParse
	}
	e, err := p.number()
	if err != nil || !e.num.IsInt() {
		return nil, errParse
	}
	if paren {
		if p.peek() != ')' {
			return nil, errParse
		}
		p.i++
	}
	return e, nil
}

// knownAt reports whether a known word starts s.
func knownAt(s string) bool {
	for _, w := range functions {
		if strings.HasPrefix(s, w) {
			return true
		}
	}
	for _, w := range names {
		if strings.HasPrefix(s, w) {
			return true
		}
	}
	return false
}

// variable reads an optional subscript (_1, _n, _(12)) after a variable's name.
func (p *parser) variable(name string) (*node, error) {
	if p.peek() == '_' {
		j := p.i + 1
		switch {
		case j < len(p.s) && p.s[j] == '(':
			k := strings.IndexByte(p.s[j:], ')')
			if k < 0 {
				return nil, errParse
			}
			j += k + 1
		case j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9':
			for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
				j++
			}
		case j < len(p.s) && isLetter(p.s[j]):
			j++
		default:
			return nil, errParse
		}
		name += p.s[p.i:j]
		p.i = j
	}
	p.vars[name] = true
	return &node{op: 'v', name: name}, nil
}

// value is an evaluated number: exact when r is not nil, else the float f.
type value struct {
	r *big.Rat
	f float64
}

func exact(r *big.Rat) value {
	f, _ := r.Float64()
	return value{r: r, f: f}
}

func inexact(f float64) value { return value{f: f} }

// maxBits bounds the size of an exact rational; a larger one is carried as a float.
const maxBits = 4096

func bounded(r *big.Rat) value {
	if r.Num().BitLen() > maxBits || r.Denom().BitLen() > maxBits {
		f, _ := r.Float64()
		return inexact(f)
	}
	return exact(r)
}

var errValue = errors.New("no value")

// eval computes n with the variables' values in env (nil when there are none).
func eval(n *node, env map[string]float64, d int) (value, error) {
	if d > MaxLen { // a tree is never deeper than its text is long; this only guards
		return value{}, errValue
	}
	switch n.op {
	case 'n':
		return exact(n.num), nil
	case 'v':
		f, ok := env[n.name]
		if !ok {
			return value{}, errValue
		}
		return inexact(f), nil
	case 'c':
		switch n.name {
		case "pi":
			return inexact(math.Pi), nil
		case "e":
			return inexact(math.E), nil
		}
		return inexact(math.Inf(1)), nil
	}
	a, err := eval(n.kids[0], env, d+1)
	if err != nil {
		return value{}, err
	}
	switch n.op {
	case 'u':
		if a.r != nil {
			return exact(new(big.Rat).Neg(a.r)), nil
		}
		return inexact(-a.f), nil
	case '!':
		if a.r == nil || !a.r.IsInt() || a.r.Sign() < 0 || a.r.Num().Cmp(big.NewInt(300)) > 0 {
			return value{}, errValue
		}
		return exact(new(big.Rat).SetInt(new(big.Int).MulRange(1, a.r.Num().Int64()))), nil
	case 'f':
		return apply(n.name, a)
	}
	b, err := eval(n.kids[1], env, d+1)
	if err != nil {
		return value{}, err
	}
	if a.r != nil && b.r != nil {
		switch n.op {
		case '+':
			return bounded(new(big.Rat).Add(a.r, b.r)), nil
		case '-':
			return bounded(new(big.Rat).Sub(a.r, b.r)), nil
		case '*':
			return bounded(new(big.Rat).Mul(a.r, b.r)), nil
		case '/':
			if b.r.Sign() == 0 {
				return value{}, errValue
			}
			return bounded(new(big.Rat).Quo(a.r, b.r)), nil
		case '^':
			if v, ok := exactPow(a.r, b.r); ok {
				return v, nil
			}
		}
	}
	switch n.op {
	case '+':
		return inexact(a.f + b.f), nil
	case '-':
		return inexact(a.f - b.f), nil
	case '*':
		return inexact(a.f * b.f), nil
	case '/':
		if b.f == 0 {
			return value{}, errValue
		}
		return inexact(a.f / b.f), nil
	}
	return inexact(math.Pow(a.f, b.f)), nil
}

// exactPow is a^b when it is rational and small: an integer power, or a root that comes out even
// (8^(1/3) = 2).
func exactPow(a, b *big.Rat) (value, bool) {
	if b.Denom().BitLen() > 7 || b.Num().BitLen() > 12 { // |p| < 4096, q < 128
		return value{}, false
	}
	p, q := b.Num().Int64(), b.Denom().Int64()
	base := a
	if q != 1 {
		if a.Sign() < 0 && q%2 == 0 {
			return value{}, false
		}
		num, ok1 := intRoot(a.Num(), q)
		den, ok2 := intRoot(a.Denom(), q)
		if !ok1 || !ok2 {
			return value{}, false
		}
		base = new(big.Rat).SetFrac(num, den)
	}
	neg := p < 0
	if neg {
		p = -p
		if base.Sign() == 0 {
			return value{}, false
		}
	}
	if int64(max(base.Num().BitLen(), base.Denom().BitLen()))*p > maxBits {
		return value{}, false
	}
	num := new(big.Int).Exp(base.Num(), big.NewInt(p), nil)
	den := new(big.Int).Exp(base.Denom(), big.NewInt(p), nil)
	r := new(big.Rat).SetFrac(num, den)
	if neg {
		r.Inv(r)
	}
	return exact(r), true
}

// intRoot is the exact q-th root of x (negative x for odd q), if x is a perfect q-th power.
func intRoot(x *big.Int, q int64) (*big.Int, bool) {
	if x.Sign() < 0 {
		r, ok := intRoot(new(big.Int).Neg(x), q)
		if !ok {
			return nil, false
		}
		return r.Neg(r), true
	}
	if x.BitLen() > 1024 {
		return nil, false
	}
	f, _ := new(big.Float).SetInt(x).Float64()
	guess := int64(math.Round(math.Pow(f, 1/float64(q))))
	for _, g := range []int64{guess - 1, guess, guess + 1} {
		if g < 0 {
			continue
		}
		r := big.NewInt(g)
		if new(big.Int).Exp(r, big.NewInt(q), nil).Cmp(x) == 0 {
			return r, true
		}
	}
	if x.BitLen() > 62 && q == 2 {
		r := new(big.Int).Sqrt(x)
		if new(big.Int).Mul(r, r).Cmp(x) == 0 {
			return r, true
		}
	}
	return nil, false
}

// apply computes a one-argument function.
func apply(name string, a value) (value, error) {
	if name == "sqrt" {
		if a.r != nil {
			if a.r.Sign() < 0 {
				return value{}, errValue
			}
			if v, ok := exactPow(a.r, big.NewRat(1, 2)); ok {
				return v, nil
			}
		}
		return inexact(math.Sqrt(a.f)), nil
	}
	x := a.f
	var f float64
	switch name {
	case "sin":
		f = math.Sin(x)
	case "cos":
		f = math.Cos(x)
	case "tan":
		f = math.Tan(x)
	case "cot":
		f = 1 / math.Tan(x)
	case "sec":
		f = 1 / math.Cos(x)
	case "csc":
		f = 1 / math.Sin(x)
	case "arcsin":
		f = math.Asin(x)
	case "arccos":
		f = math.Acos(x)
	case "arctan":
		f = math.Atan(x)
	case "ln":
		f = math.Log(x)
	case "log":
		f = math.Log10(x)
	case "exp":
		f = math.Exp(x)
	}
	return inexact(f), nil
}

// relTol and absTol are the tolerance of a comparison where either side is irrational.
const (
	relTol = 1e-9
	absTol = 1e-12
)

// same compares two values: exactly when both are rational, else to the tolerance.
func same(a, b value) bool {
	if a.r != nil && b.r != nil {
		return a.r.Cmp(b.r) == 0
	}
	return close(a.f, b.f)
}

func close(x, y float64) bool {
	if math.IsNaN(x) || math.IsNaN(y) {
		return false
	}
	if math.IsInf(x, 0) || math.IsInf(y, 0) {
		return x == y
	}
	d := math.Abs(x - y)
	return d <= absTol || d <= relTol*max(math.Abs(x), math.Abs(y))
}

// usable reports whether v is a value a comparison may use: finite, or infinite only where the
// expression wrote inf (so an overflow does not pass for infinity).
func usable(v value, inf bool) bool {
	if v.r != nil {
		return true
	}
	return !math.IsNaN(v.f) && (inf || !math.IsInf(v.f, 0))
}

// points is how many points expressions with variables are compared at, and minPoints how many
// of them must give both sides a value.
const (
	points    = 6
	minPoints = 3
	maxVars   = 8
)

// sample is the value of variable name at point k: fixed pseudo-random numbers, the same for
// every comparison, positive at the first points and of either sign at the rest.
func sample(name string, k int) float64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(k)))
	v := 0.25 + 2.5*rng.Float64()
	if k >= points/2 && rng.IntN(2) == 0 {
		v = -v
	}
	return v
}

// sameExpr reports whether two normalised expressions have the same value: exactly or to the
// tolerance without variables, at every sampled point with them.
func sameExpr(a, b string) bool {
	na, pa, err := parseExpr(a)
	if err != nil {
		return false
	}
	nb, pb, err := parseExpr(b)
	if err != nil {
		return false
	}
	vars := unionVars(pa, pb)
	if len(vars) == 0 {
		va, err1 := eval(na, nil, 0)
		vb, err2 := eval(nb, nil, 0)
		return err1 == nil && err2 == nil && usable(va, pa.inf) && usable(vb, pb.inf) && same(va, vb)
	}
	inf := pa.inf || pb.inf
	return len(vars) <= maxVars && atPoints(na, nb, vars, func(va, vb value) (use, agree bool) {
		if !usable(va, inf) || !usable(vb, inf) {
			return false, true
		}
		return true, close(va.f, vb.f)
	})
}

// sameEquation reports whether two equations a1 = a2 and b1 = b2 in variables describe the same
// relation up to a constant factor: (a1 - a2) / (b1 - b2) takes one nonzero value at every
// sample point (2x+4y-3 = 0 and y = -x/2 + 3/4).
func sameEquation(a1, a2, b1, b2 string) bool {
	na, pa, err := parseExpr("(" + a1 + ")-(" + a2 + ")")
	if err != nil {
		return false
	}
	nb, pb, err := parseExpr("(" + b1 + ")-(" + b2 + ")")
	if err != nil {
		return false
	}
	vars := unionVars(pa, pb)
	if len(vars) == 0 || len(vars) > maxVars || pa.inf || pb.inf {
		return false
	}
	ratio, seen := 0.0, false
	return atPoints(na, nb, vars, func(va, vb value) (use, agree bool) {
		if !usable(va, false) || !usable(vb, false) || va.f == 0 || vb.f == 0 {
			return false, true
		}
		r := va.f / vb.f
		if seen && !close(r, ratio) {
			return true, false
		}
		ratio, seen = r, true
		return true, true
	})
}

// unionVars are the variables of either parsed expression.
func unionVars(pa, pb *parser) map[string]bool {
	vars := map[string]bool{}
	for v := range pa.vars {
		vars[v] = true
	}
	for v := range pb.vars {
		vars[v] = true
	}
	return vars
}

// atPoints evaluates na and nb at each sample point of vars and asks check of the two values
// whether the point counts (use) and whether they agree there; it is true when no counted point
// disagrees and at least minPoints counted (a point where either fails to evaluate never counts).
func atPoints(na, nb *node, vars map[string]bool, check func(va, vb value) (use, agree bool)) bool {
	valid := 0
	for k := range points {
		env := map[string]float64{}
		for v := range vars {
			env[v] = sample(v, k)
		}
		va, err1 := eval(na, env, 0)
		vb, err2 := eval(nb, env, 0)
		if err1 != nil || err2 != nil {
			continue
		}
		use, agree := check(va, vb)
		if !use {
			continue
		}
		if !agree {
			return false
		}
		valid++
	}
	return valid >= minPoints
}

// numeric is the value of a normalised answer that is a constant expression.
func numeric(s string) (value, bool) {
	n, p, err := parseExpr(s)
	if err != nil || len(p.vars) > 0 {
		return value{}, false
	}
	v, err := eval(n, nil, 0)
	if err != nil || !usable(v, p.inf) {
		return value{}, false
	}
	return v, true
}
