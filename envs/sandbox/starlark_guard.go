package sandbox

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Starlark has step and cancellation limits but no memory limit, and a single operation
// ([0] * 10**9, "".join([s] * 10**4), x * x on a huge integer) can allocate gigabytes or run
// for minutes where cancellation cannot reach it. The guard closes that gap in-process:
//
//   - the parsed program is rewritten so that every operation that can build a large value goes
//     through a checking builtin first: binary + * % (and their augmented forms), slices,
//     attribute loads (string and collection methods), and the builtins that materialise an
//     iterable (list, tuple, sorted, dict, set, enumerate, zip, str, repr, print, …);
//   - each check estimates the bytes the operation builds — before building it wherever one step
//     can multiply sizes (repetition, replace, join, format, materialising a range) — and charges
//     them to the call's allocation budget (Limits.MaxMemoryMB); going over stops the call;
//   - integers are capped at maxIntBits bits, int() parses at most maxIntDigits digits, and
//     pow's work is bounded, so no single arithmetic step runs for long.
//
// Guard names start with "$", which no Starlark identifier can, so code cannot rebind them.
// The budget counts bytes built (not live bytes), a conservative measure: quadratic string
// building (s = s + t in a long loop) is charged for every intermediate string. Plain appends,
// dict stores and comprehensions build a bounded amount per execution step and are left to the
// step limit.
const (
	maxIntBits   = 1 << 22 // about 1.26 million decimal digits
	maxIntDigits = 100_000 // int("…") parses are quadratic in Go's math/big
	maxCodeBytes = 256 << 10
	reprDepth    = 64 // nesting walked when estimating a value's printed size
)

// budgetKey is the thread-local key of the call's *allocBudget.
const budgetKey = "agentrl.alloc-budget"

// allocBudget counts the bytes that guarded operations built during one call.
type allocBudget struct {
	limit, used int64
	over        string // set once the budget was exceeded: what went over
}

func (b *allocBudget) remaining() int64 { return max(b.limit-b.used, 0) }

