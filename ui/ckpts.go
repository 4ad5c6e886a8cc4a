package ui

import (
	"fmt"
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

// ckptPane is the Checkpoints pane: each saved checkpoint with its pass@k, reward and size; the
// best one marked, which the user may override (b), export (e); S stops the run after this step.
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

// rows is the number of table rows on screen (header above, best legend below, and for an
// interrupted run where it stood and what continues it).
func (p *ckptPane) rows() int {
	if p.interrupted() != nil {
		return max(p.h-4, 0)
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
			return note("read-only view: export a stored checkpoint with `agentrl-tui export --store PATH --run RUN --step S OUT_DIR`", false)
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

func (p *ckptPane) View() string {
	d, t := p.sh.data, p.sh.theme
	if p.w <= 0 || p.h <= 0 {
		return ""
	}
	ks := d.ks()
	if len(ks) > 4 { // the smallest, then the three largest
		ks = append([]int{ks[0]}, ks[len(ks)-3:]...)
	}
	var hb strings.Builder
	hb.WriteString("  " + fitRight("step", 6))
	for _, k := range ks {
		hb.WriteString(fitRight(fmt.Sprintf("pass@%d", k), 9))
	}
	hb.WriteString(fitRight("reward", 9) + fitRight("size", 11) + "  " + fit("best", 10) + " id")
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
		sb.WriteString(fitRight(fmtBytes(float64(c.Bytes)), 11))
		label := ""
		if c.Step == best {
			label = bestAuto
			if manual {
				label = bestManual
			}
		}
		sb.WriteString("  " + fit(label, 10) + " " + c.ID)
		row := fit(sb.String(), p.w)
		switch {
		case sel:
			row = t.Selected.Render(row)
		case c.Step == best:
			row = t.Good.Render(row)
		}
		lines = append(lines, row)
	}
	for len(lines) < p.h-1 {
		lines = append(lines, fit("", p.w))
	}
	if e := p.interrupted(); e != nil && p.h >= 4 { // the process is gone: where it stood, what continues it
		lines[p.h-3] = t.Warn.Render(fit(store.InterruptedLine(e.Step, e.Checkpoint)+" ("+e.Reason+")", p.w))
		lines[p.h-2] = t.Warn.Render(fit(e.Detail, p.w))
	}
	legend := bestAuto + " the run's own pick (its eval metric) · " + bestManual + " marked with b"
	if p.sh.ctrl == nil {
		legend = bestAuto + " the run's best checkpoint · read-only view"
	}
	if p.h >= 2 {
		lines = append(lines, t.Faint.Render(fit(legend, p.w)))
	}
	return strings.Join(lines, "\n")
}

// disabledKey is a press of one of b's keys while b is off (a read-only view's run actions), so
// that the pane can say why nothing happens instead of staying silent.
func disabledKey(msg tea.KeyMsg, b key.Binding) bool {
	return !b.Enabled() && slices.Contains(b.Keys(), msg.String())
}
