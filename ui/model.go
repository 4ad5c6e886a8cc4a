package ui

import (
	"fmt"
	"strings"
	"time"

	"agentrl/engine/event"
	"agentrl/store"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// config builds the root model; RunTUI fills it from Options, tests directly.
type config struct {
	events   <-chan event.Event
	initial  []event.Event
	ctrl     Controller
	store    *store.Store
	runID    string
	renderer *lipgloss.Renderer // nil: lipgloss's default renderer
	noColor  bool
	// memSample reads the process's memory (nil: procMemory); memEvery is how often (0: once).
	memSample func() uint64
	memEvery  time.Duration
	// width, height: the size to draw at before (or without) the terminal's own; 0 waits for it
	width, height int
	// clipboard puts text on the terminal's clipboard (nil: none)
	clipboard func(string)
}

// Root-level messages.
type (
	// eventsMsg is a batch of events read from the stream; closed says the stream ended after
	// them.
	eventsMsg struct {
		events []event.Event
		closed bool
	}
	// memMsg is one process-memory sample.
	memMsg struct{ rss uint64 }
	// ctrlMsg is the controller's answer to one of the user's commands.
	ctrlMsg struct {
		act  Action
		step int
		on   bool   // pause: paused (true) or resumed
		path string // export: where; stop: what the run will do
		err  error
	}
)

// maxBatch bounds the events one eventsMsg carries, so a burst becomes a few redraws.
const maxBatch = 1024

// waitEvents reads the next events off the stream (blocking for the first, then taking what is
// already there); the root re-arms it after each batch (bubbletea's examples/realtime).
func waitEvents(ch <-chan event.Event) tea.Cmd {
	return func() tea.Msg {
		e, ok := <-ch
		if !ok {
			return eventsMsg{closed: true}
		}
		batch := []event.Event{e}
		for len(batch) < maxBatch {
			select {
			case e, ok := <-ch:
				if !ok {
					return eventsMsg{events: batch, closed: true}
				}
				batch = append(batch, e)
			default:
				return eventsMsg{events: batch}
			}
		}
		return eventsMsg{events: batch}
	}
}

// model is the root: it owns the run data, routes keys to the focused pane, lays the panes out
// and draws the tabs, the status strip and the footer around them.
type model struct {
	sh     *shared
	panes  [numPanes]pane
	detail *detailPane

	focus    paneID
	backTo   paneID // where esc from Detail returns
	layout   Layout
	showHelp bool
	helpTop  int

	confirm   string         // a pending yes/no question ("" none)
	onConfirm func() tea.Cmd // what yes does
	note      string         // footer message until the next key
	noteBad   bool
	noteCmd   []string // a shell command under the note (its quoted words)
	events    <-chan event.Event
	streamEnd bool // the stream closed

	memSample func() uint64
	memEvery  time.Duration
	size      [2]int // the size to draw at until the terminal says (config.width, height)
}

func newModel(c config) *model {
	r := c.renderer
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	color := !c.noColor && r.ColorProfile() != termenv.Ascii
	keys := newKeyTable()
	keys.forController(c.ctrl)
	sh := &shared{data: newRunData(), theme: NewTheme(r, color), keys: keys, ctrl: c.ctrl, store: c.store, runID: c.runID, clipboard: c.clipboard}
	for _, e := range c.initial {
		sh.data.apply(e)
	}
	if sh.runID == "" {
		sh.runID = sh.data.start.RunID
	}
	m := &model{sh: sh, events: c.events, memSample: c.memSample, memEvery: c.memEvery, focus: paneStatus, backTo: paneTrajs,
		size: [2]int{c.width, c.height}}
	if m.memSample == nil {
		m.memSample = procMemory
	}
	if c.events == nil {
		m.streamEnd = true
	}
	m.detail = newDetailPane(sh)
	m.panes = [numPanes]pane{
		paneStatus: newStatusPane(sh),
		paneGPU:    newGPUPane(sh),
		paneTrajs:  newTrajPane(sh),
		paneDetail: m.detail,
		paneHints:  newHintsPane(sh),
		paneCurves: newCurvesPane(sh),
		paneCkpts:  newCkptPane(sh),
	}
	m.panes[m.focus].Focus()
	return m
}

func (m *model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.sampleMem(0)}
	if w, h := m.size[0], m.size[1]; w > 0 && h > 0 {
		cmds = append(cmds, func() tea.Msg { return tea.WindowSizeMsg{Width: w, Height: h} })
	}
	if m.events != nil {
		cmds = append(cmds, waitEvents(m.events))
	}
	return tea.Batch(cmds...)
}

