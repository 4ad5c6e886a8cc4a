package ui

// Rect is a rectangle of terminal cells; W or H of 0 means absent.
type Rect struct{ X, Y, W, H int }

// Empty reports whether r covers no cell.
func (r Rect) Empty() bool { return r.W <= 0 || r.H <= 0 }

// Layout places the workbench's parts for one terminal size. It is a pure function of the size
// (Compute); panes get the inner sizes of their rectangles through SetSize.
type Layout struct {
	Width, Height int
	// TooSmall is set below MinWidth×MinHeight: only a one-line notice is drawn.
	TooSmall bool
	Tabs     Rect // one row: the pane names and numbers
	Strip    Rect // the status strip: alarms, run line, phase timeline (1 to 3 rows)
	Body     Rect // the focused pane, frame included
	Side     []Rect
	Footer   Rect // one row: keys or the last message
}

// Sizes below which the workbench only says that the terminal is too small, and from which a
// side column (two of Curves, GPU and Hints, next to the focused pane) is shown.
const (
	MinWidth  = 24
	MinHeight = 8
	SideWidth = 120 // terminals at least this wide get a side column...
	SideRows  = 30  // ...when they are also this tall
)

// Compute lays out a w×h terminal.
func Compute(w, h int) Layout {
	l := Layout{Width: max(w, 0), Height: max(h, 0)}
	if w < MinWidth || h < MinHeight {
		l.TooSmall = true
		return l
	}
	strip := 1
	switch {
	case h >= SideRows:
		strip = 3
	case h >= 16:
		strip = 2
	}
	l.Tabs = Rect{0, 0, w, 1}
	l.Strip = Rect{0, 1, w, strip}
	l.Footer = Rect{0, h - 1, w, 1}
	top := 1 + strip
	bodyH := h - top - 1
	l.Body = Rect{0, top, w, bodyH}
	if w >= SideWidth && h >= SideRows {
		sw := min(max(w*3/10, 36), 56)
		l.Body.W = w - sw
		if bodyH >= 16 {
			upper := bodyH / 2
			l.Side = []Rect{{l.Body.W, top, sw, upper}, {l.Body.W, top + upper, sw, bodyH - upper}}
		} else {
			l.Side = []Rect{{l.Body.W, top, sw, bodyH}}
		}
	}
	return l
}
