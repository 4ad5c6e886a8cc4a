package ui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// frameStyle is the border every pane is drawn in; its frame size gives the panes' inner sizes.
func frameStyle() lipgloss.Style { return lipgloss.NewStyle().Border(lipgloss.RoundedBorder()) }

// inner returns the content size of a w×h rectangle drawn with frameStyle.
func inner(w, h int) (int, int) {
	fw, fh := frameStyle().GetFrameSize()
	return max(w-fw, 0), max(h-fh, 0)
}

// width is the display width of s in cells (escape sequences excluded).
func width(s string) int { return ansi.StringWidth(s) }

// fit cuts s to w cells (ending in "…" when cut) or pads it with spaces to exactly w.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := ansi.StringWidth(s)
	if n > w {
		s = ansi.Truncate(s, w, "…")
		n = ansi.StringWidth(s)
	}
	if n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// fitRight is fit with the padding on the left (right-aligned).
func fitRight(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := ansi.StringWidth(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	return strings.Repeat(" ", w-n) + s
}

// block returns s as exactly h lines of exactly w cells.
func block(s string, w, h int) []string {
	if h <= 0 {
		return nil
	}
	out := make([]string, h)
	lines := strings.Split(s, "\n")
	for i := range out {
		if i < len(lines) {
			out[i] = fit(lines[i], w)
		} else {
			out[i] = fit("", w)
		}
	}
	return out
}

// box draws content inside a rounded frame of exactly w×h cells with title in its top edge.
func (t *Theme) box(title, content string, w, h int, focused bool) []string {
	if w < 2 || h < 2 {
		return block("", w, h)
	}
	b := lipgloss.RoundedBorder()
	bs := t.Border
	if focused {
		bs = t.BorderFocus
	}
	iw, ih := inner(w, h)
	out := make([]string, 0, h)
	top := b.TopLeft
	if title != "" && iw >= 3 {
		label := " " + ansi.Truncate(title, iw-3, "…") + " "
		ts := t.Faint
		if focused {
			ts = t.BorderFocus
		}
		top += b.Top
		rest := iw - 1 - width(label)
		out = append(out, bs.Render(top)+ts.Render(label)+bs.Render(strings.Repeat(b.Top, max(rest, 0))+b.TopRight))
	} else {
		out = append(out, bs.Render(top+strings.Repeat(b.Top, iw)+b.TopRight))
	}
	left, right := bs.Render(b.Left), bs.Render(b.Right)
	for _, line := range block(content, iw, ih) {
		out = append(out, left+line+right)
	}
	out = append(out, bs.Render(b.BottomLeft+strings.Repeat(b.Bottom, iw)+b.BottomRight))
	return out
}

// joinColumns places blocks of lines side by side; every block must have the same height.
func joinColumns(cols ...[]string) []string {
	if len(cols) == 0 {
		return nil
	}
	out := make([]string, len(cols[0]))
	for i := range out {
		var sb strings.Builder
		for _, c := range cols {
			if i < len(c) {
				sb.WriteString(c[i])
			}
		}
		out[i] = sb.String()
	}
	return out
}

// bar draws a horizontal bar of frac (0..1) in w cells with eighth-block precision.
func bar(frac float64, w int) string {
	if w <= 0 {
		return ""
	}
	frac = min(max(frac, 0), 1)
	eighths := int(frac*float64(w*8) + 0.5)
	full, part := eighths/8, eighths%8
	s := strings.Repeat("█", full)
	if part > 0 && full < w {
		s += string([]rune("▏▎▍▌▋▊▉")[part-1])
	}
	return s + strings.Repeat(" ", w-width(s))
}

// sparkline draws values (scaled between lo and hi) as one row of block characters, the last w.
func sparkline(values []float64, lo, hi float64, w int) string {
	if w <= 0 {
		return ""
	}
	if len(values) > w {
		values = values[len(values)-w:]
	}
	levels := []rune("▁▂▃▄▅▆▇█")
	var sb strings.Builder
	for _, v := range values {
		f := 0.0
		if hi > lo {
			f = (v - lo) / (hi - lo)
		}
		i := int(min(max(f, 0), 1) * float64(len(levels)-1))
		sb.WriteRune(levels[i])
	}
	return sb.String()
}

// pack puts parts on as few lines of at most w cells as it can, in order, with sep between two
// on one line; a part wider than w is wrapped on lines of its own.
func pack(parts []string, sep string, w int) []string {
	w = max(w, 1)
	var out []string
	line := ""
	for _, p := range parts {
		switch {
		case line == "":
			line = p
		case width(line)+width(sep)+width(p) <= w:
			line += sep + p
		default:
			out = append(out, line)
			line = p
		}
		if width(line) > w {
			wl := wrap(line, w)
			out = append(out, wl[:len(wl)-1]...)
			line = wl[len(wl)-1]
		}
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}
