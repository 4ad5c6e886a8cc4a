package ui

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"agentrl/engine/event"
	"agentrl/store"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// Labels of the best checkpoint's row: chosen by the run (its early-stopping metric) or
// marked by the user.
const (
	bestAuto   = "best*"
	bestManual = "★ manual"
)

// ckptPane is the Checkpoints pane: each saved checkpoint with its pass@k, reward, size and id;
// the best one marked, which the user may override (b), export (e); c shows the selected one's
// whole id and the command that exports it, and copies the command; S stops the run after this
// step.
type ckptPane struct {
	paneBase
	keyHelp
	sh  *shared
	cur listCursor
	n   int // checkpoints when the cursor last followed them
}

func newCkptPane(sh *shared) *ckptPane {
	p := &ckptPane{sh: sh, keyHelp: keyHelp{sh.keys, paneCkpts}}
	p.follow()
	return p
}

// rows is the number of table rows on screen (header above; below, for an interrupted run
// where it stood and what continues it, then the selected checkpoint's id and the best legend).
func (p *ckptPane) rows() int {
	if p.interrupted() != nil {
		return max(p.h-5, 0)
	}
	return max(p.h-3, 0)
}

// interrupted is the end of a stored run whose process is gone (the view's), else nil.
func (p *ckptPane) interrupted() *event.RunEnd {
	if e := p.sh.data.end; e != nil && e.Status == store.StatusInterrupted {
		return e
	}
	return nil
}

// follow keeps the cursor on the newest checkpoint while it was on the newest before.
func (p *ckptPane) follow() {
	n := len(p.sh.data.ckpts)
	if p.cur.cursor >= p.n-1 {
		p.cur.cursor = n - 1
	}
	p.n = n
	p.cur.clampTo(n, p.rows())
}

func (p *ckptPane) SetSize(w, h int) {
	p.paneBase.SetSize(w, h)
	p.cur.clampTo(len(p.sh.data.ckpts), p.rows())
}

func (p *ckptPane) Scroll(n int) {
	p.cur.cursor += n
	p.cur.clampTo(len(p.sh.data.ckpts), p.rows())
}

// selectedStep is the step of the checkpoint under the cursor (-1 when there is none).
func (p *ckptPane) selectedStep() int {
	c := p.sh.data.ckpts
	if p.cur.cursor < 0 || p.cur.cursor >= len(c) {
		return -1
	}
	return c[p.cur.cursor].Step
}

// id is checkpoint c's id: the one it was announced with, else the run's id and its step, as the
// store keys it (the live engine announces its checkpoints without one).
func (p *ckptPane) id(c event.Checkpoint) string {
	if c.ID != "" {
		return c.ID
	}
	run := p.sh.runID
	if run == "" {
		run = p.sh.data.start.RunID
	}
	return fmt.Sprintf("%s/%d", run, c.Step)
}

// storePath is the store the workbench reads ("runs/agentrl.db", the commands' default, without one).
func (p *ckptPane) storePath() string {
	if p.sh.store != nil {
		return p.sh.store.Path()
	}
	return "runs/agentrl.db"
}

// exportArgs are the words of the shell command that exports checkpoint c from the store to
// where the workbench's own export (e) writes it: export/RUN-stepN beside the store.
func (p *ckptPane) exportArgs(c event.Checkpoint) []string {
	id := p.id(c)
	run := id
	if i := strings.LastIndex(id, "/"); i > 0 {
		run = id[:i]
	}
	st := p.storePath()
	out := filepath.Join(filepath.Dir(st), "export", fmt.Sprintf("%s-step%d", run, c.Step))
	return []string{"agentrl-tui", "export", "--store", shellQuote(st), "--run", shellQuote(run), "--step", fmt.Sprint(c.Step), shellQuote(out)}
}

