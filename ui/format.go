package ui

import (
	"fmt"
	"math"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// fmtSecs formats a duration in seconds compactly: 0.42s, 12.3s, 4m05s, 2h03m ("–" when unknown).
func fmtSecs(s float64) string {
	switch {
	case s < 0 || math.IsNaN(s) || math.IsInf(s, 0):
		return "–"
	case s < 10:
		return fmt.Sprintf("%.2fs", s)
	case s < 60:
		return fmt.Sprintf("%.1fs", s)
	case s < 3600:
		m := int(s) / 60
		return fmt.Sprintf("%dm%02ds", m, int(s)-60*m)
	}
	h := int(s) / 3600
	return fmt.Sprintf("%dh%02dm", h, (int(s)-3600*h)/60)
}

// fmtSecsShort is fmtSecs in fewer cells: 0.4s, 12s, 4m05s.
func fmtSecsShort(s float64) string {
	switch {
	case s >= 0 && s < 10:
		return fmt.Sprintf("%.1fs", s)
	case s >= 10 && s < 60:
		return fmt.Sprintf("%.0fs", s)
	}
	return fmtSecs(s)
}

// fmtBytes formats a byte count with binary units.
func fmtBytes(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// fmtRate formats a per-second rate: 812, 1.2k, 34k, 1.1M.
func fmtRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// fmtNum formats a metric value with about four significant digits; a whole number (a count:
// compiles, updates, dropped trajectories) without decimals.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case v == math.Trunc(v) && a < 1e5:
		return fmt.Sprintf("%.0f", v)
	case a >= 1e5 || a < 1e-3:
		return fmt.Sprintf("%.2e", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// wrap breaks plain text into lines of at most w cells, at spaces where it can; tabs become
// four spaces, and every line of s starts a new line.
func wrap(s string, w int) []string {
	if w <= 0 {
		return nil
	}
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\t", "    ")
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if width(line) <= w {
			out = append(out, line)
			continue
		}
		out = append(out, strings.Split(ansi.Wrap(line, w, ""), "\n")...)
	}
	return out
}

// indent prefixes every line with p.
func indent(lines []string, p string) []string {
	for i := range lines {
		lines[i] = p + lines[i]
	}
	return lines
}

// oneLine flattens s to one line (newlines and tabs as spaces).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clamp bounds v to [lo, hi] (lo wins when hi < lo).
func clamp(v, lo, hi int) int {
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}