// sampleMem reads the process memory after d, off the Update path.
func (m *model) sampleMem(d time.Duration) tea.Cmd {
	read := m.memSample
	if d <= 0 {
		return func() tea.Msg { return memMsg{read()} }
	}
	return tea.Tick(d, func(time.Time) tea.Msg { return memMsg{read()} })
}

// broadcast sends a non-key message to every pane.
func (m *model) broadcast(msg tea.Msg) tea.Cmd {
	var cmds []tea.Cmd
	for _, p := range m.panes {
		if c := p.Update(msg); c != nil {
			cmds = append(cmds, c)
		}
	}
	return tea.Batch(cmds...)
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
		return m, nil
	case tea.KeyMsg:
		m.note, m.noteBad, m.noteCmd = "", false, nil
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// keys typed faster than the terminal is read arrive as one message ("a7S"): each
			// is a key of its own
			var cmds []tea.Cmd
			for _, r := range msg.Runes {
				k := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}
				if r == ' ' {
					k.Type = tea.KeySpace
				}
				cmds = append(cmds, m.key(k))
			}
			return m, tea.Batch(cmds...)
		}
		return m, m.key(msg)
	case tea.MouseMsg:
		return m, m.mouse(msg)
	case eventsMsg:
		var ch change
		for _, e := range msg.events {
			ch |= m.sh.data.apply(e)
		}
		if msg.closed {
			m.streamEnd = true
			ch |= chRun
		}
		cmds := []tea.Cmd{m.broadcast(dataMsg{ch})}
		if !msg.closed {
			cmds = append(cmds, waitEvents(m.events))
		}
		return m, tea.Batch(cmds...)
	case memMsg:
		m.sh.data.sampleProc(msg.rss)
		cmd := m.broadcast(dataMsg{chLedger})
		if m.memEvery > 0 {
			cmd = tea.Batch(cmd, m.sampleMem(m.memEvery))
		}
		return m, cmd
	case ctrlMsg:
		return m, m.controlled(msg)
	case noteMsg:
		m.note, m.noteBad, m.noteCmd = msg.text, msg.bad, msg.cmd
		return m, nil
	}
	return m, m.broadcast(msg)
}

// resize lays the workbench out for a w×h terminal and gives every pane its size.
func (m *model) resize(w, h int) {
	m.layout = Compute(w, h)
	m.sizePanes()
}

// sides are the panes shown in the side column next to focus, at most n.
func sides(focus paneID, n int) []paneID {
	var out []paneID
	for _, p := range []paneID{paneCurves, paneGPU, paneHints} {
		if p != focus && len(out) < n {
			out = append(out, p)
		}
	}
	return out
}

func (m *model) sizePanes() {
	l := m.layout
	if l.TooSmall {
		return
	}
	bw, bh := inner(l.Body.W, l.Body.H)
	for _, p := range m.panes {
		p.SetSize(bw, bh)
	}
	for i, id := range sides(m.focus, len(l.Side)) {
		m.panes[id].SetSize(inner(l.Side[i].W, l.Side[i].H))
	}
}

func (m *model) setFocus(p paneID) {
	if p == m.focus {
		return
	}
	m.panes[m.focus].Blur()
	m.focus = p
	m.panes[p].Focus()
	m.sizePanes()
}

