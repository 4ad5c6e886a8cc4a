package ui

import (
	"fmt"
	"math"
	"strings"

	"agentrl/engine/event"
	"agentrl/envs"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// detailPane is the Detail pane: one trajectory turn by turn (assistant text, highlighted code,
// observation), its reward breakdown and bridge thought, or its response tokens coloured by
// advantage. The rendered lines are kept until the trajectory, the width or the view changes,
// so scrolling only slices them.
type detailPane struct {
	paneBase
	keyHelp
	sh     *shared
	idx    int // into data.trajs; -1 none
	tokens bool
	scroll textScroll

	lines []string
	built struct {
		idx, w int
		tokens bool
		ok     bool
	}
}

func newDetailPane(sh *shared) *detailPane {
	return &detailPane{sh: sh, keyHelp: keyHelp{sh.keys, paneDetail}, idx: -1}
}

// open shows trajectory idx from its first line.
func (p *detailPane) open(idx int) {
	p.idx, p.scroll.top, p.tokens = idx, 0, false
}

func (p *detailPane) SetSize(w, h int) {
	p.paneBase.SetSize(w, h)
	p.scroll.clampTo(len(p.build()), p.h)
}

func (p *detailPane) Scroll(n int) {
	p.scroll.top += n
	p.scroll.clampTo(len(p.build()), p.h)
}

func (p *detailPane) Update(msg tea.Msg) tea.Cmd {
	km, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	k := &p.sh.keys.Detail
	if p.scroll.move(km, &k.scrollKeys, len(p.build()), p.h) {
		return nil
	}
	switch {
	case key.Matches(km, k.Tokens):
		p.tokens, p.scroll.top = !p.tokens, 0
	case key.Matches(km, k.Prev):
		if p.idx > 0 {
			p.open(p.idx - 1)
		}
	case key.Matches(km, k.Next):
		if p.idx+1 < len(p.sh.data.trajs) {
			p.open(p.idx + 1)
		}
	}
	return nil
}

func (p *detailPane) Subtitle() string {
	if p.idx < 0 || p.idx >= len(p.sh.data.trajs) {
		return ""
	}
	tr := &p.sh.data.trajs[p.idx]
	s := fmt.Sprintf("%s #%d, step %d", tr.TaskID, tr.Sample, tr.Step)
	if p.tokens {
		s += " · tokens by advantage"
	}
	return s
}

// build renders the open trajectory for the current width, or returns the cached lines.
func (p *detailPane) build() []string {
	b := &p.built
	if b.ok && b.idx == p.idx && b.w == p.w && b.tokens == p.tokens {
		return p.lines
	}
	b.idx, b.w, b.tokens, b.ok = p.idx, p.w, p.tokens, true
	t := p.sh.theme
	if p.idx < 0 || p.idx >= len(p.sh.data.trajs) {
		p.lines = []string{t.Faint.Render("No trajectory open: choose one in Trajectories (3) or Hints (5) and press enter.")}
		return p.lines
	}
	tr := &p.sh.data.trajs[p.idx]
	if p.tokens {
		p.lines = tokenLines(t, tr, p.w)
	} else {
		p.lines = turnLines(t, tr, p.w, p.sh.data.start.Reward)
	}
	for i := range p.lines {
		p.lines[i] = fit(p.lines[i], p.w)
	}
	return p.lines
}

func (p *detailPane) View() string {
	lines := p.build()
	p.scroll.clampTo(len(lines), p.h)
	return strings.Join(window(lines, p.scroll.top, p.h), "\n")
}

// summaryLine is a trajectory's numbers on one line.
// rewardLines are a trajectory's reward parts and total. With the run's weights each part shows
// as its value × its weight = what it adds, so that the column adds up to the total (the format
// penalty subtracted); without them (a run recorded before the weights were), the values alone.
func rewardLines(t *Theme, tr *event.Trajectory, w *event.RewardWeights) []string {
	if tr.IsDropped() {
		return []string{"  " + t.Faint.Render("none: a dropped trajectory trains nothing and its group's statistics leave it out")}
	}
	r := tr.Reward
	rows := []struct {
		name   string
		v, wgt float64
		sign   float64
	}{{"outcome", r.Outcome, 1, 1}, {"process", r.Process, 1, 1}, {"shaping", r.Shaping, 1, 1}, {"format penalty", r.FormatPenalty, 1, -1}}
	if w != nil {
		rows[0].wgt, rows[1].wgt, rows[2].wgt, rows[3].wgt = w.Outcome, w.Process, w.Shaping, w.FormatPenalty
	}
	var out []string
	for _, row := range rows {
		if w == nil {
			out = append(out, fmt.Sprintf("  %-15s %+.3f", row.name, row.sign*row.v))
			continue
		}
		op := "+"
		if row.sign < 0 {
			op = "−"
		}
		out = append(out, fmt.Sprintf("  %-15s %s %.3f × %.3f = %+.3f", row.name, op, row.v, row.wgt, row.sign*row.v*row.wgt))
	}
	total := fmt.Sprintf("  %-15s %+.3f", "total", r.Total)
	if w != nil {
		total = fmt.Sprintf("  %-15s %s %+.3f", "total", strings.Repeat(" ", 17), r.Total)
	}
	return append(out, total)
}

func summaryLine(t *Theme, tr *event.Trajectory) string {
	ok := t.Good.Render("✓ correct")
	switch {
	case tr.IsDropped():
		ok = t.Bad.Render("⊘ dropped (" + tr.Agent.Drop + ")")
	case tr.Paused:
		ok = t.Faint.Render("⏸ paused unfinished (resumes in the next step's rollout)")
	case !tr.Correct:
		ok = t.Bad.Render("✗ wrong")
	}
	s := fmt.Sprintf("step %d · task %s · sample %d · %s · reward %.3f · %d turns · %d tool errors · %d tokens",
		tr.Step, tr.TaskID, tr.Sample, ok, tr.Reward.Total, len(tr.Turns), tr.ToolErrors, tr.Tokens)
	if tr.Hint != "" {
		s += " · " + t.Hint.Render("hinted")
	}
	if len(tr.Segments) > 1 {
		s += " · " + segmentsText(tr.Segments)
	}
	return s
}

// segmentsText says over which rollouts a resumed trajectory was sampled: each segment's first
// response token, step and policy version.
func segmentsText(segs []event.Segment) string {
	parts := make([]string, len(segs))
	for i, sg := range segs {
		parts[i] = fmt.Sprintf("from token %d: step %d, policy v%d", sg.From, sg.Step, sg.Version)
	}
	return fmt.Sprintf("resumed, %d segments (%s)", len(segs), strings.Join(parts, "; "))
}

// turnLines renders the trajectory turn by turn.
func turnLines(t *Theme, tr *event.Trajectory, w int, weights *event.RewardWeights) []string {
	var out []string
	add := func(ls ...string) { out = append(out, ls...) }
	head := func(s string) { add("", t.HelpSection.Render(s)) }
	tw := max(w-2, 1)
	add(wrapStyled(summaryLine(t, tr), w)...)
	add(t.Faint.Render("t shows the tokens by advantage · [ ] previous / next trajectory · esc back"))
	if a := tr.Agent; a != nil {
		add(agentLines(t, a, w)...)
	}
	switch {
	case tr.Agent != nil && len(tr.Agent.Opening) > 0:
		head("Opening messages (the agent's first request)")
		for _, m := range tr.Agent.Opening {
			add(messageLines(t, m, w, t.Faint)...)
		}
	case tr.Prompt != "":
		head("Prompt")
		for _, l := range wrap(tr.Prompt, tw) {
			add("  " + t.Faint.Render(l))
		}
	}
	for i, turn := range tr.Turns {
		title := fmt.Sprintf("Turn %d", i+1)
		if tr.Agent != nil {
			title = fmt.Sprintf("Request %d", i+1)
			if turn.Finish != "" {
				title += " · finish " + turn.Finish
			}
		}
		head(title)
		if turn.NewSegment {
			add("  " + t.Warn.Render("new segment: the agent re-sent a conversation that does not extend the last one; it trains as a sequence of its own"))
		}
		if text := strings.TrimSpace(turn.Assistant); text != "" || len(turn.ToolCalls) == 0 {
			for _, l := range wrap(text, tw) {
				add("  " + t.Assistant.Render(l))
			}
		}
		for _, call := range turn.ToolCalls {
			label := "tool call " + call.Name
			if turn.Code == "" {
				label += " " + call.Text()
			}
			for _, l := range wrap(label, tw) {
				add("  " + t.Accent.Render(l))
			}
		}
		if turn.Code != "" {
			add("  " + t.Faint.Render("code"))
			code := strings.Split(strings.TrimRight(strings.ReplaceAll(turn.Code, "\t", "    "), "\n"), "\n")
			nw := len(fmt.Sprint(len(code)))
			cw := max(w-nw-5, 1)
			for n, l := range code {
				num := t.Faint.Render(fmt.Sprintf("  %*d │ ", nw, n+1))
				for j, part := range wrap(l, cw) {
					if j > 0 {
						num = t.Faint.Render(fmt.Sprintf("  %*s │ ", nw, ""))
					}
					add(num + highlight(t, part))
				}
			}
		}
		if len(turn.Sent) > 0 {
			add("  " + t.Faint.Render(fmt.Sprintf("the agent sent %d message(s) before its next request", len(turn.Sent))))
			st := t.Observation
			if turn.ToolStatus != "" && turn.ToolStatus != "ok" {
				st = t.ObservationErr
			}
			for _, m := range turn.Sent {
				add(messageLines(t, m, w, st)...)
			}
			continue
		}
		if turn.Observation != "" || turn.ToolStatus != "" {
			status := turn.ToolStatus
			if status == "" {
				status = "observation"
			}
			label := "observation [" + status
			if turn.ToolSeconds > 0 {
				label += " " + fmtSecs(turn.ToolSeconds)
			}
			label += "]"
			st := t.Observation
			if status != "ok" && status != "observation" {
				st = t.ObservationErr
				label = t.Bad.Render(label)
			} else {
				label = t.Faint.Render(label)
			}
			add("  " + label)
			for _, l := range wrap(strings.TrimRight(turn.Observation, "\n"), max(w-4, 1)) {
				add("  " + t.Faint.Render("│ ") + st.Render(l))
			}
		}
	}
	if len(tr.Turns) == 0 {
		add("", t.Faint.Render("(no turns recorded)"))
	}
	head("Reward")
	add(rewardLines(t, tr, weights)...)
	if p := tr.PRM; p != nil {
		head(fmt.Sprintf("PRM: %s (%d replies, %d malformed)", p.Status, p.Replies, p.Malformed))
		if len(p.Verdicts) > 0 {
			var vs []string
			for k, v := range p.Verdicts {
				switch {
				case v < 0:
					vs = append(vs, fmt.Sprintf("step %d –", k+1))
				case v == 1:
					vs = append(vs, fmt.Sprintf("step %d ✓", k+1))
				case v == 0:
					vs = append(vs, fmt.Sprintf("step %d ✗", k+1))
				default:
					vs = append(vs, fmt.Sprintf("step %d %.2f", k+1, v))
				}
			}
			for _, l := range wrap(strings.Join(vs, "  "), tw) {
				add("  " + l)
			}
		}
		switch {
		case p.Why != "":
			for _, l := range wrap(p.Why, tw) {
				add("  " + t.Faint.Render(l))
			}
		case p.Hint:
			add("  " + t.Faint.Render("asked for a bridge thought"))
		case p.Status == event.PRMJudged:
			add("  " + t.Faint.Render("no hint needed (\\boxed{-1})"))
		}
	}
	if tr.Hint != "" {
		head("Bridge thought (hint)")
		for _, l := range wrap(tr.Hint, tw) {
			add("  " + t.Hint.Render(l))
		}
	}
	if a := tr.Agent; a != nil && strings.TrimSpace(a.StderrTail) != "" {
		lines := strings.Split(strings.TrimRight(a.StderrTail, "\n"), "\n")
		head(fmt.Sprintf("Agent's stderr (last %d lines)", min(len(lines), maxStderrLines)))
		for _, l := range lines[max(0, len(lines)-maxStderrLines):] {
			for _, p := range wrap(l, max(w-4, 1)) {
				add("  " + t.Faint.Render("│ ") + p)
			}
		}
	}
	return out
}

// maxStderrLines is how much of an agent's stderr tail the detail shows.
const maxStderrLines = 20

// agentLines are an external agent's run in a few lines: why it was dropped, how it ended,
// what it answered and its info.
func agentLines(t *Theme, a *event.Agent, w int) []string {
	var out []string
	if a.Dropped != "" {
		for _, l := range wrap("dropped, not trained on: "+a.Dropped, w) {
			out = append(out, t.Bad.Render(l))
		}
	}
	how := fmt.Sprintf("exit status %d", a.ExitCode)
	if a.Signal != "" {
		how = "killed by " + a.Signal
	}
	s := fmt.Sprintf("agent: %s after %s", how, fmtSecs(a.Seconds))
	if a.Queued >= 0.05 {
		s += fmt.Sprintf(" (queued %s)", fmtSecs(a.Queued))
	}
	s += fmt.Sprintf(" · %d requests · %d segment", a.Requests, a.Segments)
	if a.Segments != 1 {
		s += "s"
	}
	switch {
	case a.Reward != nil:
		s += fmt.Sprintf(" · its own reward %.3f", *a.Reward)
	case a.Answer != nil:
		s += fmt.Sprintf(" · answer %q", *a.Answer)
	}
	for _, l := range wrap(s, w) {
		out = append(out, t.Faint.Render(l))
	}
	if len(a.Info) > 0 {
		for _, l := range wrap("info "+string(a.Info), w) {
			out = append(out, t.Faint.Render(l))
		}
	}
	return out
}

// messageLines are one chat message an agent sent: its role (and tool call id) as a label, then
// its content in style st.
func messageLines(t *Theme, m envs.Message, w int, st lipgloss.Style) []string {
	label := "→ " + m.Role
	if m.ToolCallID != "" {
		label += " (" + m.ToolCallID + ")"
	}
	if m.Name != "" {
		label += " " + m.Name
	}
	out := []string{"  " + t.Faint.Render(label)}
	for _, l := range wrap(strings.TrimRight(m.Content, "\n"), max(w-4, 1)) {
		out = append(out, "  "+t.Faint.Render("│ ")+st.Render(l))
	}
	return out
}

// wrapStyled wraps an already styled line (escape sequences kept) to w cells.
func wrapStyled(s string, w int) []string {
	if width(s) <= w {
		return []string{s}
	}
	return wrap(s, w)
}

// heatLevel maps an advantage to a heat-map level 0..len-1 by its share of the largest |a|.
func heatLevel(a, scale float64, n int) int {
	mid := n / 2
	if scale <= 0 || math.IsNaN(a) {
		return mid
	}
	l := mid + int(math.Round(a/scale*float64(mid)))
	return clamp(l, 0, n-1)
}

// tokenLines renders the response tokens coloured by advantage (with colours off, a ⟨±n⟩ mark
// where the level changes).
func tokenLines(t *Theme, tr *event.Trajectory, w int) []string {
	out := wrapStyled(summaryLine(t, tr), w)
	if len(tr.Pieces) == 0 {
		return append(out, "", t.Faint.Render("no response tokens were recorded for this trajectory (t returns to the turns)"))
	}
	var lo, hi, scale float64
	for i, a := range tr.Advantages {
		v := float64(a)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
		scale = max(scale, math.Abs(v))
	}
	n := len(t.Heat)
	legend := fmt.Sprintf("%d tokens · advantage min %+.3f max %+.3f", len(tr.Pieces), lo, hi)
	if len(tr.Advantages) == 0 {
		legend += " (no advantages recorded)"
	}
	if t.Color {
		var sb strings.Builder
		for i := range t.Heat {
			sb.WriteString(t.Heat[i].Render(" "))
		}
		legend += " · " + t.Heat[0].Render("negative") + " " + sb.String() + " " + t.Heat[n-1].Render("positive")
	} else {
		legend += fmt.Sprintf(" · ⟨n⟩ marks the level from −%d to +%d where it changes", n/2, n/2)
	}
	for _, l := range wrapStyled(legend, w) {
		out = append(out, t.Faint.Render(l))
	}
	out = append(out, "")
	var line strings.Builder
	lw := 0
	flush := func() {
		out = append(out, line.String())
		line.Reset()
		lw = 0
	}
	prev := math.MinInt
	for i, piece := range tr.Pieces {
		lvl := n / 2
		if i < len(tr.Advantages) {
			lvl = heatLevel(float64(tr.Advantages[i]), scale, n)
		}
		if !t.Color && lvl != prev {
			mark := fmt.Sprintf("⟨%+d⟩", lvl-n/2)
			if lvl == n/2 {
				mark = "⟨0⟩"
			}
			if lw+width(mark) > w && lw > 0 {
				flush()
			}
			line.WriteString(mark)
			lw += width(mark)
		}
		prev = lvl
		segs := strings.Split(strings.ReplaceAll(piece, "\t", "    "), "\n")
		for j, seg := range segs {
			if j > 0 {
				line.WriteString(t.Faint.Render("↵"))
				flush()
			}
			for seg != "" {
				room := w - lw
				if room <= 0 {
					flush()
					room = w
				}
				part := seg
				if width(part) > room {
					if lw > 0 && width(part) <= w {
						flush()
						continue
					}
					part = cutCells(seg, room)
				}
				seg = seg[len(part):]
				line.WriteString(t.Heat[lvl].Render(part))
				lw += width(part)
			}
		}
	}
	if lw > 0 {
		flush()
	}
	return out
}

// cutCells returns the longest prefix of s at most w cells wide (at least one rune).
func cutCells(s string, w int) string {
	n := 0
	for i, r := range s {
		rw := width(string(r))
		if n+rw > w && i > 0 {
			return s[:i]
		}
		n += rw
	}
	return s
}
