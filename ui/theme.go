package ui

import (
	"github.com/charmbracelet/lipgloss"
	"github.com/guptarohit/asciigraph"
)

// Theme holds every style the workbench draws with. It is built once per program from a
// lipgloss renderer; with colours off (NO_COLOR) it keeps only bold, reverse and underline,
// and what colours tell apart also differs in shape, colours on or off: each pass@k curve has its
// own glyph, each component of the memory ledger its own.
type Theme struct {
	Color bool // colours are on (charts then pass ANSI colours to asciigraph)

	Plain, Bold, Faint, Accent, Title lipgloss.Style
	Good, Bad, Warn                   lipgloss.Style
	Border, BorderFocus               lipgloss.Style // the frame lines of a pane
	TabActive, TabIdle                lipgloss.Style
	Alarm, AlarmAcked                 lipgloss.Style // an alarm in the status line: cannot be missed
	Selected                          lipgloss.Style // the cursor row
	Key, KeyDesc, HelpSection         lipgloss.Style
	PhaseDone, PhaseNow, PhaseIdle    lipgloss.Style
	Dialog                            lipgloss.Style

	CodeKeyword, CodeBuiltin, CodeString, CodeNumber, CodeComment lipgloss.Style
	Observation, ObservationErr, Hint, Assistant                  lipgloss.Style

	// Heat holds the advantage heat-map styles, from most negative (0) to most positive
	// (len-1); the middle one is neutral.
	Heat []lipgloss.Style
	// Parts colour the components of the memory ledger's stacked bar, in order.
	Parts []lipgloss.Style
	// KColors colour pass@k series by rank (largest k first); KFaint are their raw shades.
	KColors, KFaint []asciigraph.AnsiColor
	KStyles         []lipgloss.Style
	// KGlyphs draw pass@k series by rank, with colours on or off ("" is the default line).
	KGlyphs []string
}

// NewTheme builds the styles on renderer r (nil: lipgloss's default renderer, which itself
// honours NO_COLOR by dropping all styling). color=false keeps bold and reverse but no colours.
func NewTheme(r *lipgloss.Renderer, color bool) *Theme {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	s := r.NewStyle
	c := func(light, dark string) lipgloss.TerminalColor {
		if !color {
			return lipgloss.NoColor{}
		}
		return lipgloss.AdaptiveColor{Light: light, Dark: dark}
	}
	t := &Theme{Color: color}
	t.Plain = s()
	t.Bold = s().Bold(true)
	t.Faint = s().Foreground(c("#8a8a8a", "#6c6c6c"))
	if !color {
		t.Faint = s().Faint(true)
	}
	t.Accent = s().Foreground(c("#005fd7", "#5fafff")).Bold(true)
	t.Title = s().Bold(true).Foreground(c("#1c1c1c", "#eeeeee"))
	t.Good = s().Foreground(c("#008700", "#5fd75f"))
	t.Bad = s().Foreground(c("#d70000", "#ff5f5f"))
	t.Warn = s().Foreground(c("#af5f00", "#ffaf00"))
	t.Border = s().Foreground(c("#bcbcbc", "#4e4e4e"))
	t.BorderFocus = s().Foreground(c("#005fd7", "#5fafff")).Bold(true)
	t.TabActive = s().Bold(true).Reverse(true)
	t.TabIdle = s().Foreground(c("#6c6c6c", "#9e9e9e"))
	t.Alarm = s().Bold(true).Blink(false).Foreground(c("#ffffff", "#ffffff")).Background(c("#d70000", "#d70000"))
	if !color {
		t.Alarm = s().Bold(true).Reverse(true)
	}
	t.AlarmAcked = s().Foreground(c("#af5f00", "#ffaf00"))
	t.Selected = s().Reverse(true)
	t.Key = s().Bold(true).Foreground(c("#005fd7", "#5fafff"))
	t.KeyDesc = s().Foreground(c("#4e4e4e", "#bcbcbc"))
	t.HelpSection = s().Bold(true).Underline(true)
	t.PhaseDone = s().Foreground(c("#008700", "#87d787"))
	t.PhaseNow = s().Bold(true).Reverse(true)
	t.PhaseIdle = t.Faint
	t.Dialog = s().Border(lipgloss.DoubleBorder()).BorderForeground(c("#d70000", "#ff5f5f")).Padding(0, 1)

	t.CodeKeyword = s().Foreground(c("#8700af", "#d787ff")).Bold(true)
	t.CodeBuiltin = s().Foreground(c("#005f87", "#5fd7ff"))
	t.CodeString = s().Foreground(c("#5f8700", "#afd75f"))
	t.CodeNumber = s().Foreground(c("#af5f00", "#ffaf5f"))
	t.CodeComment = t.Faint.Italic(true)
	t.Observation = s().Foreground(c("#3a3a3a", "#d0d0d0"))
	t.ObservationErr = t.Bad
	t.Hint = s().Foreground(c("#875f00", "#ffd75f")).Italic(true)
	t.Assistant = s()

	heat := []struct{ light, dark string }{
		{"#ff8787", "#870000"}, {"#ffafaf", "#5f0000"}, {"#ffd7d7", "#3a0000"},
		{"", ""},
		{"#d7ffd7", "#003a00"}, {"#afffaf", "#005f00"}, {"#87ff87", "#008700"},
	}
	for _, h := range heat {
		if h.light == "" || !color {
			t.Heat = append(t.Heat, s())
			continue
		}
		t.Heat = append(t.Heat, s().Background(c(h.light, h.dark)))
	}
	for _, p := range [][2]string{
		{"#005fd7", "#5f87ff"}, {"#d75f00", "#ff875f"}, {"#008787", "#5fd7d7"},
		{"#8700af", "#af87ff"}, {"#5f8700", "#afd700"}, {"#af0087", "#ff5fd7"}, {"#5f5f5f", "#a8a8a8"},
	} {
		t.Parts = append(t.Parts, s().Foreground(c(p[0], p[1])))
	}
	t.KColors = []asciigraph.AnsiColor{asciigraph.DodgerBlue, asciigraph.Orange, asciigraph.LimeGreen, asciigraph.HotPink, asciigraph.Gold}
	t.KFaint = []asciigraph.AnsiColor{asciigraph.SteelBlue, asciigraph.Peru, asciigraph.DarkOliveGreen, asciigraph.RosyBrown, asciigraph.DarkKhaki}
	for _, p := range [][2]string{{"#0087ff", "#1e90ff"}, {"#d75f00", "#ffa500"}, {"#00af00", "#32cd32"}, {"#d7005f", "#ff69b4"}, {"#af8700", "#ffd700"}} {
		t.KStyles = append(t.KStyles, s().Foreground(c(p[0], p[1])).Bold(true))
	}
	t.KGlyphs = []string{"", "•", "+", "x", "o", "*", "#", "%"}
	return t
}

// part returns the style of ledger component i.
func (t *Theme) part(i int) lipgloss.Style { return t.Parts[i%len(t.Parts)] }

// kStyle returns the legend style of the pass@k series of rank i.
func (t *Theme) kStyle(i int) lipgloss.Style { return t.KStyles[i%len(t.KStyles)] }

// kGlyph returns the plotting glyph of the series of rank i ("" for asciigraph's lines).
func (t *Theme) kGlyph(i int) string { return t.KGlyphs[i%len(t.KGlyphs)] }