// key handles one key press: confirmations, help, text input, the global keys, then the pane.
func (m *model) key(msg tea.KeyMsg) tea.Cmd {
	g := &m.sh.keys.Global
	if msg.String() == "ctrl+c" {
		return m.quit()
	}
	if m.confirm != "" {
		switch msg.String() {
		case "y", "Y":
			act := m.onConfirm
			m.confirm, m.onConfirm = "", nil
			return act()
		case "n", "N", "esc":
			m.confirm, m.onConfirm = "", nil
			m.note = "not stopped: the run goes on"
		}
		return nil
	}
	if c, ok := m.panes[m.focus].(capturer); ok && c.Capturing() {
		return m.panes[m.focus].Update(msg)
	}
	if m.showHelp {
		switch {
		case key.Matches(msg, g.Quit):
			return m.quit()
		case key.Matches(msg, g.Help), key.Matches(msg, g.Back):
			m.showHelp = false
		case msg.String() == "j" || msg.String() == "down":
			m.helpTop++
		case msg.String() == "k" || msg.String() == "up":
			m.helpTop = max(m.helpTop-1, 0)
		}
		return nil
	}
	switch {
	case key.Matches(msg, g.Quit):
		return m.quit()
	case key.Matches(msg, g.Help):
		m.showHelp, m.helpTop = true, 0
		return nil
	case key.Matches(msg, g.Next):
		m.setFocus((m.focus + 1) % numPanes)
		return nil
	case key.Matches(msg, g.Prev):
		m.setFocus((m.focus + numPanes - 1) % numPanes)
		return nil
	case key.Matches(msg, g.Back):
		if b, ok := m.panes[m.focus].(backer); ok && b.Back() {
			return nil
		}
		if m.focus == paneDetail {
			m.setFocus(m.backTo)
		}
		return nil
	case key.Matches(msg, g.Pause):
		return m.pause()
	case key.Matches(msg, g.Stop):
		return m.askStop()
	case key.Matches(msg, g.Ack):
		if !m.sh.data.ack(false) {
			m.note = "no alarm to acknowledge"
		}
		return m.broadcast(dataMsg{chAlarm})
	case key.Matches(msg, g.AckAll):
		if !m.sh.data.ack(true) {
			m.note = "no alarm to acknowledge"
		}
		return m.broadcast(dataMsg{chAlarm})
	}
	for i, b := range g.Jump {
		if key.Matches(msg, b) {
			m.setFocus(paneID(i))
			return nil
		}
	}
	from := m.focus
	cmd := m.panes[from].Update(msg)
	if o, ok := m.panes[from].(opener); ok {
		if idx, ok := o.takeOpen(); ok && idx >= 0 && idx < len(m.sh.data.trajs) {
			m.detail.open(idx)
			m.backTo = from
			m.setFocus(paneDetail)
		}
	}
	return cmd
}

// ended reports whether the run can no longer take commands.
func (m *model) ended() bool { return m.sh.data.end != nil || (m.streamEnd && m.events != nil) }

// quit closes the workbench; a live run that has not ended is asked to stop first (at its next
// safe point: the caller waits for it and says what it did).
func (m *model) quit() tea.Cmd {
	if m.ended() || !supports(m.sh.ctrl, ActionStop) {
		return tea.Quit
	}
	c := m.sh.ctrl
	return tea.Sequence(func() tea.Msg {
		_, _ = c.Stop(ReasonQuit) // the announcement comes on the stream too; the caller prints it
		return nil
	}, tea.Quit)
}

func (m *model) pause() tea.Cmd {
	if m.ended() {
		m.note = "the run has ended"
		return nil
	}
	c, paused := m.sh.ctrl, m.sh.data.paused
	return func() tea.Msg {
		if paused {
			return ctrlMsg{act: ActionPause, on: false, err: c.Resume()}
		}
		return ctrlMsg{act: ActionPause, on: true, err: c.Pause()}
	}
}

// stopQuestion is the confirmation the stop key asks.
const stopQuestion = "Stop the run now? It keeps its last trained step (y/n)"

func (m *model) askStop() tea.Cmd {
	switch {
	case m.ended():
		m.note = "the run has ended"
		return nil
	case m.sh.data.stopping:
		m.note = "the run is already stopping — " + m.sh.data.stopNote()
		return nil
	}
	c := m.sh.ctrl
	m.confirm = stopQuestion
	m.onConfirm = func() tea.Cmd {
		return func() tea.Msg {
			msg, err := c.Stop(ReasonStop)
			return ctrlMsg{act: ActionStop, path: msg, err: err}
		}
	}
	return nil
}

