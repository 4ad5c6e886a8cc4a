package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestStarlark(t *testing.T) {
	ex := &Starlark{Limits: Limits{Timeout: time.Second, MaxSteps: 1_000_000, MaxOutputBytes: 64}}
	for _, tc := range []struct {
		name, code string
		status     Status
		output     string
	}{
		{"print", "print(6 * 7)", StatusOK, "42\n"},
		{"big int pow mod", "print(pow(3, 1000, 7))", StatusOK, "4\n"},
		{"loop digit sum", "t = str(pow(2, 57))\ns = 0\nfor i in range(len(t)):\n    s += int(t[i])\nprint(s)", StatusOK, "80\n"},
		{"error", "print(undefined_name)", StatusError, "undefined"},
		{"syntax", "print(", StatusError, "code.py:1"},
		{"infinite loop hits steps", "while True:\n    pass", StatusKilled, ""},
		{"output truncated", "for i in range(1000):\n    print(i)", StatusOK, "output truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, ex, tc.code)
			if r.Status != tc.status || !strings.Contains(r.Output, tc.output) {
				t.Errorf("got %s %q (%s); want %s containing %q", r.Status, r.Output, r.Detail, tc.status, tc.output)
			}
		})
	}
	// Wall-clock limit with a generous step budget.
	slow := &Starlark{Limits: Limits{Timeout: 200 * time.Millisecond, MaxSteps: 1 << 62}}
	if r := run(t, slow, "while True:\n    pass"); r.Status != StatusTimeout {
		t.Errorf("infinite loop: %s; want timeout", r.Status)
	}
	// Sessions keep globals.
	s, _ := ex.NewSession()
	s.Run(context.Background(), "x = 5")
	if r := s.Run(context.Background(), "print(x * 2)"); r.Output != "10\n" {
		t.Errorf("globals not kept: %q", r.Output)
	}
}

// FuzzStarlark runs arbitrary text through the parser, the guard's rewrite and the interpreter
// with small limits: whatever the code, the call ends with a status and no panic.
func FuzzStarlark(f *testing.F) {
	for _, s := range []string{"print(1 + 2)", "l = [0] * 10\nl += l\nprint(l[1:3])", "s = 'a'.join(['b', 'c'])\nprint(s.replace('a', 'x'), '%s' % s)",
		"def f(x, y=2 * 3, *a, **k):\n    return x + y\nprint(f(1))", "d = {k: v for k, v in zip([1], [2])}\nd['x'] = d.get(1) * 2", "x = pow(3, 5, 7)\nx %= 5\nprint(str(x) * 3)",
		"a = [[1]]\na[0][0] += 1\nprint(getattr(a, 'append'))", "while True:\n    pass"} {
		f.Add(s)
	}
	ex := &Starlark{Limits: Limits{Timeout: time.Second, MaxSteps: 20000, MaxMemoryMB: 16}}
	f.Fuzz(func(t *testing.T, code string) {
		s, _ := ex.NewSession()
		r := s.Run(context.Background(), code)
		switch r.Status {
		case StatusOK, StatusError, StatusTimeout, StatusKilled:
		default:
			t.Fatalf("status %q", r.Status)
		}
		if strings.Contains(r.Output, "Error in $") {
			t.Fatalf("a guard's name leaked into the output: %q", r.Output)
		}
	})
}
