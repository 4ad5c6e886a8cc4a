package ui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"agentrl/engine/event"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// filterSpec is a parsed filter: space-separated terms that must all hold. Terms: correct (ok),
// wrong, hinted, unhinted, err (a tool error), eval (a held-out evaluation's), train (a training
// step's), dropped (an external agent's trajectory that was dropped) and !dropped, drop:KIND
// (crashed, timeout, no_result, …), paused (a partial rollout's trajectory paused unfinished),
// resumed (one sampled over several steps' rollouts), step:N or step:N-M, reward>x / reward<x (>=, <= too),
// task:TEXT; any other word must occur in the task id or the prompt.
type filterSpec struct {
	preds []func(*event.Trajectory) bool
}

func parseFilter(s string) (filterSpec, error) {
	var f filterSpec
	for _, term := range strings.Fields(strings.ToLower(s)) {
		switch term {
		case "correct", "ok":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.Correct })
			continue
		case "wrong", "!correct":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return !t.Correct })
			continue
		case "hinted", "hint":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.Hint != "" })
			continue
		case "unhinted", "!hinted":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.Hint == "" })
			continue
		case "err", "error", "errors":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.ToolErrors > 0 })
			continue
		case "eval", "evaluation":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.Eval })
			continue
		case "train", "training", "!eval":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return !t.Eval })
			continue
		case "dropped", "drop":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.IsDropped() })
			continue
		case "paused":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.Paused })
			continue
		case "resumed":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return len(t.Segments) > 1 })
			continue
		case "!dropped", "!drop":
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return !t.IsDropped() })
			continue
		}
		if kind, ok := strings.CutPrefix(term, "drop:"); ok {
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.IsDropped() && strings.EqualFold(t.Agent.Drop, kind) })
			continue
		}
		if v, ok := strings.CutPrefix(term, "step:"); ok {
			lo, hi, found := strings.Cut(v, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return f, fmt.Errorf("step:%s is not a step or a range N-M", v)
			}
			b := a
			if found {
				if b, err = strconv.Atoi(hi); err != nil {
					return f, fmt.Errorf("step:%s is not a step or a range N-M", v)
				}
			}
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return t.Step >= a && t.Step <= b })
			continue
		}
		if v, ok := strings.CutPrefix(term, "reward"); ok && v != "" && strings.ContainsAny(v[:1], "<>=") {
			op := v[:1]
			if len(v) > 1 && v[1] == '=' {
				op = v[:2]
			}
			x, err := strconv.ParseFloat(v[len(op):], 64)
			if err != nil {
				return f, fmt.Errorf("%s: want reward>x, reward<x, reward>=x or reward<=x", term)
			}
			var p func(float64) bool
			switch op {
			case ">":
				p = func(r float64) bool { return r > x }
			case "<":
				p = func(r float64) bool { return r < x }
			case ">=":
				p = func(r float64) bool { return r >= x }
			case "<=":
				p = func(r float64) bool { return r <= x }
			default: // "=" or "=="
				p = func(r float64) bool { return r == x }
			}
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return p(t.Reward.Total) })
			continue
		}
		if v, ok := strings.CutPrefix(term, "task:"); ok {
			f.preds = append(f.preds, func(t *event.Trajectory) bool { return containsFold(t.TaskID, v) })
			continue
		}
		word := term
		f.preds = append(f.preds, func(t *event.Trajectory) bool {
			return containsFold(t.TaskID, word) || containsFold(t.Prompt, word)
		})
	}
	return f, nil
}

// containsFold reports whether s contains the lower-case needle, ignoring case (ASCII).
func containsFold(s, lowerNeedle string) bool {
	n := len(lowerNeedle)
	if n == 0 {
		return true
	}
outer:
	for i := 0; i+n <= len(s); i++ {
		for j := 0; j < n; j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lowerNeedle[j] {
				continue outer
			}
		}
		return true
	}
	return false
}

func (f filterSpec) match(t *event.Trajectory) bool {
	for _, p := range f.preds {
		if !p(t) {
			return false
		}
	}
	return true
}

