package ui

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"agentrl/engine/event"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// The status strip under the tabs: the run line, the phase timeline, the latest numbers, and
// any unacknowledged alarm in place of the last of them.

// runState is the one or two words saying what the run is doing, and their style; short is the
// same in fewer words (without the reason a run ended for), for a narrow status strip.
func (m *model) runState() (state, short string, style lipgloss.Style) {
	d, t := m.sh.data, m.sh.theme
	switch {
	case d.end != nil:
		s := "run " + d.end.Status
		st := t.Accent
		if d.end.Status == "failed" {
			st = t.Bad
		}
		if d.end.Reason != "" {
			return s + ": " + d.end.Reason, s, st
		}
		return s, s, st
	case m.events == nil:
		return "stored run (no end recorded)", "stored run", t.Warn
	case m.streamEnd:
		return "run ended (stream closed)", "run ended", t.Accent
	case d.stopping:
		return "stopping", "stopping", t.Warn
	case d.paused:
		return "paused", "paused", t.Warn
	case !d.started:
		return "starting", "starting", t.Faint
	}
	return "running", "running", t.Good
}

// runLine: state · name · step · tokens/s · ETA · recipe. Where the whole line does not fit w,
// the parts a user can find elsewhere give way first, one at a time (the recipe; the phase's
// ETA; tokens/s; the reason the run ended; the run's ETA; what an evaluation run evaluates), so
// that the state, the run's name and the step stay whole.
func (m *model) runLine(w int) string {
	d, t := m.sh.data, m.sh.theme
	state, stateShort, st := m.runState()
	name := d.start.Name
	if name == "" {
		name = d.start.RunID
	}
	if name == "" {
		name = m.sh.runID
	}
	line := func(level int) string {
		s := state
		if level >= 4 {
			s = stateShort
		}
		parts := []string{st.Render(s)}
		if name != "" {
			parts = append(parts, t.Title.Render(name))
		}
		if d.start.Evaluates != "" && level < 6 {
			parts = append(parts, "evaluating "+d.start.Evaluates)
		}
		if d.start.TotalSteps > 0 {
			parts = append(parts, fmt.Sprintf("step %d/%d", d.step, d.start.TotalSteps))
		} else if d.step > 0 {
			parts = append(parts, fmt.Sprintf("step %d", d.step))
		}
		if v, ok := d.lastMetric(event.MetricTokensPerSecond); ok && level < 3 {
			parts = append(parts, fmtRate(v)+" tok/s")
		}
		if eta := etaText(d, level >= 2); eta != "" && level < 5 {
			parts = append(parts, "ETA "+eta)
		}
		if d.start.Recipe != "" && level < 1 {
			parts = append(parts, "recipe "+filepath.Base(d.start.Recipe))
		}
		return " " + strings.Join(parts, t.Faint.Render(" · "))
	}
	s := ""
	for level := 0; level <= 6; level++ {
		if s = line(level); width(s) <= w {
			break
		}
	}
	return fit(s, w)
}

