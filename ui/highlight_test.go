package ui

import (
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

func TestHighlight(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI256)
	th := NewTheme(r, true)
	for _, line := range []string{
		`def f(x): return x ** 2.5  # square-ish`,
		`print("it's", 'a "b"', 0x1f, 1e-3)`,
		`s = "unterminated`,
		`for i in range(10): total += i`,
		``,
		`é = "ü" # ünïcode`,
	} {
		out := highlight(th, line)
		if got := ansi.Strip(out); got != line {
			t.Fatalf("highlight changed the text: %q → %q", line, got)
		}
	}
	out := highlight(th, `if x: print("y")  # z`)
	for _, part := range []string{th.CodeKeyword.Render("if"), th.CodeBuiltin.Render("print"), th.CodeString.Render(`"y"`), th.CodeComment.Render("# z")} {
		if !strings.Contains(out, part) {
			t.Fatalf("%q lacks %q", out, part)
		}
	}
	// no colours: the line as it is
	if got := highlight(NewTheme(r, false), "if x: pass"); got != "if x: pass" {
		t.Fatalf("colourless highlight %q", got)
	}
}

func TestSmoothAndSample(t *testing.T) {
	s := smooth([]float64{1, 1, 1}, 0.9)
	for _, v := range s {
		if v < 0.999 || v > 1.001 {
			t.Fatalf("debiased EMA of a constant is %v", s)
		}
	}
	pts := []point{{0, 0}, {10, 1}}
	got := sample(pts, 0, 20, 5)
	if got[0] != 0 || got[1] != 0.5 || got[2] != 1 || got[3] == got[3] { // NaN after the last step
		t.Fatalf("sample %v", got)
	}
}
