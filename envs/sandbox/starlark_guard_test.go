package sandbox

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStarlarkHostileCode runs code that would allocate gigabytes or run one unstoppable step for
// minutes without the guard: each must stop with a clear result while the process's own
// allocation stays near the budget (measured, not timed).
func TestStarlarkHostileCode(t *testing.T) {
	const budgetMB = 32
	for _, tc := range []struct {
		name, code string
		status     Status
		output     string // in Output or Detail
	}{
		{"list repeat 3 GiB", "l = [0] * 200000000", StatusKilled, "this * would build about 3.0 GiB"},
		{"string repeat", "s = 'x' * 1000000000", StatusKilled, "memory limit"},
		{"string doubling", "s = 'a'\nfor i in range(40):\n    s = s + s", StatusKilled, "memory limit: this +"},
		{"augmented doubling", "s = 'a'\nfor i in range(40):\n    s += s", StatusKilled, "memory limit: this +="},
		{"list doubling", "l = [0]\nfor i in range(40):\n    l += l", StatusKilled, "memory limit"},
		{"list times-equals", "l = [0]\nfor i in range(40):\n    l *= 2", StatusKilled, "this *="},
		{"indexed augmented", "a = ['x']\nfor i in range(40):\n    a[0] += a[0]", StatusKilled, "memory limit"},
		{"materialise range", "l = list(range(pow(10, 9)))", StatusKilled, "this list()"},
		{"sorted range", "print(sorted(range(pow(10, 10))))", StatusKilled, "this sorted()"},
		{"replace blow-up", "s = 'ab' * 1000\nfor i in range(20):\n    s = s.replace('a', 'aaaa')", StatusKilled, "this .replace()"},
		{"join of shared string", "s = 'x' * 1000000\nt = ''.join([s] * 10000)", StatusKilled, "this .join()"},
		{"join via a bound method", "s = 'x' * 1000000\nj = ''.join\nt = j([s] * 10000)", StatusKilled, "this .join()"},
		{"print of shared string", "s = 'x' * 1000000\nprint([s] * 10000)", StatusKilled, "this print()"},
		{"str of shared string", "s = 'x' * 1000000\nt = str([s] * 10000)", StatusKilled, "this str()"},
		{"format repetition", "s = 'x' * 1000000\nt = ('{}' * 10000).format(s)", StatusKilled, "this .format()"},
		{"percent repetition", "s = 'x' * 1000000\nt = ('%s' * 10000) % tuple([s] * 10000)", StatusKilled, "this % formatting"},
		{"many big strings", "l = []\nfor i in range(1000):\n    l.append('y' * 1000000)", StatusKilled, "already"},
		{"slices of a big list", "b = [0] * 1000000\nl = []\nfor i in range(1000):\n    l.append(b[:])", StatusKilled, "this slice"},
		{"integer squaring", "x = 3\nfor i in range(40):\n    x = x * x", StatusError, "integers are limited"},
		{"huge power", "print(pow(3, pow(10, 9)))", StatusError, "use pow(base, exp, mod)"},
		{"costly modular power", "print(pow(3, pow(2, 100000), pow(10, 30000)))", StatusError, "too much work"},
		{"long int parse", "print(int('9' * 200000))", StatusError, "at most 100000 digits"},
		{"deep recursion", "def f(n):\n    return f(n + 1)\nf(0)", StatusError, "stack overflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := &Starlark{Limits: Limits{Timeout: 20 * time.Second, MaxMemoryMB: budgetMB}}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r := run(t, ex, tc.code)
			runtime.ReadMemStats(&after)
			if r.Status != tc.status || !strings.Contains(r.Output+r.Detail, tc.output) {
				t.Errorf("got %s %q (%s); want %s with %q", r.Status, trunc(r.Output), r.Detail, tc.status, tc.output)
			}
			// Built values are charged once, but a doubling builds the next value while the last
			// is alive: allow a few budgets, far below what the code asked for.
			if got := int64(after.TotalAlloc-before.TotalAlloc) >> 20; got > 6*budgetMB+16 {
				t.Errorf("the call allocated %d MiB; the budget is %d MiB", got, budgetMB)
			}
		})
	}
}