// shellSafe are the words a POSIX shell reads as they are.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote quotes s for a POSIX shell where it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// showExport puts the selected checkpoint's whole id and the command that exports it in the
// footer (as many lines as they take, never cut) and on the terminal's clipboard.
func (p *ckptPane) showExport(prefix string) tea.Cmd {
	d := p.sh.data
	if p.cur.cursor < 0 || p.cur.cursor >= len(d.ckpts) {
		return note("no checkpoint saved yet", false)
	}
	c := d.ckpts[p.cur.cursor]
	args := p.exportArgs(c)
	how := " · export it from a shell with"
	if p.sh.keys.Ckpts.Export.Enabled() && p.sh.data.end == nil {
		// the run holds its store: a shell opens it once the run has ended
		how = " · e exports it now, a shell once the run has ended, with"
	}
	var cmds []tea.Cmd
	if cb := p.sh.clipboard; cb != nil {
		line := strings.Join(args, " ")
		cmds = append(cmds, func() tea.Msg { cb(line); return nil })
		how += " (also sent to the clipboard)"
	}
	text := prefix + "checkpoint " + p.id(c) + how + ":"
	cmds = append(cmds, func() tea.Msg { return noteMsg{text: text, cmd: args} })
	return tea.Sequence(cmds...)
}

func (p *ckptPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case dataMsg:
		if msg.ch&chCkpt != 0 {
			p.follow()
		}
	case tea.KeyMsg:
		k := &p.sh.keys.Ckpts
		n := len(p.sh.data.ckpts)
		switch {
		case key.Matches(msg, k.Up):
			p.cur.cursor--
		case key.Matches(msg, k.Down):
			p.cur.cursor++
		case key.Matches(msg, k.Top):
			p.cur.cursor = 0
		case key.Matches(msg, k.Bottom):
			p.cur.cursor = n - 1
		case disabledKey(msg, k.Mark):
			return note("read-only view: the best checkpoint is the one the run chose (mark one in the run's own workbench)", false)
		case disabledKey(msg, k.Export):
			return p.showExport("read-only view: ")
		case key.Matches(msg, k.Copy):
			return p.showExport("")
		case key.Matches(msg, k.Mark):
			step, c := p.selectedStep(), p.sh.ctrl
			if step < 0 {
				return note("no checkpoint to mark", false)
			}
			return func() tea.Msg { return ctrlMsg{act: ActionMarkBest, step: step, err: c.MarkBest(step)} }
		case key.Matches(msg, k.Export):
			step, c := p.selectedStep(), p.sh.ctrl
			if step < 0 {
				return note("no checkpoint to export", false)
			}
			return tea.Sequence(note(fmt.Sprintf("exporting step %d…", step), false), func() tea.Msg {
				path, err := c.Export(step)
				return ctrlMsg{act: ActionExport, step: step, path: path, err: err}
			})
		}
		p.cur.clampTo(n, p.rows())
	}
	return nil
}

func (p *ckptPane) Subtitle() string {
	if n := len(p.sh.data.ckpts); n > 0 {
		return fmt.Sprintf("%d saved", n)
	}
	return ""
}

// bestW is the width of the best column: its longest label.
var bestW = max(width(bestAuto), width(bestManual))

