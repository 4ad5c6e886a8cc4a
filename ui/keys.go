package ui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
)

// paneID names a pane; the order is the tab order and the number keys (1 = Status).
type paneID int

const (
	paneStatus paneID = iota
	paneGPU
	paneTrajs
	paneDetail
	paneHints
	paneCurves
	paneCkpts
	numPanes
)

// String is the pane's title.
func (p paneID) String() string {
	switch p {
	case paneStatus:
		return "Status"
	case paneGPU:
		return "GPU"
	case paneTrajs:
		return "Trajectories"
	case paneDetail:
		return "Detail"
	case paneHints:
		return "Hints"
	case paneCurves:
		return "Curves"
	case paneCkpts:
		return "Checkpoints"
	}
	return "?"
}

func bind(help string, desc string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
}

// globalKeys are handled by the root whatever pane has the focus.
type globalKeys struct {
	Quit, Help, Next, Prev, Back, Pause, Stop, Ack, AckAll key.Binding
	Jump                                                   []key.Binding
}

// listKeys move through a list (trajectories, hints, checkpoints) and act on its rows.
type listKeys struct {
	Up, Down, Top, Bottom, PageUp, PageDown, Open key.Binding
	Filter, Sort, Reverse, Follow, Kind           key.Binding
}

// scrollKeys scroll a text view (detail, status).
type scrollKeys struct {
	Up, Down, Top, Bottom, PageUp, PageDown key.Binding
}

// detailKeys add the detail's own toggles to scrolling.
type detailKeys struct {
	scrollKeys
	Tokens, Prev, Next key.Binding
}

// curveKeys change what the curves pane plots.
type curveKeys struct {
	Smooth, Overlay, Metric key.Binding
}

// ckptKeys act on the selected checkpoint.
type ckptKeys struct {
	Up, Down, Top, Bottom, Mark, Export, Copy key.Binding
}

// pickKeys choose a run in the curves pane's overlay picker.
type pickKeys struct {
	Up, Down, Pick key.Binding
}

// keyTable is the one table of keys: the root and the panes dispatch on these bindings, and the
// help screen and the footer are generated from them, so the two cannot drift apart. A binding
// that does not apply (no controller in `view`) is disabled and so absent from help.
type keyTable struct {
	Global globalKeys
	Trajs  listKeys
	Hints  listKeys
	Detail detailKeys
	Status scrollKeys
	GPU    scrollKeys
	Curves curveKeys
	Pick   pickKeys
	Ckpts  ckptKeys
}

func newScrollKeys() scrollKeys {
	return scrollKeys{
		Up:       bind("↑/k", "scroll up", "up", "k"),
		Down:     bind("↓/j", "scroll down", "down", "j"),
		Top:      bind("g", "top", "g", "home"),
		Bottom:   bind("G", "bottom", "G", "end"),
		PageUp:   bind("pgup", "page up", "pgup", "ctrl+b"),
		PageDown: bind("pgdn", "page down", "pgdown", "ctrl+f", " "),
	}
}

func newKeyTable() *keyTable {
	k := &keyTable{}
	k.Global = globalKeys{
		Quit:   bind("q", "quit (a live run stops first: see docs/stopping.md)", "q", "ctrl+c"),
		Help:   bind("?", "help", "?"),
		Next:   bind("tab", "next pane", "tab"),
		Prev:   bind("shift+tab", "previous pane", "shift+tab"),
		Back:   bind("esc", "back", "esc"),
		Pause:  bind("p", "pause / resume the run", "p"),
		Stop:   bind("S", "stop the run (asks y/n; the workbench stays open)", "S"),
		Ack:    bind("a", "acknowledge the oldest alarm", "a"),
		AckAll: bind("A", "acknowledge all alarms", "A"),
	}
	for p := paneStatus; p < numPanes; p++ {
		n := string(rune('1' + int(p)))
		k.Global.Jump = append(k.Global.Jump, bind(n, p.String(), n))
	}
	list := func(open string) listKeys {
		return listKeys{
			Up:       bind("↑/k", "up", "up", "k"),
			Down:     bind("↓/j", "down", "down", "j"),
			Top:      bind("g", "first", "g", "home"),
			Bottom:   bind("G", "last", "G", "end"),
			PageUp:   bind("pgup", "page up", "pgup", "ctrl+b"),
			PageDown: bind("pgdn", "page down", "pgdown", "ctrl+f"),
			Open:     bind("enter", open, "enter"),
			Filter:   bind("/", "filter (correct, wrong, hinted, err, eval, train, step:N, reward>x, text)", "/"),
			Sort:     bind("s", "sort by the next column", "s"),
			Reverse:  bind("r", "reverse the order", "r"),
			Follow:   bind("f", "follow the latest", "f"),
			Kind:     bind("e", "all / training / evaluation trajectories", "e"),
		}
	}
	k.Trajs = list("open the trajectory")
	k.Hints = list("open the hinted trajectory")
	for _, b := range []*key.Binding{&k.Hints.Filter, &k.Hints.Sort, &k.Hints.Reverse, &k.Hints.Follow, &k.Hints.Kind} {
		b.SetEnabled(false)
	}
	k.Detail = detailKeys{
		scrollKeys: newScrollKeys(),
		Tokens:     bind("t", "turns / token heat map", "t"),
		Prev:       bind("[", "previous trajectory", "["),
		Next:       bind("]", "next trajectory", "]"),
	}
	k.Status = newScrollKeys()
	k.GPU = newScrollKeys()
	k.Curves = curveKeys{
		Smooth:  bind("s", "smoothing 0 / .6 / .8 / .9", "s"),
		Overlay: bind("o", "overlay another run", "o"),
		Metric:  bind("m", "pass@k or a step metric", "m"),
	}
	k.Pick = pickKeys{
		Up:   bind("↑/k", "up", "up", "k"),
		Down: bind("↓/j", "down", "down", "j"),
		Pick: bind("enter", "overlay this run", "enter"),
	}
	k.Ckpts = ckptKeys{
		Up:     bind("↑/k", "up", "up", "k"),
		Down:   bind("↓/j", "down", "down", "j"),
		Top:    bind("g", "first", "g", "home"),
		Bottom: bind("G", "last", "G", "end"),
		Mark:   bind("b/space", "mark as best", "b", " "),
		Export: bind("e", "export", "e"),
		Copy:   bind("c", "id and export command (shown whole, copied by OSC 52)", "c"),
	}
	return k
}