// charge adds n bytes built by what; over the limit it records why and fails.
func (b *allocBudget) charge(n int64, what string) error {
	if n <= 0 {
		return nil
	}
	if n > b.remaining() {
		b.over = fmt.Sprintf("memory limit: %s would build about %s (at most %d MiB per call)", what, humanBytes(n), b.limit>>20)
		if b.used > 0 {
			b.over = fmt.Sprintf("memory limit: %s would build about %s after %s already (at most %d MiB per call)", what, humanBytes(n), humanBytes(b.used), b.limit>>20)
		}
		return errors.New(b.over)
	}
	b.used += n
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func budgetOf(th *starlark.Thread) *allocBudget {
	if b, ok := th.Local(budgetKey).(*allocBudget); ok {
		return b
	}
	return &allocBudget{limit: math.MaxInt64} // never reached: Run always sets one
}

// mulSat multiplies non-negative sizes, saturating instead of overflowing.
func mulSat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// slotsOf is the shallow size of a value: the bytes of a string, the element slots of a
// collection (not what the elements point to), the bytes of an integer. Lazy values (range)
// count as small.
func slotsOf(v starlark.Value) int64 {
	switch x := v.(type) {
	case starlark.String:
		return int64(len(x))
	case starlark.Bytes:
		return int64(len(x))
	case starlark.Int:
		return int64(x.BigInt().BitLen()/8 + 8)
	case *starlark.List:
		return mulSat(int64(x.Len()), 16)
	case starlark.Tuple:
		return mulSat(int64(len(x)), 16)
	case *starlark.Dict:
		return mulSat(int64(x.Len()), 64)
	case *starlark.Set:
		return mulSat(int64(x.Len()), 64)
	}
	return 16
}

// sizeOf is the size of a freshly built value: its slots plus, for a list or tuple, the strings
// in it (which a split builds along with the list).
func sizeOf(v starlark.Value) int64 {
	var elems starlark.Indexable
	switch x := v.(type) {
	case *starlark.List:
		elems = x
	case starlark.Tuple:
		elems = x
	default:
		return slotsOf(v)
	}
	size := slotsOf(v)
	for i := 0; i < elems.Len(); i++ {
		if s, ok := elems.Index(i).(starlark.String); ok {
			size = addSat(size, int64(len(s))+16)
		}
	}
	return size
}

// reprSize estimates the length of str(v), stopping early once it passes limit. Shared
// references count each time they are printed ([s] * 1000 prints s a thousand times).
func reprSize(v starlark.Value, limit int64, depth int) int64 {
	if depth > reprDepth || limit <= 0 {
		return 8
	}
	switch x := v.(type) {
	case starlark.String:
		return int64(len(x)) + 2
	case starlark.Bytes:
		return int64(len(x))*4 + 3
	case starlark.Int:
		return int64(float64(x.BigInt().BitLen())*0.30103) + 2
	case *starlark.List, starlark.Tuple, *starlark.Dict, *starlark.Set:
		n := int64(2)
		it := x.(starlark.Iterable).Iterate()
		defer it.Done()
		d, isDict := x.(*starlark.Dict)
		var e starlark.Value
		for it.Next(&e) {
			n = addSat(n, reprSize(e, limit-n, depth+1)+2)
			if isDict {
				if val, found, _ := d.Get(e); found {
					n = addSat(n, reprSize(val, limit-n, depth+1)+2)
				}
			}
			if n > limit {
				return n
			}
		}
		return n
	}
	return int64(len(v.String()))
}

// guardNames are the predeclared guard builtins the rewrite calls.
const (
	gAdd    = "$+"
	gMul    = "$*"
	gMod    = "$%"
	gAddEq  = "$+="
	gMulEq  = "$*="
	gModEq  = "$%="
	gAttr   = "$attr"
	gCharge = "$charge"
)

// guardBuiltins returns the guards and the wrapped builtins that a session's globals start with.
func guardBuiltins() starlark.StringDict {
	d := starlark.StringDict{
		gAdd:    starlark.NewBuiltin(gAdd, binaryGuard(syntax.PLUS, false)),
		gMul:    starlark.NewBuiltin(gMul, binaryGuard(syntax.STAR, false)),
		gMod:    starlark.NewBuiltin(gMod, binaryGuard(syntax.PERCENT, false)),
		gAddEq:  starlark.NewBuiltin(gAddEq, binaryGuard(syntax.PLUS, true)),
		gMulEq:  starlark.NewBuiltin(gMulEq, binaryGuard(syntax.STAR, true)),
		gModEq:  starlark.NewBuiltin(gModEq, binaryGuard(syntax.PERCENT, true)),
		gAttr:   starlark.NewBuiltin(gAttr, attrGuard),
		gCharge: starlark.NewBuiltin(gCharge, chargeGuard),
		"pow":   starlark.NewBuiltin("pow", builtinPow),
		"int":   starlark.NewBuiltin("int", intGuard),
	}
	for name, unit := range map[string]int64{"list": 16, "tuple": 16, "sorted": 16, "reversed": 16, "set": 64, "dict": 64, "enumerate": 64, "zip": 48} {
		d[name] = starlark.NewBuiltin(name, materialiseGuard(name, unit))
	}
	for _, name := range []string{"str", "repr", "print"} {
		d[name] = starlark.NewBuiltin(name, printGuard(name))
	}
	d["getattr"] = starlark.NewBuiltin("getattr", getattrGuard)
	return d
}

// binaryGuard checks x op y before it is built. As an augmented assignment's guard (x op= y,
// rewritten to x op= $op=(x, y)) it charges only the growth and returns y unchanged.
func binaryGuard(op syntax.Token, augmented bool) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	what := "this " + map[syntax.Token]string{syntax.PLUS: "+", syntax.STAR: "*", syntax.PERCENT: "%"}[op]
	if augmented {
		what += "="
	}
	return func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) != 2 || len(kwargs) != 0 {
			return nil, fmt.Errorf("%s: internal guard called with %d arguments", b.Name(), len(args))
		}
		x, y := args[0], args[1]
		if err := checkBinary(budgetOf(th), op, x, y, augmented, what); err != nil {
			return nil, err
		}
		if augmented {
			return y, nil
		}
		return starlark.Binary(op, x, y)
	}
}