// controlled applies the controller's answer.
func (m *model) controlled(r ctrlMsg) tea.Cmd {
	d := m.sh.data
	if r.err != nil {
		m.note, m.noteBad = fmt.Sprintf("%s failed: %v", r.act, r.err), true
		return nil
	}
	switch r.act {
	case ActionPause:
		d.paused = r.on
		if r.on {
			m.note = "paused after the current phase — p resumes"
		} else {
			m.note = "resumed"
		}
	case ActionStop:
		d.stopping = true
		if r.path != "" {
			d.stopMsg = r.path
		}
		m.note = d.stopNote()
	case ActionMarkBest:
		d.bestOverride = r.step
		m.note = fmt.Sprintf("step %d marked best", r.step)
	case ActionExport:
		m.note = fmt.Sprintf("exported step %d to %s", r.step, r.path)
	}
	return m.broadcast(dataMsg{chControl})
}

// mouse scrolls the pane under the pointer with the wheel; a click on the tabs focuses a pane.
func (m *model) mouse(msg tea.MouseMsg) tea.Cmd {
	l := m.layout
	if l.TooSmall || m.showHelp {
		return nil
	}
	if msg.Action == tea.MouseActionPress && msg.Button == tea.MouseButtonLeft && msg.Y == l.Tabs.Y {
		for i, r := range tabSpans(l.Width) {
			if msg.X >= r[0] && msg.X < r[1] {
				m.setFocus(paneID(i))
			}
		}
		return nil
	}
	var n int
	switch msg.Button {
	case tea.MouseButtonWheelUp:
		n = -3
	case tea.MouseButtonWheelDown:
		n = 3
	default:
		return nil
	}
	target := m.focus
	for i, id := range sides(m.focus, len(l.Side)) {
		r := l.Side[i]
		if msg.X >= r.X && msg.X < r.X+r.W && msg.Y >= r.Y && msg.Y < r.Y+r.H {
			target = id
		}
	}
	if s, ok := m.panes[target].(scroller); ok {
		s.Scroll(n)
	}
	return nil
}

// View draws the whole screen: exactly Height lines of exactly Width cells.
func (m *model) View() string {
	l := m.layout
	if l.Width <= 0 || l.Height <= 0 {
		return ""
	}
	t := m.sh.theme
	if l.TooSmall {
		lines := block("", l.Width, l.Height)
		lines[0] = fit(fmt.Sprintf("terminal %d×%d is too small: agentrl-tui needs %d×%d", l.Width, l.Height, MinWidth, MinHeight), l.Width)
		return strings.Join(lines, "\n")
	}
	out := make([]string, 0, l.Height)
	out = append(out, m.tabsView(l.Width))
	out = append(out, m.strip(l.Strip.W, l.Strip.H)...)
	if m.showHelp {
		w := l.Width
		iw, ih := inner(w, l.Body.H)
		txt := helpView(t, m.sh.keys, m.focus, iw, ih+m.helpTop)
		lines := strings.Split(txt, "\n")
		out = append(out, t.box("Help — esc closes", strings.Join(window(lines, m.helpTop, ih), "\n"), w, l.Body.H, true)...)
	} else {
		body := t.box(m.title(m.focus), m.panes[m.focus].View(), l.Body.W, l.Body.H, true)
		if len(l.Side) > 0 {
			var side []string
			for i, id := range sides(m.focus, len(l.Side)) {
				r := l.Side[i]
				side = append(side, t.box(m.title(id), m.panes[id].View(), r.W, r.H, false)...)
			}
			body = joinColumns(body, side)
		}
		out = append(out, body...)
	}
	foot := m.footer(l.Width)
	if n := min(len(foot)-1, l.Body.H); n > 0 { // a note longer than a row covers the body's last rows
		out = out[:len(out)-n]
		foot = foot[len(foot)-n-1:]
	}
	out = append(out, foot...)
	return strings.Join(out, "\n")
}

// title is a pane's frame title: its number, name and its own few words.
func (m *model) title(p paneID) string {
	s := fmt.Sprintf("%d %s", int(p)+1, p)
	if tt, ok := m.panes[p].(titler); ok {
		if sub := tt.Subtitle(); sub != "" {
			s += " · " + sub
		}
	}
	return s
}

// tabSpans gives each tab's [start, end) columns in a row of width w.
func tabSpans(w int) [][2]int {
	full := w >= tabsWidth()
	spans := make([][2]int, numPanes)
	x := 0
	for p := paneStatus; p < numPanes; p++ {
		n := width(tabLabel(p, full))
		spans[p] = [2]int{x, x + n}
		x += n
	}
	return spans
}