// View draws the table, with the id column where the longest id fits whole (the selected
// checkpoint's id is under the table in any case), the selected checkpoint's line and the legend.
func (p *ckptPane) View() string {
	d, t := p.sh.data, p.sh.theme
	if p.w <= 0 || p.h <= 0 {
		return ""
	}
	ks := d.ks()
	if len(ks) > 4 { // the smallest, then the three largest
		ks = append([]int{ks[0]}, ks[len(ks)-3:]...)
	}
	// on a narrow pane, fewer pass@k columns (the smallest and the largest k, then the
	// largest), then no size, rather than rows cut short
	sizeW := 11
	tableW := func() int { return 2 + 6 + 9*len(ks) + 9 + sizeW + 2 + bestW }
	for len(ks) > 2 && tableW() > p.w {
		ks = []int{ks[0], ks[len(ks)-1]}
	}
	for len(ks) > 1 && tableW() > p.w {
		ks = ks[len(ks)-1:]
	}
	if tableW() > p.w {
		sizeW = 0
	}
	idW := 0
	for _, c := range d.ckpts {
		idW = max(idW, width(p.id(c)))
	}
	showID := tableW()+1+idW <= p.w
	var hb strings.Builder
	hb.WriteString("  " + fitRight("step", 6))
	for _, k := range ks {
		hb.WriteString(fitRight(fmt.Sprintf("pass@%d", k), 9))
	}
	hb.WriteString(fitRight("reward", 9) + fitRight("size", sizeW) + "  " + fit("best", bestW))
	if showID {
		hb.WriteString(" id")
	}
	lines := []string{t.Bold.Render(fit(hb.String(), p.w))}
	best, manual := d.bestStep()
	if len(d.ckpts) == 0 {
		lines = append(lines, t.Faint.Render(fit("  no checkpoint saved yet", p.w)))
	}
	p.cur.clampTo(len(d.ckpts), p.rows())
	for i := p.cur.offset; i < len(d.ckpts) && i < p.cur.offset+p.rows(); i++ {
		c := d.ckpts[i]
		sel := i == p.cur.cursor
		var sb strings.Builder
		if sel {
			sb.WriteString("› ")
		} else {
			sb.WriteString("  ")
		}
		sb.WriteString(fitRight(fmt.Sprint(c.Step), 6))
		e, hasEval := d.evalAt(c.Step)
		for _, k := range ks {
			v := "–"
			if x, ok := e.PassAtK[k]; hasEval && ok {
				v = fmt.Sprintf("%.3f", x)
			}
			sb.WriteString(fitRight(v, 9))
		}
		r := "–"
		if m, ok := d.metricStep[c.Step][event.MetricRewardMean]; ok {
			r = fmt.Sprintf("%.3f", m)
		}
		sb.WriteString(fitRight(r, 9))
		sb.WriteString(fitRight(fmtBytes(float64(c.Bytes)), sizeW))
		label := ""
		if c.Step == best {
			label = bestAuto
			if manual {
				label = bestManual
			}
		}
		sb.WriteString("  " + fit(label, bestW))
		if showID {
			sb.WriteString(" " + p.id(c))
		}
		row := fit(sb.String(), p.w)
		switch {
		case sel:
			row = t.Selected.Render(row)
		case c.Step == best:
			row = t.Good.Render(row)
		}
		lines = append(lines, row)
	}
	// below the table: where an interrupted run stood, the selected checkpoint, the legend
	var bottom []string
	if e := p.interrupted(); e != nil && p.h >= 5 { // the process is gone: where it stood, what continues it
		bottom = append(bottom, t.Warn.Render(fit(store.InterruptedLine(e.Step, e.Checkpoint)+" ("+e.Reason+")", p.w)),
			t.Warn.Render(fit(e.Detail, p.w)))
	}
	if p.h >= 3 {
		bottom = append(bottom, fit(p.selectedLine(), p.w))
	}
	legend := bestAuto + " the run's own pick (its eval metric) · " + bestManual + " marked with b"
	if p.sh.ctrl == nil {
		legend = bestAuto + " the run's best checkpoint · read-only view"
	}
	if p.h >= 2 {
		bottom = append(bottom, t.Faint.Render(fit(legend, p.w)))
	}
	for len(lines) < p.h-len(bottom) {
		lines = append(lines, fit("", p.w))
	}
	return strings.Join(append(lines[:min(len(lines), max(p.h-len(bottom), 0))], bottom...), "\n")
}

// selectedLine names the checkpoint under the cursor by its whole id and says how to get the
// command that exports it: in the fewest words that keep the id whole.
func (p *ckptPane) selectedLine() string {
	d := p.sh.data
	if p.cur.cursor < 0 || p.cur.cursor >= len(d.ckpts) {
		return ""
	}
	c := d.ckpts[p.cur.cursor]
	id := p.id(c)
	for _, s := range []string{
		fmt.Sprintf("› step %d: %s · c shows and copies its export command", c.Step, id),
		fmt.Sprintf("› step %d: %s · c: export command", c.Step, id),
		fmt.Sprintf("› %s · c: export command", id),
	} {
		if width(s) <= p.w {
			return s
		}
	}
	return "› " + id
}

// disabledKey is a press of one of b's keys while b is off (a read-only view's run actions), so
// that the pane can say why nothing happens instead of staying silent.
func disabledKey(msg tea.KeyMsg, b key.Binding) bool {
	return !b.Enabled() && slices.Contains(b.Keys(), msg.String())
}