// forController disables the keys that change the run when c cannot do them (nil: `view`).
func (k *keyTable) forController(c Controller) {
	k.Global.Pause.SetEnabled(supports(c, ActionPause))
	k.Global.Stop.SetEnabled(supports(c, ActionStop))
	k.Ckpts.Mark.SetEnabled(supports(c, ActionMarkBest))
	k.Ckpts.Export.SetEnabled(supports(c, ActionExport))
}

// globals lists the global bindings for help.
func (k *keyTable) globals() []key.Binding {
	g := k.Global
	return []key.Binding{g.Help, g.Next, g.Prev, bind("1-7", "jump to a pane", "1"), g.Back, g.Pause, g.Stop, g.Ack, g.AckAll, g.Quit}
}

// section lists a pane's bindings for help, in the order shown.
func (k *keyTable) section(p paneID) []key.Binding {
	switch p {
	case paneTrajs:
		l := k.Trajs
		return []key.Binding{l.Up, l.Down, l.Top, l.Bottom, l.PageUp, l.PageDown, l.Open, l.Filter, l.Kind, l.Sort, l.Reverse, l.Follow}
	case paneHints:
		l := k.Hints
		return []key.Binding{l.Up, l.Down, l.Top, l.Bottom, l.Open}
	case paneDetail:
		d := k.Detail
		return []key.Binding{d.Up, d.Down, d.Top, d.Bottom, d.PageUp, d.PageDown, d.Tokens, d.Prev, d.Next}
	case paneStatus:
		s := k.Status
		return []key.Binding{s.Up, s.Down, s.Top, s.Bottom}
	case paneGPU:
		s := k.GPU
		return []key.Binding{s.Up, s.Down, s.Top, s.Bottom}
	case paneCurves:
		c := k.Curves
		return []key.Binding{c.Smooth, c.Overlay, c.Metric, k.Pick.Up, k.Pick.Down, k.Pick.Pick}
	case paneCkpts:
		c := k.Ckpts
		return []key.Binding{c.Up, c.Down, c.Top, c.Bottom, c.Mark, c.Export, c.Copy, k.Global.Stop}
	}
	return nil
}

// short renders bindings as "key desc • key desc" for the footer, the enabled ones only.
func short(t *Theme, bs []key.Binding) string {
	var parts []string
	for _, b := range bs {
		if !b.Enabled() {
			continue
		}
		h := b.Help()
		desc := h.Desc
		if i := strings.Index(desc, " ("); i > 0 {
			desc = desc[:i]
		}
		parts = append(parts, t.Key.Render(h.Key)+" "+t.KeyDesc.Render(desc))
	}
	return strings.Join(parts, t.Faint.Render(" • "))
}

// helpView renders the full help: the global keys, then the focused pane's, then the others',
// flowed into as many columns as fit w.
func helpView(t *Theme, k *keyTable, focus paneID, w, h int) string {
	type section struct {
		title string
		lines []string
	}
	// columns of at least 34 cells, as many as fit; long descriptions wrap under themselves
	ncol := max(min(w/34, 4), 1)
	colW := max(w/ncol, 1)
	mk := func(title string, bs []key.Binding) section {
		s := section{title: title}
		kw := 0
		for _, b := range bs {
			if b.Enabled() {
				kw = max(kw, width(b.Help().Key))
			}
		}
		for _, b := range bs {
			if !b.Enabled() {
				continue
			}
			hp := b.Help()
			desc := wrap(hp.Desc, max(colW-kw-3, 8))
			for i, d := range desc {
				k := fit("", kw)
				if i == 0 {
					k = t.Key.Render(fit(hp.Key, kw))
				}
				s.lines = append(s.lines, k+"  "+t.KeyDesc.Render(d))
			}
		}
		return s
	}
	secs := []section{mk("Global", k.globals()), mk(focus.String()+" (focused)", k.section(focus))}
	for p := paneStatus; p < numPanes; p++ {
		if p != focus && len(k.section(p)) > 0 {
			secs = append(secs, mk(p.String(), k.section(p)))
		}
	}
	cols := make([][]string, ncol)
	heights := make([]int, ncol)
	for _, s := range secs {
		if len(s.lines) == 0 {
			continue
		}
		c := 0
		for i := range heights {
			if heights[i] < heights[c] {
				c = i
			}
		}
		if heights[c] > 0 {
			cols[c] = append(cols[c], "")
		}
		cols[c] = append(cols[c], t.HelpSection.Render(s.title))
		cols[c] = append(cols[c], s.lines...)
		heights[c] = len(cols[c])
	}
	rows := 0
	for _, c := range cols {
		rows = max(rows, len(c))
	}
	var sb strings.Builder
	for r := 0; r < rows && r < h; r++ {
		if r > 0 {
			sb.WriteByte('\n')
		}
		for _, c := range cols {
			line := ""
			if r < len(c) {
				line = c[r]
			}
			sb.WriteString(fit(line, colW))
		}
	}
	return sb.String()
}