// TestStarlarkGuardKeepsSemantics runs ordinary code through the rewritten program and checks
// the output against what Python (and plain Starlark) print.
func TestStarlarkGuardKeepsSemantics(t *testing.T) {
	for _, tc := range []struct{ code, want string }{
		{"print(2 + 3, 'a' + 'b', [1] + [2], (1,) + (2,))", "5 ab [1, 2] (1, 2)"},
		{"print(3 * 4, 'ab' * 3, [0] * 2, 2 * [1], 1.5 * 2)", "12 ababab [0, 0] [1, 1] 3.0"},
		{"print(17 % 5, '%d-%s' % (3, 'x'), '%(a)s!' % {'a': 1}, -7 % 3)", "2 3-x 1! 2"},
		{"x = 5\nx += 2\nx *= 3\nx %= 4\nprint(x)", "1"},
		{"s = 'a'\ns += 'b'\ns *= 2\nprint(s)", "abab"},
		{"l = [1]\nm = l\nl += [2]\nprint(l, m)", "[1, 2] [1, 2]"}, // list += extends in place
		{"a = [1, 2]\na[0] += 10\nd = {'k': [1]}\nd['k'] += [2]\nprint(a, d)", "[11, 2] {\"k\": [1, 2]}"},
		{"print('a,b,c'.split(','), '-'.join(['x', 'y']), 'aXa'.replace('a', 'bb'), '{}+{}'.format(1, 2))", "[\"a\", \"b\", \"c\"] x-y bbXbb 1+2"},
		{"f = '-'.join\nprint(f(['p', 'q']), getattr('abc', 'upper')())", "p-q ABC"},
		{"print([1, 2, 3, 4][1:3], 'hello'[::-1], list(range(5))[::2])", "[2, 3] olleh [0, 2, 4]"},
		{"def g(a, b=2 * 3, *args, **kw):\n    return a + b + len(args) + len(kw)\nprint(g(1), g(1, 2, 3, k=4))", "7 5"},
		{"h = lambda x, y=1 + 1: x * y\nprint(h(4))", "8"},
		{"print([i * i for i in range(4) if i % 2 == 0], {k: k + 1 for k in range(2)})", "[0, 4] {0: 1, 1: 2}"},
		{"print(sorted([3, 1, 2]), list(reversed([1, 2])), dict([(1, 2)]), len(set([1, 1])), list(enumerate('ab'.elems())), list(zip([1], [2])))", "[1, 2, 3] [2, 1] {1: 2} 1 [(0, \"a\"), (1, \"b\")] [(1, 2)]"},
		{"print(int('123'), str(45) + '!', repr('q'), pow(2, 10), pow(3, 4, 5), pow(-2, 3, 5), pow(3, 4, -5))", "123 45! \"q\" 1024 1 2 -4"},
		{"print(math.sqrt(16.0), math.floor(2.5))", "4.0 2"},
		{"t = str(pow(2, 57))\ns = 0\nfor i in range(len(t)):\n    s += int(t[i])\nprint(s)", "80"},
		{"print('x' + 1)", "unknown binary op: string + int"},
		{"print('a'.nosuch)", "string has no .nosuch field or method"},
	} {
		r := run(t, &Starlark{}, tc.code)
		got := strings.TrimSpace(r.Output)
		if !strings.Contains(got, tc.want) || strings.Contains(got, "$") {
			t.Errorf("%q printed %q (%s); want %q", tc.code, got, r.Status, tc.want)
		}
	}
}

// TestStarlarkNotebook: a session's globals stay usable and mutable from call to call.
func TestStarlarkNotebook(t *testing.T) {
	s, _ := (&Starlark{}).NewSession()
	ctx := context.Background()
	for _, step := range []struct{ code, want string }{
		{"x = 5\nl = [1]", ""},
		{"x = x + 1\nl.append(x)\nprint(x, l)", "6 [1, 6]"},
		{"def f(n):\n    return n * x", ""},
		{"print(f(2))", "12"},
		{"print(undefined_name)", "undefined: undefined_name"},
		{"print(x)", "6"}, // an error does not lose the session
	} {
		r := s.Run(ctx, step.code)
		got := strings.TrimSpace(r.Output)
		if step.want == "" && got != "" || !strings.Contains(got, step.want) {
			t.Errorf("%q printed %q (%s); want %q", step.code, got, r.Status, step.want)
		}
	}
	big := strings.Repeat("x", maxCodeBytes+1)
	if r := s.Run(ctx, big); r.Status != StatusError || !strings.Contains(r.Output, "at most") {
		t.Errorf("over-long code: %s %q", r.Status, trunc(r.Output))
	}
}