// etaText is the time left: of the phase in progress when it reports it, then of the run
// ("eval 3m12s, run ≥ 9m05s"); with runOnly, the run's alone when it is known ("≥ 9m05s"); ""
// when neither is known.
func etaText(d *runData, runOnly bool) string {
	var parts []string
	left, atLeast := d.runLeft()
	if ph, secs := d.phaseLeft(); ph != "" && (!runOnly || left < 0) {
		parts = append(parts, ph+" "+fmtSecs(secs))
	}
	if left >= 0 {
		s := fmtSecs(left)
		if atLeast {
			s = "≥ " + s
		}
		if len(parts) > 0 {
			s = "run " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// evalSoFar is pass@k over the tasks of the evaluation in progress done so far ("" before one is).
func evalSoFar(p *event.Progress) string {
	if p == nil || len(p.PassAtK) == 0 {
		return ""
	}
	ks := make([]int, 0, len(p.PassAtK))
	for k := range p.PassAtK {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("pass@%d %.3f", k, p.PassAtK[k])
	}
	return strings.Join(parts, " · ") + fmt.Sprintf(" (%d/%d tasks)", p.TasksDone, p.Tasks)
}

// phaseShort are the timeline's labels when the full names do not fit.
var phaseShort = map[string]string{
	event.PhaseRollout: "roll", event.PhaseScore: "score", event.PhaseReference: "ref", event.PhaseAdvantage: "adv",
	event.PhaseTrain: "train", event.PhaseSync: "sync", event.PhaseEval: "eval", event.PhaseSave: "save", event.PhasePRM: "prm",
}

// phaseLine is the timeline of a step: each phase with the time it took last, the one running
// marked ▶ (with its progress), the ones done in this step in the "done" style.
func (m *model) phaseLine(w int) string {
	d, t := m.sh.data, m.sh.theme
	now := d.currentPhase()
	render := func(abbrev, times, compact bool) (string, int) {
		fmtT := fmtSecs
		sep := "  "
		if compact {
			fmtT, sep = fmtSecsShort, " "
		}
		var sb strings.Builder
		n := 0
		put := func(s string, st lipgloss.Style) {
			sb.WriteString(st.Render(s))
			n += width(s)
		}
		put(" ", t.Plain)
		for i, p := range d.phases() {
			if i > 0 {
				put(sep[1:], t.Plain)
			}
			label := p
			if abbrev {
				label = phaseShort[p]
			}
			secs, ever := d.phaseSecs[p]
			switch {
			case p == now:
				s := "▶" + label
				if pr := d.progress; pr != nil && pr.Phase == p && pr.Total > 0 {
					s += fmt.Sprintf(" %d/%d", pr.Done, pr.Total)
				} else if ever && times {
					s += " " + fmtT(secs)
				}
				put(s, t.PhaseNow)
			case d.stepDone[p] && ever && times:
				put(" "+label+" "+fmtT(secs), t.PhaseDone)
			case d.stepDone[p]:
				put(" "+label, t.PhaseDone)
			case ever && times:
				put(" "+label+" "+fmtT(secs), t.PhaseIdle)
			default:
				put(" "+label, t.PhaseIdle)
			}
		}
		return sb.String(), n
	}
	for _, mode := range [][3]bool{{false, true, false}, {true, true, false}, {true, true, true}, {true, false, true}} {
		if s, n := render(mode[0], mode[1], mode[2]); n <= w {
			return fit(s, w)
		}
	}
	s, _ := render(true, false, true)
	return fit(s, w)
}

// metricNames orders step metrics for display: the ones people look at first, then the rest.
var metricFirst = []struct {
	name  event.Metric
	label string
}{
	{event.MetricRewardMean, "reward"}, {event.MetricAccuracy, "acc"}, {event.MetricHintedShare, "hinted"}, {event.MetricHintRate, "hint rate"},
	{event.MetricPRMMalformed, "PRM malformed"}, {event.MetricPRMUnjudged, "PRM unjudged"}, {event.MetricLoss, "loss"},
	{event.MetricGradNorm, "grad"}, {event.MetricClipFrac, "clip"}, {event.MetricLogProbDiffMax, "Δlogp"}, {event.MetricLR, "lr"},
}

func metricLabel(name event.Metric) string {
	for _, f := range metricFirst {
		if f.name == name {
			return f.label
		}
	}
	return string(name)
}

// orderedMetrics returns the names of m in display order.
func orderedMetrics(m map[event.Metric]float64) []event.Metric {
	var out []event.Metric
	seen := map[event.Metric]bool{}
	for _, f := range metricFirst {
		if _, ok := m[f.name]; ok {
			out = append(out, f.name)
			seen[f.name] = true
		}
	}
	var rest []event.Metric
	for k := range m {
		if !seen[k] && k != event.MetricTokensPerSecond {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// metricsLine shows the latest evaluation and step metrics.
func (m *model) metricsLine(w int) string {
	d, t := m.sh.data, m.sh.theme
	var parts []string
	if s := evalSoFar(d.evalLive); s != "" {
		parts = append(parts, "eval so far "+s)
	} else if n := len(d.evals); n > 0 {
		e := d.evals[n-1]
		for _, k := range e.Ks() {
			parts = append(parts, fmt.Sprintf("pass@%d %.3f", k, e.PassAtK[k]))
		}
	}
	if n := len(d.metrics); n > 0 {
		mm := d.metrics[n-1].Metrics
		for _, name := range orderedMetrics(mm) {
			v := mm[name]
			if name == event.MetricHintedShare || name == event.MetricHintRate {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", metricLabel(name), 100*v))
				continue
			}
			parts = append(parts, metricLabel(name)+" "+fmtNum(v))
		}
	}
	if len(parts) == 0 {
		return fit(t.Faint.Render(" no metrics yet"), w)
	}
	return fit(" "+strings.Join(parts, t.Faint.Render(" · ")), w)
}

// alarmLine is the oldest unacknowledged alarm, in the alarm style across the whole row, after
// the first of extras that fits (the run's state, in words from the most to the fewest). Where
// its whole message does not fit, the line gives the message's first clause, then only the values
// compared (the Status pane lists every alarm in full), so that the kind and the step stay whole.
func (m *model) alarmLine(w int, extras ...string) string {
	d, t := m.sh.data, m.sh.theme
	un := d.unacked()
	a := un[0]
	var tail string
	if a.Count > 1 {
		tail += fmt.Sprintf(" ×%d", a.Count)
	}
	if len(un) > 1 {
		tail += fmt.Sprintf(" · %d more", len(un)-1)
	}
	head := a.Message
	if i := strings.IndexAny(head, "(:"); i > 0 {
		head = strings.TrimSpace(head[:i])
	}
	forms := []string{
		fmt.Sprintf(" !! ALARM %s at step %d: %s (%s)%s · a acknowledges", a.Kind, a.Step, a.Message, a.Compare(), tail),
		fmt.Sprintf(" !! ALARM %s at step %d: %s (%s)%s · a acknowledges", a.Kind, a.Step, head, a.Compare(), tail),
		fmt.Sprintf(" !! ALARM %s at step %d: %s (%s)%s · a ack", a.Kind, a.Step, head, a.Compare(), tail),
		fmt.Sprintf(" !! ALARM %s at step %d: %s%s · a ack", a.Kind, a.Step, head, tail),
		fmt.Sprintf(" !! ALARM %s at step %d (%s)%s · a ack", a.Kind, a.Step, a.Compare(), tail),
		fmt.Sprintf(" !! %s step %d%s", a.Kind, a.Step, tail),
	}
	if len(extras) == 0 {
		extras = []string{""}
	}
	s := ""
	for _, f := range forms {
		for _, extra := range extras {
			if s = f; extra != "" {
				s = " " + extra + " ·" + f
			}
			if width(s) <= w {
				return t.Alarm.Render(fit(s, w))
			}
		}
	}
	return t.Alarm.Render(fit(s, w))
}

// strip draws the h status rows.
func (m *model) strip(w, h int) []string {
	rows := []string{m.runLine(w)}
	if h >= 2 {
		rows = append(rows, m.phaseLine(w))
	}
	if h >= 3 {
		rows = append(rows, m.metricsLine(w))
	}
	if len(m.sh.data.unacked()) > 0 {
		if h == 1 {
			state, short, _ := m.runState()
			rows[0] = m.alarmLine(w, state, short)
		} else {
			rows[len(rows)-1] = m.alarmLine(w)
		}
	}
	return rows
}

// statusPane is the Status pane: the run, the phases of the last step, the metrics with their
// history, the latest evaluation, the alarms (acknowledged ones too) and the errors.
type statusPane struct {
	paneBase
	keyHelp
	sh     *shared
	scroll textScroll
	lines  []string
	dirty  bool
	builtW int
	builtH int
}

func newStatusPane(sh *shared) *statusPane {
	return &statusPane{sh: sh, keyHelp: keyHelp{sh.keys, paneStatus}, dirty: true}
}

func (p *statusPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case dataMsg:
		p.dirty = true
	case tea.KeyMsg:
		p.build()
		p.scroll.move(msg, &p.sh.keys.Status, len(p.lines), p.h)
	}
	return nil
}

func (p *statusPane) Scroll(n int) {
	p.build()
	p.scroll.top += n
	p.scroll.clampTo(len(p.lines), p.h)
}

func (p *statusPane) build() {
	if !p.dirty && p.builtW == p.w && p.builtH == p.h {
		return
	}
	p.lines, p.dirty, p.builtW, p.builtH = p.render(p.w, p.h), false, p.w, p.h
	p.scroll.clampTo(len(p.lines), p.h)
}

func (p *statusPane) View() string {
	p.build()
	return strings.Join(window(p.lines, p.scroll.top, p.h), "\n")
}

// render lays the pane out for w×h. The run's setup (recipe, model, backend, kernels, attention,
// compiled programs) comes first where the Phases block still fits below it in h rows; on a
// shorter pane it moves under the Phases block, in a Setup section, so that what changes step
// by step is on screen without scrolling, and nothing is cut.
func (p *statusPane) render(w, h int) []string {
	out, phasesEnd := p.renderAs(w, false)
	if phasesEnd > h {
		out, _ = p.renderAs(w, true)
	}
	return out
}

// renderAs draws the pane, with the setup under the Phases block when setupBelow; phasesEnd is
// the number of lines down to the end of the Phases block (0 without one).
func (p *statusPane) renderAs(w int, setupBelow bool) (out []string, phasesEnd int) {
	d, t := p.sh.data, p.sh.theme
	add := func(s string) { out = append(out, s) }
	kv := func(k, v string) { add(t.Faint.Render(fit(k, 10)) + v) }
	// kvWrap is kv with a long value wrapped under itself, each line in style
	kvWrap := func(k, v string, style lipgloss.Style) {
		for i, l := range wrap(v, max(w-10, 20)) {
			if i == 0 {
				kv(k, style.Render(l))
			} else {
				add(strings.Repeat(" ", 10) + style.Render(l))
			}
		}
	}
	// wrapped adds s indented by prefix, its further lines under its first
	wrapped := func(prefix, s string, style lipgloss.Style) {
		ind := width(prefix)
		for i, l := range wrap(s, max(w-ind, 20)) {
			if i == 0 {
				add(prefix + style.Render(l))
			} else {
				add(strings.Repeat(" ", ind) + style.Render(l))
			}
		}
	}
	head := func(s string) { add(""); add(t.HelpSection.Render(s)) }

	if !d.started && len(d.trajs) == 0 && len(d.metrics) == 0 {
		add(t.Faint.Render("waiting for the run to start…"))
	}
	name := d.start.Name
	if d.start.RunID != "" && d.start.RunID != name {
		name += t.Faint.Render("  (run " + d.start.RunID + ")")
	}
	kv("Run", name)
	if d.start.Evaluates != "" { // an evaluation-only run (agentrl-tui eval)
		kv("Evaluates", d.start.Evaluates)
	}
	setup := func() {
		kv("Recipe", d.start.Recipe)
		if d.start.Model != "" {
			kv("Model", d.start.Model)
		}
		if d.start.Backend != "" {
			kv("Backend", d.start.Backend)
		}
		for _, f := range [][2]string{{"Kernels", d.start.Kernels}, {"Attention", d.start.Attention}} {
			if f[1] != "" {
				kvWrap(f[0], f[1], t.Plain)
			}
		}
	}
	compiled := func() {
		if text, late, ok := compiledText(d); ok {
			kvWrap("Compiled", text, t.Plain)
			if late != "" {
				wrapped(strings.Repeat(" ", 10), late, t.Warn)
			}
		}
	}
	if !setupBelow {
		setup()
	}
	if sb := d.start.Sandbox; sb != "" {
		// Model-written code with the user's files and network in reach must not be missed.
		style, text := t.Faint, "strict isolation (own namespaces, no network, no host files)"
		if strings.HasPrefix(sb, "NONE") {
			style, text = t.Alarm, "isolation NONE: model code can read your files and reach the network"
		}
		kvWrap("Sandbox", text, style)
	}
	steps := fmt.Sprintf("%d", d.step)
	if d.start.TotalSteps > 0 {
		steps += fmt.Sprintf(" of %d", d.start.TotalSteps)
	}
	kv("Step", steps)
	if v, ok := d.lastMetric(event.MetricTokensPerSecond); ok {
		kv("Tokens/s", fmtRate(v))
	}
	if !setupBelow {
		compiled()
	}
	if eta := etaText(d, false); eta != "" {
		kvWrap("ETA", eta, t.Plain)
	}
	var state []string
	if d.paused {
		state = append(state, "paused")
	}
	if d.stopping {
		state = append(state, d.stopNote())
	}
	if d.end != nil {
		state = append(state, EndLine(*d.end))
	}
	if len(state) > 0 {
		kvWrap("State", strings.Join(state, ", "), t.Plain)
	}

	if len(d.phaseSecs) > 0 {
		head("Phases (time each took last)")
		var total float64
		for _, ph := range d.phases() {
			total = max(total, d.phaseSecs[ph])
		}
		now := d.currentPhase()
		bw := max(min(w-24, 40), 0)
		for _, ph := range d.phases() {
			secs, ok := d.phaseSecs[ph]
			mark := "  "
			if ph == now {
				mark = "▶ "
			}
			if !ok {
				add(t.Faint.Render(mark + fit(ph, 10) + fitRight("–", 8)))
				continue
			}
			frac := 0.0
			if total > 0 {
				frac = secs / total
			}
			add(mark + fit(ph, 10) + fitRight(fmtSecs(secs), 8) + "  " + t.Accent.Render(strings.TrimRight(bar(frac, bw), " ")))
		}
		if s, ok := d.stepSecs[d.stepsDone()]; ok && d.stepsDone() > 0 {
			add(t.Faint.Render(fmt.Sprintf("  step %d took %s", d.stepsDone(), fmtSecs(s))))
		}
		phasesEnd = len(out)
	}
	if d.engines != nil {
		head(enginesTitle(d.engines))
		out = append(out, enginesRows(d.engines, t, w)...)
	}
	if setupBelow {
		head("Setup")
		setup()
		compiled()
	}

	if len(d.gens) > 0 {
		// How the last rollout and evaluation used the KV slots: occupancy over the phase (the
		// tail shows as the fall at its end) and what held the batch back.
		head("Slots (occupancy over the last rollout and evaluation)")
		sw := max(min(w-40, 48), 0)
		for _, ph := range []string{event.PhaseRollout, event.PhaseEval} {
			g, ok := d.gens[ph]
			if !ok {
				continue
			}
			add("  " + fit(fmt.Sprintf("%s, step %d", ph, g.Step), 17) + fitRight(fmt.Sprintf("%.0f%%", 100*g.Occupancy), 4) + "  " +
				t.Accent.Render(sparkline(resample(g.Trace, sw), 0, 1, sw)) + t.Faint.Render(fmt.Sprintf("  %d slots, %d steps", g.Slots, g.Steps)))
			add(strings.Repeat(" ", 20) + fmt.Sprintf("tail %s · tool stall %.1f%% · tool queue %s", fmtSecs(g.TailSeconds), 100*g.ToolStallShare, fmtSecs(g.ToolQueueSeconds)))
		}
		if line := partialText(d); line != "" {
			add(strings.Repeat(" ", 20) + line)
		}
	}

	if n := len(d.metrics); n > 0 {
		last := d.metrics[n-1]
		head(fmt.Sprintf("Metrics (step %d)", last.Step))
		names := orderedMetrics(last.Metrics)
		if _, ok := last.Metrics[event.MetricTokensPerSecond]; ok {
			names = append(names, event.MetricTokensPerSecond)
		}
		sw := max(min(w-32, 60), 0)
		for _, name := range names {
			hist := make([]float64, 0, n)
			lo, hi := last.Metrics[name], last.Metrics[name]
			for _, sm := range d.metrics[max(n-sw, 0):] {
				if v, ok := sm.Metrics[name]; ok {
					hist = append(hist, v)
					lo, hi = min(lo, v), max(hi, v)
				}
			}
			add("  " + fit(string(name), 18) + fitRight(fmtNum(last.Metrics[name]), 10) + "  " + t.Accent.Render(sparkline(hist, lo, hi, sw)))
		}
	}

	if p := d.evalLive; p != nil {
		head(fmt.Sprintf("Evaluation of step %d in progress: %d of %d trajectories", p.Step, p.Done, p.Total))
		if s := evalSoFar(p); s != "" {
			wrapped("  so far ", s, t.Plain)
		} else {
			add(t.Faint.Render(fmt.Sprintf("  pass@k appears as tasks complete (0/%d tasks)", p.Tasks)))
		}
	}
	if n := len(d.evals); n > 0 {
		e := d.evals[n-1]
		head(fmt.Sprintf("Evaluation (step %d)", e.Step))
		var parts []string
		for _, k := range e.Ks() {
			parts = append(parts, fmt.Sprintf("pass@%d %.3f", k, e.PassAtK[k]))
		}
		s := "  " + strings.Join(parts, "  ")
		if e.Best {
			s += t.Good.Render("  best so far")
		}
		add(s)
		if len(e.Change) > 0 { // pass@k's change since the first evaluation ± its paired standard error
			parts = parts[:0]
			for _, k := range e.Ks() {
				if c, ok := e.Change[k]; ok {
					parts = append(parts, fmt.Sprintf("pass@%d %+.3f±%.3f", k, c.Mean, c.SE))
				}
			}
			wrapped(fmt.Sprintf("  since step %d: ", e.Since), strings.Join(parts, "  "), t.Plain)
		}
		for _, name := range e.Sets() {
			parts = parts[:0]
			for _, k := range e.Ks() {
				parts = append(parts, fmt.Sprintf("pass@%d %.3f", k, e.BySet[name][k]))
			}
			wrapped(fmt.Sprintf("  set %s: ", name), strings.Join(parts, "  "), t.Plain)
		}
		for _, l := range e.Levels() {
			parts = parts[:0]
			for _, k := range e.Ks() {
				parts = append(parts, fmt.Sprintf("pass@%d %.3f", k, e.ByLevel[l][k]))
			}
			wrapped(fmt.Sprintf("  level %s: ", l), strings.Join(parts, "  "), t.Plain)
		}
	}

	if len(d.alarms) > 0 {
		head("Alarms (a acknowledges the oldest, A all)")
		for _, a := range d.alarms {
			s := fmt.Sprintf("step %d %s %s", a.Step, a.Kind, a.Compare())
			if a.Count > 1 {
				s += fmt.Sprintf(" ×%d", a.Count)
			}
			s += ": " + a.Message
			if a.Acked {
				wrapped(t.AlarmAcked.Render("  acknowledged  "), s, t.AlarmAcked)
			} else {
				wrapped(t.Alarm.Render(" !! ALARM ")+" ", s, t.Plain)
			}
		}
	}
	if len(d.errs) > 0 {
		head("Errors")
		for _, e := range d.errs[max(len(d.errs)-10, 0):] {
			for _, l := range wrap(e, max(w-2, 1)) {
				add("  " + t.Bad.Render(l))
			}
		}
	}
	for i := range out {
		out[i] = fit(out[i], w)
	}
	return out, phasesEnd
}

// generationText is a generation phase's use of the slots in one line: occupancy over the
// phase (with its trace), the tail, the tool stall and the tool queue.
func generationText(g event.Generation) string {
	return fmt.Sprintf("occupancy %.0f%% (%d slots, %d steps) %s · tail %s · tool stall %.1f%% · tool queue %s",
		100*g.Occupancy, g.Slots, g.Steps, sparkline(g.Trace, 0, 1, len(g.Trace)), fmtSecs(g.TailSeconds), 100*g.ToolStallShare, fmtSecs(g.ToolQueueSeconds))
}

// resample fits values into at most w points, each the mean of the values it covers.
func resample(values []float64, w int) []float64 {
	if w <= 0 || len(values) <= w {
		return values
	}
	out := make([]float64, w)
	for i := range out {
		lo, hi := i*len(values)/w, (i+1)*len(values)/w
		var sum float64
		for _, v := range values[lo:hi] {
			sum += v
		}
		out[i] = sum / float64(hi-lo)
	}
	return out
}

// partialText is the last step's partial rollout in one line (rollout.partial; "" without it):
// the trajectories its rollout paused and resumed, the samples dropped as too stale, and the
// mean staleness of the batch it trained (policy updates behind the trained weights).
func partialText(d *runData) string {
	n := len(d.metrics)
	if n == 0 {
		return ""
	}
	m := d.metrics[n-1].Metrics
	p, ok := m[event.MetricPaused]
	if !ok {
		return ""
	}
	return fmt.Sprintf("partial: %.0f paused · %.0f resumed · %.0f stale dropped · staleness %.2f", p, m[event.MetricResumed], m[event.MetricStaleDropped], m[event.MetricStalenessMean])
}
