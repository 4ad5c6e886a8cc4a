package ui

import (
	"fmt"
	"sort"
	"strings"

	"agentrl/engine/event"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// hintsPane is the Hints pane: the share of trajectories hinted per step, then the recent
// bridge thoughts, newest first, each with the trajectory it came from (enter opens it).
type hintsPane struct {
	paneBase
	keyHelp
	sh   *shared
	cur  listCursor
	seen int // hints counted when the cursor last moved with them
	open openRequest
}

func (p *hintsPane) takeOpen() (int, bool) { return p.open.takeOpen() }

func newHintsPane(sh *shared) *hintsPane {
	return &hintsPane{sh: sh, keyHelp: keyHelp{sh.keys, paneHints}, seen: len(sh.data.hinted)}
}

// shareRows is how many per-step rows are shown above the list.
func (p *hintsPane) shareRows() int {
	switch {
	case p.h >= 20:
		return 4
	case p.h >= 10:
		return 2
	case p.h >= 6:
		return 1
	}
	return 0
}

// listRows is the number of hint rows on screen: the share block takes its rows, a sparkline
// row and a separator.
func (p *hintsPane) listRows() int {
	used := 0
	if n := p.shareRows(); n > 0 {
		used = n + 2
	}
	return max(p.h-used, 0)
}

// selected returns the trajectory index of the hint under the cursor (-1 none).
func (p *hintsPane) selected() int {
	h := p.sh.data.hinted
	if p.cur.cursor < 0 || p.cur.cursor >= len(h) {
		return -1
	}
	return h[len(h)-1-p.cur.cursor]
}

func (p *hintsPane) SetSize(w, h int) {
	p.paneBase.SetSize(w, h)
	p.cur.clampTo(len(p.sh.data.hinted), p.listRows())
}

func (p *hintsPane) Scroll(n int) {
	p.cur.cursor += n
	p.cur.clampTo(len(p.sh.data.hinted), p.listRows())
}

func (p *hintsPane) Update(msg tea.Msg) tea.Cmd {
	n := len(p.sh.data.hinted)
	switch msg := msg.(type) {
	case dataMsg:
		if p.cur.cursor > 0 {
			// keep the same hint selected while new ones arrive on top
			p.cur.cursor += n - p.seen
		}
		p.seen = n
		p.cur.clampTo(n, p.listRows())
	case tea.KeyMsg:
		k := &p.sh.keys.Hints
		if p.cur.move(msg, k, n, p.listRows()) {
			return nil
		}
		if key.Matches(msg, k.Open) {
			p.open.request(p.selected())
		}
	}
	return nil
}

func (p *hintsPane) Subtitle() string {
	d := p.sh.data
	if len(d.trajs) == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d hinted", len(d.hinted), len(d.trajs)-d.evalTrajs) // hints go to training trajectories only
}

func (p *hintsPane) View() string {
	d, t := p.sh.data, p.sh.theme
	if p.w <= 0 || p.h <= 0 {
		return ""
	}
	var lines []string
	if n := p.shareRows(); n > 0 {
		steps := make([]int, 0, len(d.perStep))
		for s := range d.perStep {
			steps = append(steps, s)
		}
		sort.Ints(steps)
		shares := make([]float64, len(steps))
		for i, s := range steps {
			c := d.perStep[s]
			if c[0] > 0 {
				shares[i] = float64(c[1]) / float64(c[0])
			}
		}
		sw := max(p.w-22, 1)
		lines = append(lines, fit(t.Faint.Render("hinted per step  ")+t.Hint.Render(sparkline(shares, 0, 1, sw)), p.w))
		// a row: the step, its share as a bar, then in words with the probe's figures; the bar
		// narrows (to none), then the words close up, so that they fit
		tight := false
		after := func(i int) string {
			c := d.perStep[steps[i]]
			s := fmt.Sprintf(" %3.0f%%  %d/%d%s", 100*shares[i], c[1], c[0], probeText(d.metricStep[steps[i]]))
			if tight {
				s = " " + strings.Join(strings.Fields(s), " ")
			}
			return s
		}
		afterW, stepW := 0, 0
		for i := len(steps) - 1; i >= 0 && i >= len(steps)-n; i-- {
			afterW, stepW = max(afterW, width(after(i))), max(stepW, len(fmt.Sprint(steps[i])))
		}
		if 8+stepW+afterW > p.w {
			tight = true
		}
		bw := min(p.w-8-stepW-afterW, 30)
		for i := len(steps) - 1; i >= 0 && i >= len(steps)-n; i-- {
			b := ""
			if bw >= 4 {
				b = t.Hint.Render(bar(shares[i], bw))
			}
			lines = append(lines, fit(fmt.Sprintf("  step %-*d %s%s", stepW, steps[i], b, after(i)), p.w))
		}
		for len(lines) < n+1 {
			lines = append(lines, fit("", p.w))
		}
		lines = append(lines, t.Faint.Render(strings.Repeat("─", p.w)))
	}
	rows := p.listRows()
	if len(d.hinted) == 0 && rows > 0 {
		lines = append(lines, fit(t.Faint.Render("no bridge thoughts yet"), p.w))
	}
	p.cur.clampTo(len(d.hinted), rows)
	for i := p.cur.offset; i < len(d.hinted) && i < p.cur.offset+rows; i++ {
		tr := &d.trajs[d.hinted[len(d.hinted)-1-i]]
		sel := i == p.cur.cursor
		mark := "  "
		if sel {
			mark = "› "
		}
		head := fmt.Sprintf("s%d %s #%d %s ", tr.Step, tr.TaskID, tr.Sample, check(tr.Correct))
		row := mark + head + t.Hint.Render(oneLine(tr.Hint))
		row = fit(row, p.w)
		if sel {
			row = t.Selected.Render(row)
		}
		lines = append(lines, row)
	}
	return strings.Join(lines, "\n")
}

// probeText is a step's hint-usefulness probe for its row: the hint's lift of a correct
// sample where one was measured, else teacher − student on the hinted responses, then the lift
// of the tasks' reference demonstrations ("demo"), the hints hinter.gate dropped ("gated") and
// the model PRM's own figures; "" when the step has none of them.
func probeText(m map[event.Metric]float64) string {
	var s string
	if v, ok := m[event.MetricHintLift]; ok {
		s = fmt.Sprintf("  lift %+.3f", v)
	} else if v, ok := m[event.MetricHintGain]; ok {
		s = fmt.Sprintf("  teacher−student %+.3f", v)
	}
	if v, ok := m[event.MetricHintLiftDemo]; ok {
		s += fmt.Sprintf("  demo %+.3f", v)
	}
	if n, ok := m[event.MetricHintsGateMeasured]; ok { // hinter.gate lift: hints dropped before the teacher read them
		s += fmt.Sprintf("  gated %.0f of %.0f", m[event.MetricHintsGated], n)
	}
	if v, ok := m[event.MetricHintRate]; ok { // the model PRM's own rate, of the trajectories it judged
		s += fmt.Sprintf("  PRM %.0f%% of %.0f", 100*v, m[event.MetricPRMJudged])
		if n := m[event.MetricPRMMalformed]; n > 0 {
			s += fmt.Sprintf(" · %.0f malformed", n)
		}
		if n := m[event.MetricPRMUnjudged]; n > 0 {
			s += fmt.Sprintf(" · %.0f unjudged", n)
		}
		if f, ok := m[event.MetricPRMAgreementFinal]; ok { // how often its verdicts match what the environment checked
			s += fmt.Sprintf(" · agree %.0f%% final %.0f%% steps", 100*f, 100*m[event.MetricPRMAgreementSteps])
		}
	}
	return s
}