func tabLabel(p paneID, full bool) string {
	if full {
		return fmt.Sprintf(" %d %s ", int(p)+1, p)
	}
	return fmt.Sprintf(" %d ", int(p)+1)
}

func tabsWidth() int {
	n := 0
	for p := paneStatus; p < numPanes; p++ {
		n += width(tabLabel(p, true))
	}
	return n
}

// tabsView is the first row: the panes by number, the focused one marked.
func (m *model) tabsView(w int) string {
	t := m.sh.theme
	full := w >= tabsWidth()
	var sb strings.Builder
	for p := paneStatus; p < numPanes; p++ {
		label := tabLabel(p, full)
		if p == m.focus {
			if !full {
				label = fmt.Sprintf(" %d %s ", int(p)+1, p)
			}
			sb.WriteString(t.TabActive.Render("[" + label[1:len(label)-1] + "]"))
		} else {
			sb.WriteString(t.TabIdle.Render(label))
		}
	}
	rest := w - width(sb.String())
	tails := []string{"? help · q quit", "? help"}
	if m.sh.ctrl == nil {
		tails = []string{"view (read-only) · ? help · q quit", "read-only · ? help", "? help"}
	}
	for _, tail := range tails {
		if width(tail)+1 <= rest {
			sb.WriteString(t.Faint.Render(fitRight(tail, rest)))
			break
		}
	}
	return fit(sb.String(), w)
}

// footer is the last row: a confirmation, a message, or the focused pane's keys. A message
// longer than the row takes the rows above it, whole: its words wrapped, and a shell command
// under it broken into lines that end in a backslash (a shell reads them as one command when pasted).
func (m *model) footer(w int) []string {
	t := m.sh.theme
	switch {
	case m.confirm != "":
		return []string{t.Alarm.Render(fit(" "+m.confirm, w))}
	case m.note != "" || len(m.noteCmd) > 0:
		st := t.Accent
		if m.noteBad {
			st = t.Bad
		}
		var out []string
		for _, l := range wrap(m.note, max(w-1, 1)) {
			out = append(out, st.Render(fit(" "+l, w)))
		}
		for _, l := range shellLines(m.noteCmd, w) {
			out = append(out, st.Render(fit(l, w)))
		}
		return out
	}
	g := m.sh.keys.Global
	tail := short(t, []key.Binding{g.Help, g.Quit})
	bs := append(m.panes[m.focus].ShortHelp(), g.Pause, g.Stop, g.Ack)
	room := w - 1
	if tw := width(tail); w > tw+20 {
		room = w - tw - 2
		return []string{fit(" "+footKeys(t, bs, room), w-tw-1) + " " + tail}
	}
	return []string{fit(" "+footKeys(t, bs, room), w)}
}

// footKeys is the footer's list of bindings in w cells: all of them where they fit; else the
// pane's actions before its movement keys (the same in every list), in order as long as they fit
// whole, the rest left to the help (?). A key listed twice is listed once.
func footKeys(t *Theme, bs []key.Binding, w int) string {
	var uniq []key.Binding
	seen := map[string]bool{}
	for _, b := range bs {
		if k := b.Help().Key; b.Enabled() && !seen[k] {
			seen[k] = true
			uniq = append(uniq, b)
		}
	}
	if s := short(t, uniq); width(s) <= w {
		return s
	}
	var acts, moves []key.Binding
	for _, b := range uniq {
		switch b.Help().Key {
		case "↑/k", "↓/j", "g", "G", "pgup", "pgdn":
			moves = append(moves, b)
		default:
			acts = append(acts, b)
		}
	}
	var fits []key.Binding
	for _, b := range append(acts, moves...) {
		if width(short(t, append(fits, b))) > w {
			break
		}
		fits = append(fits, b)
	}
	return short(t, fits)
}

// shellLines breaks the words of a shell command into lines of at most w cells, each but the
// last ending in a backslash, the ones after the first indented; a word longer than a line has one of
// its own.
func shellLines(words []string, w int) []string {
	if len(words) == 0 {
		return nil
	}
	var out []string
	line := " " + words[0]
	for _, word := range words[1:] {
		if width(line)+1+width(word)+2 > w {
			out = append(out, line+" \\")
			line = "   " + word
			continue
		}
		line += " " + word
	}
	return append(out, line)
}