// checkBinary charges x op y: the whole result, or for an augmented assignment what it adds
// (s += t keeps s's growth linear in the budget even though each step copies s).
func checkBinary(bud *allocBudget, op syntax.Token, x, y starlark.Value, augmented bool, what string) error {
	xi, xInt := x.(starlark.Int)
	yi, yInt := y.(starlark.Int)
	if xInt && yInt {
		if _, ok := xi.Int64(); ok {
			if _, ok := yi.Int64(); ok {
				return nil // small integers: the common case, nothing to check
			}
		}
	}
	switch op {
	case syntax.PLUS:
		if xInt && yInt {
			return checkIntBits(max(xi.BigInt().BitLen(), yi.BigInt().BitLen())+1, what)
		}
		added := slotsOf(y)
		if _, isList := x.(*starlark.List); isList && augmented { // list += iterable extends
			added = mulSat(int64(max(starlark.Len(y), 0)), 16)
		}
		if augmented {
			return bud.charge(added, what)
		}
		return bud.charge(addSat(slotsOf(x), added), what)
	case syntax.STAR:
		if xInt && yInt {
			return checkIntBits(xi.BigInt().BitLen()+yi.BigInt().BitLen(), what)
		}
		seq, n := x, yi
		if xInt {
			seq, n = y, xi
		} else if !yInt {
			return nil // floats, or a type error: nothing large
		}
		switch seq.(type) {
		case starlark.String, starlark.Bytes, *starlark.List, starlark.Tuple:
		default:
			return nil // a float times an int
		}
		k, ok := n.Int64()
		if !ok {
			if n.Sign() < 0 {
				return nil
			}
			k = math.MaxInt64
		}
		if augmented {
			k--
		}
		return bud.charge(mulSat(slotsOf(seq), k), what)
	case syntax.PERCENT:
		f, ok := x.(starlark.String)
		if !ok {
			return nil
		}
		var args []starlark.Value
		switch a := y.(type) {
		case starlark.Tuple:
			args = a
		case *starlark.Dict:
			for _, kv := range a.Items() {
				args = append(args, kv[1])
			}
		default:
			args = []starlark.Value{y}
		}
		return bud.charge(formatSize(string(f), "%", args, bud.remaining()), what+" formatting")
	}
	return nil
}

func checkIntBits(bits int, what string) error {
	if bits > maxIntBits {
		return fmt.Errorf("%s would make an integer of about %d bits; integers are limited to %d bits (about 1.26 million digits)", what, bits, maxIntBits)
	}
	return nil
}

// formatSize bounds the length of a format string's result: its own length plus, for each
// placeholder, the largest printed argument.
func formatSize(f, mark string, args []starlark.Value, limit int64) int64 {
	var widest int64
	for _, a := range args {
		widest = max(widest, reprSize(a, limit, 0))
	}
	return addSat(int64(len(f)), mulSat(int64(strings.Count(f, mark)), widest))
}

// chargeGuard charges a freshly built value (a slice) and returns it.
func chargeGuard(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%s: internal guard called with %d arguments", b.Name(), len(args))
	}
	if err := budgetOf(th).charge(slotsOf(args[0]), "this slice"); err != nil {
		return nil, err
	}
	return args[0], nil
}

// attrGuard implements x.name: string and collection methods come back wrapped so that their
// calls are charged.
func attrGuard(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("%s: internal guard called with %d arguments", b.Name(), len(args))
	}
	name, _ := starlark.AsString(args[1])
	return getAttr(args[0], name)
}

// getAttr is Starlark's x.name (same messages) with methods wrapped by guardMethod.
func getAttr(x starlark.Value, name string) (starlark.Value, error) {
	ha, ok := x.(starlark.HasAttrs)
	if !ok {
		return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
	}
	v, err := ha.Attr(name)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
	}
	if m, ok := v.(*starlark.Builtin); ok && m.Receiver() != nil {
		return guardMethod(m), nil
	}
	return v, nil
}

func getattrGuard(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var object, dflt starlark.Value
	var name string
	if err := starlark.UnpackPositionalArgs("getattr", args, kwargs, 2, &object, &name, &dflt); err != nil {
		return nil, err
	}
	v, err := getAttr(object, name)
	if err != nil {
		if dflt != nil {
			return dflt, nil
		}
		return nil, err
	}
	return v, nil
}