// sortKeys are the orders `s` cycles through; arrival is the order the engine sent them.
var sortKeys = []struct {
	name string
	less func(a, b *event.Trajectory) int
}{
	{"arrival", nil},
	{"reward", func(a, b *event.Trajectory) int { return cmpF(a.Reward.Total, b.Reward.Total) }},
	{"tokens", func(a, b *event.Trajectory) int { return a.Tokens - b.Tokens }},
	{"turns", func(a, b *event.Trajectory) int { return len(a.Turns) - len(b.Turns) }},
	{"errors", func(a, b *event.Trajectory) int { return a.ToolErrors - b.ToolErrors }},
	{"task", func(a, b *event.Trajectory) int { return strings.Compare(a.TaskID, b.TaskID) }},
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// trajPane is the Trajectories pane: the live list with a filter, a sort and follow-latest.
// It keeps the filtered, sorted order as indices into runData.trajs and draws only the rows
// on screen.
type trajPane struct {
	paneBase
	keyHelp
	sh   *shared
	keys *listKeys
	open openRequest

	view  []int // indices into data.trajs, in display order
	seen  int   // trajectories already placed in view
	dirty bool  // view must be rebuilt (filter or sort changed)
	cur   listCursor

	sortBy int
	desc   bool
	follow bool
	kind   int // which trajectories: 0 all, 1 training, 2 evaluation (e cycles)

	filter  string // the applied filter
	spec    filterSpec
	editing bool
	edit    string // the filter being typed
	editErr string
	before  string // the filter in force when typing began (esc restores it)
}

func newTrajPane(sh *shared) *trajPane {
	p := &trajPane{sh: sh, keyHelp: keyHelp{sh.keys, paneTrajs}, keys: &sh.keys.Trajs, follow: true, dirty: true}
	p.refresh()
	return p
}

// rows is the number of list rows on screen (the info and header lines take two).
func (p *trajPane) rows() int { return max(p.h-2, 0) }

// refresh brings the order up to date with the data: new trajectories are appended when the
// order is arrival (the common live case), else the order is rebuilt.
func (p *trajPane) refresh() {
	trajs := p.sh.data.trajs
	if !p.dirty && p.seen == len(trajs) {
		return
	}
	if !p.dirty && p.sortBy == 0 && !p.desc {
		for i := p.seen; i < len(trajs); i++ {
			if p.shows(&trajs[i]) {
				p.view = append(p.view, i)
			}
		}
	} else {
		p.view = p.view[:0]
		for i := range trajs {
			if p.shows(&trajs[i]) {
				p.view = append(p.view, i)
			}
		}
		if less := sortKeys[p.sortBy].less; less != nil {
			sort.SliceStable(p.view, func(i, j int) bool {
				return less(&trajs[p.view[i]], &trajs[p.view[j]]) < 0
			})
		}
		if p.desc {
			for i, j := 0, len(p.view)-1; i < j; i, j = i+1, j-1 {
				p.view[i], p.view[j] = p.view[j], p.view[i]
			}
		}
	}
	p.seen, p.dirty = len(trajs), false
	if p.follow {
		p.cur.cursor = p.positionOf(len(trajs) - 1)
	}
	p.cur.clampTo(len(p.view), p.rows())
}

// kinds are what e cycles through: every trajectory, the training steps', the evaluations'.
var kinds = []string{"all", "training", "evaluation"}

// shows reports whether t is listed: of the kind chosen and matching the filter.
func (p *trajPane) shows(t *event.Trajectory) bool {
	switch p.kind {
	case 1:
		if t.Eval {
			return false
		}
	case 2:
		if !t.Eval {
			return false
		}
	}
	return p.spec.match(t)
}

// positionOf returns the row showing trajectory idx, or the last row when it is filtered out.
func (p *trajPane) positionOf(idx int) int {
	if n := len(p.view); n > 0 && p.view[n-1] == idx {
		return n - 1
	}
	for i, v := range p.view {
		if v == idx {
			return i
		}
	}
	return len(p.view) - 1
}

// selected returns the trajectory index under the cursor (-1 when the list is empty).
func (p *trajPane) selected() int {
	if p.cur.cursor < 0 || p.cur.cursor >= len(p.view) {
		return -1
	}
	return p.view[p.cur.cursor]
}

func (p *trajPane) SetSize(w, h int) {
	p.paneBase.SetSize(w, h)
	p.cur.clampTo(len(p.view), p.rows())
}

func (p *trajPane) takeOpen() (int, bool) { return p.open.takeOpen() }

func (p *trajPane) Capturing() bool { return p.editing }

func (p *trajPane) Back() bool {
	if p.filter != "" {
		p.setFilter("")
		return true
	}
	return false
}

func (p *trajPane) Scroll(n int) {
	p.follow = false
	p.cur.cursor += n
	p.cur.clampTo(len(p.view), p.rows())
}

func (p *trajPane) setFilter(s string) error {
	spec, err := parseFilter(s)
	if err != nil {
		return err
	}
	sel := p.selected()
	p.filter, p.spec, p.dirty = strings.TrimSpace(s), spec, true
	p.refresh()
	if !p.follow && sel >= 0 {
		p.cur.cursor = p.positionOf(sel)
		p.cur.clampTo(len(p.view), p.rows())
	}
	return nil
}

func (p *trajPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case dataMsg:
		if msg.ch&chTraj != 0 {
			p.refresh()
		}
	case tea.KeyMsg:
		if p.editing {
			return p.editKey(msg)
		}
		return p.key(msg)
	}
	return nil
}

