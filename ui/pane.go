package ui

import (
	"agentrl/store"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// pane is one part of the workbench. The root sends it the keys when it has the focus and every
// non-key message always; it draws its content (without the frame) in exactly the size SetSize
// gave it. Its help.KeyMap lists its own keys, taken from the one key table.
type pane interface {
	Update(msg tea.Msg) tea.Cmd
	View() string
	SetSize(w, h int)
	Focus()
	Blur()
	help.KeyMap
}

// Optional pane behaviour, found by type assertion.
type (
	// capturer takes every key while it edits text (a filter being typed).
	capturer interface{ Capturing() bool }
	// backer backs out of a pane-local state on esc (clear a filter, close a picker) and
	// reports whether it did.
	backer interface{ Back() bool }
	// scroller scrolls by n rows (mouse wheel).
	scroller interface{ Scroll(n int) }
	// opener asks the root to open a trajectory in Detail (enter in a list); the root takes
	// the request right after the key, so keys typed quickly after enter reach Detail.
	opener interface{ takeOpen() (idx int, ok bool) }
	// titler adds a few words to the pane's frame title ("Trajectories · 12 of 640").
	titler interface{ Subtitle() string }
)

// shared is what every pane reads: the run data, the theme, the key table, and the run's
// controller and store (either may be nil).
type shared struct {
	data  *runData
	theme *Theme
	keys  *keyTable
	ctrl  Controller
	store *store.Store
	runID string
	// clipboard puts text on the terminal's clipboard (OSC 52); nil where there is none.
	clipboard func(string)
}

// paneBase holds the size and focus every pane has.
type paneBase struct {
	w, h    int
	focused bool
}

func (b *paneBase) SetSize(w, h int) { b.w, b.h = max(w, 0), max(h, 0) }
func (b *paneBase) Focus()           { b.focused = true }
func (b *paneBase) Blur()            { b.focused = false }

// keyHelp implements help.KeyMap for a pane from its section of the key table.
type keyHelp struct {
	keys *keyTable
	id   paneID
}

func (k keyHelp) ShortHelp() []key.Binding  { return k.keys.section(k.id) }
func (k keyHelp) FullHelp() [][]key.Binding { return [][]key.Binding{k.keys.section(k.id)} }

// Messages between the root and the panes.
type (
	// dataMsg tells the panes that the run data changed (which parts: ch).
	dataMsg struct{ ch change }
	// noteMsg puts a line in the footer until the next key; with cmd, a shell command under it
	// (its words, already quoted), broken over as many lines as it needs, never cut.
	noteMsg struct {
		text string
		bad  bool
		cmd  []string
	}
)

func note(text string, bad bool) tea.Cmd {
	return func() tea.Msg { return noteMsg{text: text, bad: bad} }
}

// openRequest is an opener's pending request.
type openRequest struct {
	idx     int
	pending bool
}

func (r *openRequest) request(idx int) { r.idx, r.pending = idx, true }

func (r *openRequest) takeOpen() (int, bool) {
	ok := r.pending
	r.pending = false
	return r.idx, ok
}

// listCursor keeps a cursor and a scroll offset over n rows of which h are visible.
type listCursor struct{ cursor, offset int }

// clampTo keeps the cursor inside [0, n) and visible in h rows.
func (c *listCursor) clampTo(n, h int) {
	c.cursor = clamp(c.cursor, 0, n-1)
	if h <= 0 {
		c.offset = c.cursor
		return
	}
	if c.cursor < c.offset {
		c.offset = c.cursor
	}
	if c.cursor >= c.offset+h {
		c.offset = c.cursor - h + 1
	}
	c.offset = clamp(c.offset, 0, max(n-h, 0))
}

// move handles the list movement keys of l; it reports whether msg was one.
func (c *listCursor) move(msg tea.KeyMsg, l *listKeys, n, h int) bool {
	switch {
	case key.Matches(msg, l.Up):
		c.cursor--
	case key.Matches(msg, l.Down):
		c.cursor++
	case key.Matches(msg, l.Top):
		c.cursor = 0
	case key.Matches(msg, l.Bottom):
		c.cursor = n - 1
	case key.Matches(msg, l.PageUp):
		c.cursor -= max(h-1, 1)
	case key.Matches(msg, l.PageDown):
		c.cursor += max(h-1, 1)
	default:
		return false
	}
	c.clampTo(n, h)
	return true
}

// textScroll is a scroll offset over a text of n lines shown h at a time.
type textScroll struct{ top int }

func (s *textScroll) clampTo(n, h int) { s.top = clamp(s.top, 0, max(n-h, 0)) }

// move handles the scroll keys of k; it reports whether msg was one.
func (s *textScroll) move(msg tea.KeyMsg, k *scrollKeys, n, h int) bool {
	switch {
	case key.Matches(msg, k.Up):
		s.top--
	case key.Matches(msg, k.Down):
		s.top++
	case key.Matches(msg, k.Top):
		s.top = 0
	case key.Matches(msg, k.Bottom):
		s.top = n
	case key.Matches(msg, k.PageUp):
		s.top -= max(h-1, 1)
	case key.Matches(msg, k.PageDown):
		s.top += max(h-1, 1)
	default:
		return false
	}
	s.clampTo(n, h)
	return true
}

// window returns lines[top:top+h].
func window(lines []string, top, h int) []string {
	top = clamp(top, 0, len(lines))
	return lines[top:min(top+max(h, 0), len(lines))]
}