// guardMethod wraps a bound method of a built-in type: the methods that can multiply sizes in
// one call are checked first; those that build new values are charged afterwards.
func guardMethod(m *starlark.Builtin) *starlark.Builtin {
	recv, name := m.Receiver(), m.Name()
	return starlark.NewBuiltin(name, func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		bud := budgetOf(th)
		what := "this ." + name + "()"
		pre := int64(-1) // -1: charge the result afterwards
		switch s := recv.(type) {
		case starlark.String:
			switch name {
			case "join":
				if len(args) == 1 {
					pre = joinSize(string(s), args[0], bud.remaining())
				}
			case "replace":
				if len(args) >= 2 {
					pre = replaceSize(string(s), args)
				}
			case "format":
				vals := append([]starlark.Value(nil), args...)
				for _, kv := range kwargs {
					vals = append(vals, kv[1])
				}
				pre = formatSize(string(s), "{", vals, bud.remaining())
			case "count", "find", "rfind", "index", "rindex", "startswith", "endswith":
				pre = 0
			}
		case *starlark.List:
			switch name {
			case "extend":
				pre = 0
				if len(args) == 1 {
					pre = mulSat(int64(max(starlark.Len(args[0]), 0)), 16)
				}
			default: // append, insert, pop, remove, index, clear: nothing new, or a bounded amount
				pre = 0
			}
		case *starlark.Dict:
			switch name {
			case "items", "keys", "values":
				pre = mulSat(int64(s.Len()), 64)
			case "update":
				pre = 0
				if len(args) == 1 {
					pre = mulSat(int64(max(starlark.Len(args[0]), 0)), 64)
				}
			default:
				pre = 0
			}
		}
		if pre >= 0 {
			if err := bud.charge(pre, what); err != nil {
				return nil, err
			}
		}
		v, err := starlark.Call(th, m, args, kwargs)
		if err != nil || pre >= 0 {
			return v, err
		}
		if err := bud.charge(sizeOf(v), what); err != nil {
			return nil, err
		}
		return v, nil
	})
}

// joinSize is the length of sep.join(iterable), stopping once it passes limit; it stops at the
// first element that is not a string (join itself then reports the error).
func joinSize(sep string, iterable starlark.Value, limit int64) int64 {
	it, ok := iterable.(starlark.Iterable)
	if !ok {
		return 0
	}
	if n := starlark.Len(iterable); n > 0 && mulSat(int64(n), int64(len(sep))) > limit {
		return mulSat(int64(n), int64(len(sep)))
	}
	iter := it.Iterate()
	defer iter.Done()
	var total int64
	var e starlark.Value
	for iter.Next(&e) {
		s, ok := e.(starlark.String)
		if !ok {
			break
		}
		total = addSat(total, int64(len(s)+len(sep)))
		if total > limit {
			break
		}
	}
	return total
}

// replaceSize is the length of s.replace(old, new[, count]).
func replaceSize(s string, args starlark.Tuple) int64 {
	old, ok1 := starlark.AsString(args[0])
	repl, ok2 := starlark.AsString(args[1])
	if !ok1 || !ok2 {
		return 0
	}
	k := int64(strings.Count(s, old))
	if old == "" {
		k = int64(utf8.RuneCountInString(s) + 1)
	}
	if len(args) > 2 {
		if c, err := starlark.AsInt32(args[2]); err == nil && c >= 0 {
			k = min(k, int64(c))
		}
	}
	return addSat(int64(len(s)), mulSat(k, int64(max(len(repl)-len(old), 0))))
}

// materialiseGuard wraps list, tuple, sorted, dict, …: an argument of known length (a range of a
// billion numbers) is charged before it is copied.
func materialiseGuard(name string, unit int64) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	real := starlark.Universe[name]
	return func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		bud := budgetOf(th)
		var n int64 = -1
		for _, a := range args {
			if l := starlark.Len(a); l >= 0 {
				if name == "zip" { // zip stops at the shortest
					if n < 0 || int64(l) < n {
						n = int64(l)
					}
				} else {
					n = max(n, int64(l))
				}
			}
		}
		if err := bud.charge(mulSat(n, unit), "this "+name+"()"); err != nil {
			return nil, err
		}
		v, err := starlark.Call(th, real, args, kwargs)
		if err != nil || n >= 0 {
			return v, err
		}
		if err := bud.charge(sizeOf(v), "this "+name+"()"); err != nil {
			return nil, err
		}
		return v, nil
	}
}

// printGuard wraps str, repr and print: the printed size of the arguments is charged first.
func printGuard(name string) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	real := starlark.Universe[name]
	return func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		bud := budgetOf(th)
		var n int64
		for _, a := range args {
			if _, ok := a.(starlark.String); ok && name == "str" {
				continue // str of a string is that string
			}
			n = addSat(n, reprSize(a, bud.remaining()-n, 0))
		}
		if err := bud.charge(n, "this "+name+"()"); err != nil {
			return nil, err
		}
		return starlark.Call(th, real, args, kwargs)
	}
}