// editKey edits the filter as it is typed, applying it live; enter keeps it, esc restores the
// one before.
func (p *trajPane) editKey(msg tea.KeyMsg) tea.Cmd {
	switch msg.Type {
	case tea.KeyEnter:
		p.editing = false
		if err := p.setFilter(p.edit); err != nil {
			p.editing, p.editErr = true, err.Error()
		}
		return nil
	case tea.KeyEsc:
		p.editing, p.editErr = false, ""
		p.setFilter(p.before)
		return nil
	case tea.KeyBackspace:
		if r := []rune(p.edit); len(r) > 0 {
			p.edit = string(r[:len(r)-1])
		}
	case tea.KeyCtrlU:
		p.edit = ""
	case tea.KeySpace:
		p.edit += " "
	case tea.KeyRunes:
		p.edit += string(msg.Runes)
	default:
		return nil
	}
	if spec, err := parseFilter(p.edit); err == nil {
		p.editErr = ""
		p.filter, p.spec, p.dirty = strings.TrimSpace(p.edit), spec, true
		p.refresh()
	} else {
		p.editErr = err.Error()
	}
	return nil
}

func (p *trajPane) key(msg tea.KeyMsg) tea.Cmd {
	k := p.keys
	if p.cur.move(msg, k, len(p.view), p.rows()) {
		p.follow = false
		return nil
	}
	switch {
	case key.Matches(msg, k.Open):
		p.open.request(p.selected())
	case key.Matches(msg, k.Filter):
		p.editing, p.edit, p.editErr, p.before = true, p.filter, "", p.filter
	case key.Matches(msg, k.Sort), key.Matches(msg, k.Reverse):
		sel := p.selected()
		if key.Matches(msg, k.Sort) {
			p.sortBy = (p.sortBy + 1) % len(sortKeys)
			p.desc = p.sortBy != 0 // highest first for the numbers, oldest first for arrival
			if sortKeys[p.sortBy].name == "task" {
				p.desc = false
			}
		} else {
			p.desc = !p.desc
		}
		p.dirty = true
		p.refresh()
		if !p.follow && sel >= 0 {
			p.cur.cursor = p.positionOf(sel)
			p.cur.clampTo(len(p.view), p.rows())
		}
	case key.Matches(msg, k.Kind):
		sel := p.selected()
		p.kind = (p.kind + 1) % len(kinds)
		p.dirty = true
		p.refresh()
		if !p.follow && sel >= 0 {
			p.cur.cursor = p.positionOf(sel)
			p.cur.clampTo(len(p.view), p.rows())
		}
	case key.Matches(msg, k.Follow):
		p.follow = !p.follow
		if p.follow {
			p.cur.cursor = p.positionOf(len(p.sh.data.trajs) - 1)
			p.cur.clampTo(len(p.view), p.rows())
		}
	}
	return nil
}

func (p *trajPane) Subtitle() string {
	n := len(p.sh.data.trajs)
	s := fmt.Sprintf("%d", n)
	if p.filter != "" || p.kind != 0 {
		s = fmt.Sprintf("%d of %d", len(p.view), n)
	}
	if e := p.sh.data.evalTrajs; e > 0 {
		s += fmt.Sprintf(" (%d eval)", e)
	}
	return s
}

// trajColumn is one column of the list.
type trajColumn struct {
	title string
	w     int
	right bool
	cell  func(t *event.Trajectory) string
}

func check(b bool) string {
	if b {
		return "✓"
	}
	return "✗"
}

var allTrajColumns = []trajColumn{
	{"step", 5, true, func(t *event.Trajectory) string { return strconv.Itoa(t.Step) }},
	{"set", 5, false, func(t *event.Trajectory) string {
		if t.Eval {
			return "eval"
		}
		return "train"
	}},
	{"task", 0, false, func(t *event.Trajectory) string { return t.TaskID }},
	{"#", 4, true, func(t *event.Trajectory) string { return strconv.Itoa(t.Sample) }},
	{"reward", 7, true, func(t *event.Trajectory) string {
		if t.IsDropped() {
			return dropLabel(t.Agent.Drop)
		}
		if t.Paused {
			return "paused"
		}
		return strconv.FormatFloat(t.Reward.Total, 'f', 3, 64)
	}},
	{"ok", 3, true, func(t *event.Trajectory) string {
		if t.IsDropped() {
			return "⊘"
		}
		if t.Paused {
			return "⏸"
		}
		if len(t.Segments) > 1 {
			return check(t.Correct) + "↻"
		}
		return check(t.Correct)
	}},
	{"turns", 6, true, func(t *event.Trajectory) string { return strconv.Itoa(len(t.Turns)) }},
	{"err", 4, true, func(t *event.Trajectory) string { return strconv.Itoa(t.ToolErrors) }},
	{"hint", 5, true, func(t *event.Trajectory) string {
		if t.Hint != "" {
			return "✓"
		}
		return "·"
	}},
	{"tokens", 7, true, func(t *event.Trajectory) string { return strconv.Itoa(t.Tokens) }},
}