// intGuard is int() with a bound on the digits parsed from a string.
func intGuard(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		if s, ok := args[0].(starlark.String); ok && len(s) > maxIntDigits {
			return nil, fmt.Errorf("the string has %d characters; at most %d digits are converted", len(s), maxIntDigits)
		}
	}
	return starlark.Call(th, starlark.Universe["int"], args, kwargs)
}

// rewriteFile routes the program's size-changing operations through the guards.
func rewriteFile(f *syntax.File) {
	rewriteStmts(f.Stmts)
}

func rewriteStmts(stmts []syntax.Stmt) {
	for _, s := range stmts {
		rewriteStmt(s)
	}
}

func rewriteStmt(s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		s.RHS = rewriteExpr(s.RHS)
		if s.Op == syntax.EQ {
			rewriteTarget(s.LHS)
			return
		}
		guard := map[syntax.Token]string{syntax.PLUS_EQ: gAddEq, syntax.STAR_EQ: gMulEq, syntax.PERCENT_EQ: gModEq}[s.Op]
		lhs, ok := cloneExpr(s.LHS)
		rewriteTarget(s.LHS)
		switch {
		case guard == "":
		case s.Op != syntax.STAR_EQ && isNumberLiteral(s.RHS): // n += 1, n %= 7
		case ok:
			s.RHS = guardCall(guard, s.OpPos, rewriteExpr(lhs), s.RHS)
		case s.Op == syntax.PLUS_EQ: // a complicated target: charge what is added
			s.RHS = guardCall(gCharge, s.OpPos, s.RHS)
		}
	case *syntax.DefStmt:
		rewriteParams(s.Params)
		rewriteStmts(s.Body)
	case *syntax.ExprStmt:
		s.X = rewriteExpr(s.X)
	case *syntax.IfStmt:
		s.Cond = rewriteExpr(s.Cond)
		rewriteStmts(s.True)
		rewriteStmts(s.False)
	case *syntax.ForStmt:
		s.X = rewriteExpr(s.X)
		rewriteTarget(s.Vars)
		rewriteStmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = rewriteExpr(s.Cond)
		rewriteStmts(s.Body)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = rewriteExpr(s.Result)
		}
	}
}

// rewriteTarget rewrites the loads inside an assignment target (a[i + 1] = …) but keeps the
// target's own shape.
func rewriteTarget(e syntax.Expr) {
	switch t := e.(type) {
	case *syntax.IndexExpr:
		t.X = rewriteExpr(t.X)
		t.Y = rewriteExpr(t.Y)
	case *syntax.DotExpr:
		t.X = rewriteExpr(t.X)
	case *syntax.ParenExpr:
		rewriteTarget(t.X)
	case *syntax.TupleExpr:
		for _, x := range t.List {
			rewriteTarget(x)
		}
	case *syntax.ListExpr:
		for _, x := range t.List {
			rewriteTarget(x)
		}
	}
}

func rewriteParams(params []syntax.Expr) {
	for _, p := range params {
		if b, ok := p.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			b.Y = rewriteExpr(b.Y)
		}
	}
}

func rewriteExprs(list []syntax.Expr) {
	for i, x := range list {
		list[i] = rewriteExpr(x)
	}
}