// dropLabel names a dropped trajectory's reason in the reward column's 7 cells.
func dropLabel(kind string) string {
	switch kind {
	case "crashed":
		return "crash"
	case "no_result":
		return "no-res"
	case "bad_result":
		return "bad-res"
	case "no_requests":
		return "no-req"
	case "not_started":
		return "no-run"
	case "cancelled":
		return "cancel"
	}
	return kind
}

// dropOrder is the order columns go when the pane is narrow (indices into allTrajColumns).
var dropOrder = []int{8, 3, 7, 6, 9, 1}

// columns picks the columns that fit w (the task column takes what is left, at least 8).
func columns(w int) ([]trajColumn, int) {
	keep := make([]bool, len(allTrajColumns))
	for i := range keep {
		keep[i] = true
	}
	fixed := func() int {
		n := 2 // the cursor mark
		for i, c := range allTrajColumns {
			if keep[i] {
				n += c.w + 1
			}
		}
		return n
	}
	for _, d := range dropOrder {
		if w-fixed() >= 8 {
			break
		}
		keep[d] = false
	}
	var out []trajColumn
	for i, c := range allTrajColumns {
		if keep[i] {
			out = append(out, c)
		}
	}
	return out, max(w-fixed(), 1)
}

func (p *trajPane) View() string {
	t := p.sh.theme
	if p.h <= 0 || p.w <= 0 {
		return ""
	}
	lines := make([]string, 0, p.h)
	// info line: the filter being typed, or the order, follow and filter in force
	var info string
	switch {
	case p.editing:
		info = t.Accent.Render("/") + " " + p.edit + "█"
		if p.editErr != "" {
			info += "  " + t.Bad.Render(p.editErr)
		} else {
			info += t.Faint.Render(fmt.Sprintf("  %d match · enter keeps · esc cancels", len(p.view)))
		}
	default:
		dir := "↑"
		if p.desc {
			dir = "↓"
		}
		parts := []string{"sort " + sortKeys[p.sortBy].name + " " + dir}
		if p.follow {
			parts = append(parts, "following latest")
		} else {
			parts = append(parts, "follow off (f)")
		}
		if p.kind != 0 {
			parts = append(parts, kinds[p.kind]+" only (e)")
		}
		if p.filter != "" {
			parts = append(parts, "filter: "+p.filter+" (esc clears)")
		} else {
			parts = append(parts, "/ filters")
		}
		info = t.Faint.Render(strings.Join(parts, " · "))
	}
	lines = append(lines, fit(info, p.w))
	if p.h == 1 {
		return lines[0]
	}
	cols, taskW := columns(p.w)
	var hb strings.Builder
	hb.WriteString("  ")
	for _, c := range cols {
		cw := c.w
		if cw == 0 {
			cw = taskW
		}
		if c.right {
			hb.WriteString(fitRight(c.title, cw))
		} else {
			hb.WriteString(fit(c.title, cw))
		}
		hb.WriteByte(' ')
	}
	lines = append(lines, t.Bold.Render(fit(hb.String(), p.w)))
	trajs := p.sh.data.trajs
	if len(p.view) == 0 {
		msg := "no trajectories yet"
		switch {
		case p.filter != "":
			msg = "no trajectory matches the filter"
		case p.kind != 0:
			msg = "no " + kinds[p.kind] + " trajectories yet (e shows the others)"
		}
		lines = append(lines, t.Faint.Render(fit("  "+msg, p.w)))
	}
	end := min(p.cur.offset+p.rows(), len(p.view))
	for i := p.cur.offset; i < end; i++ {
		tr := &trajs[p.view[i]]
		var sb strings.Builder
		sel := i == p.cur.cursor
		if sel {
			sb.WriteString("› ")
		} else {
			sb.WriteString("  ")
		}
		for _, c := range cols {
			cw := c.w
			if cw == 0 {
				cw = taskW
			}
			v := c.cell(tr)
			if c.right {
				v = fitRight(v, cw)
			} else {
				v = fit(v, cw)
			}
			if c.title == "ok" && !sel {
				if tr.Correct {
					v = t.Good.Render(v)
				} else {
					v = t.Bad.Render(v)
				}
			}
			sb.WriteString(v)
			sb.WriteByte(' ')
		}
		row := fit(sb.String(), p.w)
		if sel {
			row = t.Selected.Render(row)
		}
		lines = append(lines, row)
	}
	return strings.Join(lines, "\n")
}