func rewriteExpr(e syntax.Expr) syntax.Expr {
	switch x := e.(type) {
	case nil:
		return nil
	case *syntax.BinaryExpr:
		x.X, x.Y = rewriteExpr(x.X), rewriteExpr(x.Y)
		switch x.Op {
		case syntax.STAR:
			return guardCall(gMul, x.OpPos, x.X, x.Y)
		case syntax.PLUS, syntax.PERCENT:
			if isNumberLiteral(x.X) || isNumberLiteral(x.Y) {
				return x // numbers only (or a type error): nothing large
			}
			if x.Op == syntax.PLUS {
				return guardCall(gAdd, x.OpPos, x.X, x.Y)
			}
			return guardCall(gMod, x.OpPos, x.X, x.Y)
		}
		return x
	case *syntax.UnaryExpr:
		x.X = rewriteExpr(x.X)
		return x
	case *syntax.ParenExpr:
		x.X = rewriteExpr(x.X)
		return x
	case *syntax.CallExpr:
		x.Fn = rewriteExpr(x.Fn)
		for i, a := range x.Args {
			if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ { // keyword argument
				b.Y = rewriteExpr(b.Y)
				continue
			}
			x.Args[i] = rewriteExpr(a)
		}
		return x
	case *syntax.DotExpr:
		return guardCall(gAttr, x.Dot, rewriteExpr(x.X), &syntax.Literal{Token: syntax.STRING, TokenPos: x.NamePos, Raw: strconv.Quote(x.Name.Name), Value: x.Name.Name})
	case *syntax.IndexExpr:
		x.X, x.Y = rewriteExpr(x.X), rewriteExpr(x.Y)
		return x
	case *syntax.SliceExpr:
		x.X, x.Lo, x.Hi, x.Step = rewriteExpr(x.X), rewriteExpr(x.Lo), rewriteExpr(x.Hi), rewriteExpr(x.Step)
		return guardCall(gCharge, x.Lbrack, x)
	case *syntax.ListExpr:
		rewriteExprs(x.List)
		return x
	case *syntax.TupleExpr:
		rewriteExprs(x.List)
		return x
	case *syntax.DictExpr:
		for _, entry := range x.List {
			if de, ok := entry.(*syntax.DictEntry); ok {
				de.Key, de.Value = rewriteExpr(de.Key), rewriteExpr(de.Value)
			}
		}
		return x
	case *syntax.CondExpr:
		x.Cond, x.True, x.False = rewriteExpr(x.Cond), rewriteExpr(x.True), rewriteExpr(x.False)
		return x
	case *syntax.Comprehension:
		if de, ok := x.Body.(*syntax.DictEntry); ok {
			de.Key, de.Value = rewriteExpr(de.Key), rewriteExpr(de.Value)
		} else {
			x.Body = rewriteExpr(x.Body)
		}
		for _, c := range x.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.X = rewriteExpr(c.X)
				rewriteTarget(c.Vars)
			case *syntax.IfClause:
				c.Cond = rewriteExpr(c.Cond)
			}
		}
		return x
	case *syntax.LambdaExpr:
		rewriteParams(x.Params)
		x.Body = rewriteExpr(x.Body)
		return x
	}
	return e
}

func guardCall(name string, pos syntax.Position, args ...syntax.Expr) syntax.Expr {
	return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: pos, Name: name}, Lparen: pos, Args: args, Rparen: pos}
}

func isNumberLiteral(e syntax.Expr) bool {
	if p, ok := e.(*syntax.ParenExpr); ok {
		return isNumberLiteral(p.X)
	}
	if u, ok := e.(*syntax.UnaryExpr); ok && (u.Op == syntax.MINUS || u.Op == syntax.PLUS) {
		return isNumberLiteral(u.X)
	}
	l, ok := e.(*syntax.Literal)
	return ok && (l.Token == syntax.INT || l.Token == syntax.FLOAT)
}

// cloneExpr copies a simple assignment target (name, a[i], a.b, nested) so that it can also be
// read as the guard's argument; ok is false for targets with calls or other expressions.
func cloneExpr(e syntax.Expr) (syntax.Expr, bool) {
	switch x := e.(type) {
	case *syntax.Ident:
		return &syntax.Ident{NamePos: x.NamePos, Name: x.Name}, true
	case *syntax.Literal:
		c := *x
		return &c, true
	case *syntax.ParenExpr:
		in, ok := cloneExpr(x.X)
		return &syntax.ParenExpr{Lparen: x.Lparen, X: in, Rparen: x.Rparen}, ok
	case *syntax.IndexExpr:
		a, ok1 := cloneExpr(x.X)
		b, ok2 := cloneExpr(x.Y)
		return &syntax.IndexExpr{X: a, Lbrack: x.Lbrack, Y: b, Rbrack: x.Rbrack}, ok1 && ok2
	case *syntax.DotExpr:
		a, ok := cloneExpr(x.X)
		return &syntax.DotExpr{X: a, Dot: x.Dot, NamePos: x.NamePos, Name: &syntax.Ident{NamePos: x.Name.NamePos, Name: x.Name.Name}}, ok
	case *syntax.UnaryExpr:
		if x.X == nil {
			return nil, false
		}
		a, ok := cloneExpr(x.X)
		return &syntax.UnaryExpr{OpPos: x.OpPos, Op: x.Op, X: a}, ok
	case *syntax.BinaryExpr:
		a, ok1 := cloneExpr(x.X)
		b, ok2 := cloneExpr(x.Y)
		return &syntax.BinaryExpr{X: a, OpPos: x.OpPos, Op: x.Op, Y: b}, ok1 && ok2
	}
	return nil, false
}
