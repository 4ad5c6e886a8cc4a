package ui

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"agentrl/engine/event"
	"agentrl/store"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/guptarohit/asciigraph"
)

// smoothings are the EMA weights `s` cycles through (TensorBoard's debiased smoothing).
var smoothings = []float64{0, 0.6, 0.8, 0.9}

// smooth returns the debiased exponential moving average of ys with weight a.
func smooth(ys []float64, a float64) []float64 {
	out := make([]float64, len(ys))
	var last float64
	n := 0
	for i, y := range ys {
		if math.IsNaN(y) {
			out[i] = y
			continue
		}
		n++
		last = last*a + (1-a)*y
		out[i] = last / (1 - math.Pow(a, float64(n)))
	}
	return out
}

// point is one value of a curve at a step.
type point struct {
	step int
	v    float64
}

// overlayRun is another stored run drawn under this one for comparison.
type overlayRun struct {
	sum     store.RunSummary
	evals   []store.Eval
	metrics map[int]map[string]float64
}

// Curves messages: the store's run list for the picker, and the overlay run's data.
type (
	summariesMsg struct {
		runs []store.RunSummary
		err  error
	}
	overlayMsg struct {
		run *overlayRun // nil: no overlay
		err error
	}
)

// curvesPane is the Curves pane: pass@k over steps for each k (or one step metric), raw and
// smoothed, with the latest values in the legend, and optionally another stored run overlaid.
// The chart is redrawn only when its data, size or options change.
type curvesPane struct {
	paneBase
	keyHelp
	sh *shared

	metric  int // 0 = pass@k, i>0 = the i-th step metric
	smoothI int
	overlay *overlayRun

	picking bool
	loading bool
	runs    []store.RunSummary // the picker's choices after "none"
	pick    listCursor

	chart []string
	dirty bool
	bw    int
	bh    int
}

func newCurvesPane(sh *shared) *curvesPane {
	return &curvesPane{sh: sh, keyHelp: keyHelp{sh.keys, paneCurves}, smoothI: 1, dirty: true}
}

func (p *curvesPane) SetSize(w, h int) {
	p.paneBase.SetSize(w, h)
	p.pick.clampTo(len(p.runs)+1, p.h-2)
}

func (p *curvesPane) Capturing() bool { return p.picking }

func (p *curvesPane) Back() bool {
	if p.picking {
		p.picking = false
		return true
	}
	return false
}

// metricNames lists the step metrics that can be plotted.
func (p *curvesPane) metricNames() []event.Metric {
	all := map[event.Metric]float64{}
	for _, m := range p.sh.data.metrics {
		for k, v := range m.Metrics {
			all[k] = v
		}
	}
	if p.sft() { // plotted together as the first curve
		delete(all, event.MetricLoss)
		delete(all, event.MetricEvalLoss)
	}
	names := orderedMetrics(all)
	if _, ok := all[event.MetricTokensPerSecond]; ok {
		names = append(names, event.MetricTokensPerSecond)
	}
	return names
}

func (p *curvesPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case dataMsg:
		if msg.ch&(chEval|chMetrics|chRun) != 0 {
			p.dirty = true
		}
	case summariesMsg:
		p.loading = false
		if msg.err != nil {
			return note("overlay: "+msg.err.Error(), true)
		}
		p.runs = p.runs[:0]
		for _, r := range msg.runs {
			if r.ID != p.sh.runID {
				p.runs = append(p.runs, r)
			}
		}
		p.picking, p.pick = true, listCursor{}
	case overlayMsg:
		p.loading = false
		if msg.err != nil {
			return note("overlay: "+msg.err.Error(), true)
		}
		p.overlay, p.dirty = msg.run, true
	case tea.KeyMsg:
		if p.picking {
			return p.pickKey(msg)
		}
		k := &p.sh.keys.Curves
		switch {
		case key.Matches(msg, k.Smooth):
			p.smoothI, p.dirty = (p.smoothI+1)%len(smoothings), true
		case key.Matches(msg, k.Metric):
			p.metric, p.dirty = (p.metric+1)%(len(p.metricNames())+1), true
		case key.Matches(msg, k.Overlay):
			st := p.sh.store
			if st == nil {
				return note("no store to pick a run from: overlays need the run's --store", true)
			}
			p.loading = true
			return func() tea.Msg {
				runs, err := st.Summaries()
				return summariesMsg{runs, err}
			}
		}
	}
	return nil
}

// pickKey moves in the overlay picker; enter loads the chosen run (or removes the overlay).
func (p *curvesPane) pickKey(msg tea.KeyMsg) tea.Cmd {
	k := &p.sh.keys.Pick
	n := len(p.runs) + 1
	switch {
	case msg.Type == tea.KeyEsc || msg.String() == "o" || msg.String() == "q":
		p.picking = false
	case key.Matches(msg, k.Up):
		p.pick.cursor--
	case key.Matches(msg, k.Down):
		p.pick.cursor++
	case key.Matches(msg, k.Pick):
		p.picking = false
		if p.pick.cursor == 0 {
			p.overlay, p.dirty = nil, true
			return nil
		}
		sum, st := p.runs[p.pick.cursor-1], p.sh.store
		p.loading = true
		return func() tea.Msg {
			evals, err := st.Evals(sum.ID)
			if err != nil {
				return overlayMsg{err: err}
			}
			m, err := st.Metrics(sum.ID)
			if err != nil {
				return overlayMsg{err: err}
			}
			return overlayMsg{run: &overlayRun{sum: sum, evals: evals, metrics: m}}
		}
	}
	p.pick.clampTo(n, p.h-2)
	return nil
}

// sft reports whether the run is a supervised fine-tuning run: its first curve is the loss
// (training and held-out), in place of pass@k.
func (p *curvesPane) sft() bool { return p.sh.data.start.Kind == "sft" }

func (p *curvesPane) Subtitle() string {
	s := "pass@k"
	if p.sft() {
		s = "loss"
	}
	if p.metric > 0 {
		if names := p.metricNames(); p.metric-1 < len(names) {
			s = string(names[p.metric-1])
		}
	}
	if p.overlay != nil {
		s += " vs " + runLabel(p.overlay.sum)
	}
	return s
}

func runLabel(r store.RunSummary) string {
	if r.Name != "" && r.Name != r.ID {
		return r.Name + " (" + r.ID + ")"
	}
	return r.ID
}

func (p *curvesPane) View() string {
	if p.w <= 0 || p.h <= 0 {
		return ""
	}
	if p.picking {
		return p.pickerView()
	}
	if p.dirty || p.bw != p.w || p.bh != p.h {
		p.chart, p.dirty, p.bw, p.bh = p.render(p.w, p.h), false, p.w, p.h
	}
	return strings.Join(p.chart, "\n")
}

func (p *curvesPane) pickerView() string {
	t := p.sh.theme
	lines := []string{t.Bold.Render(fit("Overlay which run? (enter picks, esc closes)", p.w))}
	rows := max(p.h-1, 0)
	p.pick.clampTo(len(p.runs)+1, rows)
	for i := p.pick.offset; i < len(p.runs)+1 && i < p.pick.offset+rows; i++ {
		s := "none (remove the overlay)"
		if i > 0 {
			r := p.runs[i-1]
			var ks []int
			for k := range r.BestPassAtK {
				ks = append(ks, k)
			}
			sort.Ints(ks)
			var best []string
			for _, k := range ks {
				best = append(best, fmt.Sprintf("@%d %.3f", k, r.BestPassAtK[k]))
			}
			s = fmt.Sprintf("%s · %s · %s · %d/%d steps · best %s", runLabel(r), r.Recipe, r.Status, r.Steps, r.TotalSteps, strings.Join(best, " "))
		}
		mark := "  "
		if i == p.pick.cursor {
			mark = "› "
		}
		row := fit(mark+s, p.w)
		if i == p.pick.cursor {
			row = t.Selected.Render(row)
		}
		lines = append(lines, row)
	}
	if len(p.runs) == 0 {
		lines = append(lines, t.Faint.Render(fit("  (the store holds no other run)", p.w)))
	}
	return strings.Join(lines, "\n")
}

// curve is one run's values of one quantity.
type curve struct {
	label string
	rank  int // colour and glyph rank
	pts   []point
}

// curves gathers what is plotted: for pass@k one curve per k, else the chosen metric; and the
// overlay run's matching curves.
func (p *curvesPane) curves() (name string, own, other []curve) {
	d := p.sh.data
	if p.metric == 0 && p.sft() {
		name = "loss"
		for i, metric := range []event.Metric{event.MetricLoss, event.MetricEvalLoss} {
			c := curve{label: string(metric), rank: i}
			for _, m := range d.metrics {
				if v, ok := m.Metrics[metric]; ok {
					c.pts = appendPoint(c.pts, point{m.Step, v})
				}
			}
			own = append(own, c)
			if p.overlay != nil {
				o := curve{label: c.label, rank: i}
				steps := make([]int, 0, len(p.overlay.metrics))
				for s := range p.overlay.metrics {
					steps = append(steps, s)
				}
				sort.Ints(steps)
				for _, s := range steps {
					if v, ok := p.overlay.metrics[s][string(metric)]; ok {
						o.pts = appendPoint(o.pts, point{s, v})
					}
				}
				other = append(other, o)
			}
		}
		return name, own, other
	}
	if p.metric == 0 {
		name = "pass@k"
		ks := d.ks()
		for i, k := range ks {
			c := curve{label: fmt.Sprintf("pass@%d", k), rank: i}
			for _, e := range d.evals {
				if v, ok := e.PassAtK[k]; ok {
					c.pts = appendPoint(c.pts, point{e.Step, v})
				}
			}
			own = append(own, c)
			if p.overlay != nil {
				o := curve{label: c.label, rank: i}
				evals := append([]store.Eval(nil), p.overlay.evals...)
				sort.SliceStable(evals, func(a, b int) bool { return evals[a].Step < evals[b].Step })
				for _, e := range evals {
					if v, ok := e.PassAtK[k]; ok {
						o.pts = appendPoint(o.pts, point{e.Step, v})
					}
				}
				other = append(other, o)
			}
		}
		return name, own, other
	}
	names := p.metricNames()
	if p.metric-1 >= len(names) {
		p.metric = 0
		return p.curves()
	}
	metric := names[p.metric-1]
	name = string(metric)
	c := curve{label: name}
	for _, m := range d.metrics {
		if v, ok := m.Metrics[metric]; ok {
			c.pts = appendPoint(c.pts, point{m.Step, v})
		}
	}
	own = []curve{c}
	if p.overlay != nil {
		o := curve{label: name}
		steps := make([]int, 0, len(p.overlay.metrics))
		for s := range p.overlay.metrics {
			steps = append(steps, s)
		}
		sort.Ints(steps)
		for _, s := range steps {
			if v, ok := p.overlay.metrics[s][name]; ok { // the store's metrics, keyed by the names as strings
				o.pts = appendPoint(o.pts, point{s, v})
			}
		}
		other = []curve{o}
	}
	return name, own, other
}

// appendPoint adds q, replacing a point at the same step (a re-evaluation after a resume).
func appendPoint(pts []point, q point) []point {
	if n := len(pts); n > 0 && pts[n-1].step == q.step {
		pts[n-1] = q
		return pts
	}
	return append(pts, q)
}

// sample evaluates a curve at cols evenly spaced steps from lo to hi (linear between points,
// NaN outside the curve's own steps).
func sample(pts []point, lo, hi float64, cols int) []float64 {
	out := make([]float64, cols)
	j := 0
	for i := range out {
		x := lo
		if cols > 1 {
			x = lo + (hi-lo)*float64(i)/float64(cols-1)
		}
		for j+1 < len(pts) && float64(pts[j+1].step) < x {
			j++
		}
		switch {
		case len(pts) == 0 || x < float64(pts[0].step)-1e-9 || x > float64(pts[len(pts)-1].step)+1e-9:
			out[i] = math.NaN()
		case j+1 >= len(pts) || float64(pts[j].step) >= x:
			out[i] = pts[j].v
		default:
			a, b := pts[j], pts[j+1]
			f := (x - float64(a.step)) / float64(b.step-a.step)
			out[i] = a.v + f*(b.v-a.v)
		}
	}
	return out
}

// render draws the info line, the chart and the legend in w×h.
func (p *curvesPane) render(w, h int) []string {
	t := p.sh.theme
	name, own, other := p.curves()
	a := smoothings[p.smoothI]
	// the info line, in fewer words where it does not fit (the keys are in the footer and help)
	loading := ""
	if p.loading {
		loading = " · loading…"
	}
	var info string
	for _, f := range []string{"%s · smoothing %.1f (s) · m next metric · o overlay", "%s · smoothing %.1f (s) · m metric · o overlay", "%s · smoothing %.1f (s)", "%s · smoothing %.1f"} {
		if info = fmt.Sprintf(f, name, a) + loading; width(info) <= w {
			break
		}
	}
	out := []string{t.Faint.Render(fit(info, w))}

	// smoothed copies of the values, and the latest raw and smoothed values for the legend
	lo, hi := math.Inf(1), math.Inf(-1)
	minStep, maxStep := math.MaxInt, math.MinInt
	smoothed := func(c curve) []point {
		ys := make([]float64, len(c.pts))
		for i, q := range c.pts {
			ys[i] = q.v
		}
		ys = smooth(ys, a)
		s := make([]point, len(c.pts))
		for i, q := range c.pts {
			s[i] = point{q.step, ys[i]}
		}
		return s
	}
	var ownS, otherS [][]point
	for _, set := range [][]curve{own, other} {
		for _, c := range set {
			for _, q := range c.pts {
				lo, hi = min(lo, q.v), max(hi, q.v)
				minStep, maxStep = min(minStep, q.step), max(maxStep, q.step)
			}
		}
	}
	for _, c := range own {
		ownS = append(ownS, smoothed(c))
	}
	for _, c := range other {
		otherS = append(otherS, smoothed(c))
	}

	// legend rows: one per curve, largest k last as in the chart's drawing order
	var legend []string
	for i, c := range own {
		if len(c.pts) == 0 {
			continue
		}
		last := c.pts[len(c.pts)-1]
		s := t.kStyle(c.rank).Render(p.glyph(c.rank)+" "+c.label) + fmt.Sprintf(" %s", fmtNum(ownS[i][len(ownS[i])-1].v))
		if a > 0 {
			s += t.Faint.Render(fmt.Sprintf(" (raw %s)", fmtNum(last.v)))
		}
		if w >= 60 {
			s += t.Faint.Render(fmt.Sprintf(" at step %d", last.step))
		}
		if i < len(other) && len(other[i].pts) > 0 {
			s += "   " + t.Faint.Render(fmt.Sprintf("∘ %s %s", runLabel(p.overlay.sum), fmtNum(otherS[i][len(otherS[i])-1].v)))
		}
		legend = append(legend, s)
	}
	if len(legend) == 0 {
		msg := "no evaluations yet: pass@k appears after the first eval"
		if live := p.sh.data.evalLive; live != nil {
			msg = fmt.Sprintf("the evaluation of step %d is running: %d of %d tasks done", live.Step, live.TasksDone, live.Tasks)
			if s := evalSoFar(live); s != "" {
				msg = fmt.Sprintf("the evaluation of step %d is running: so far %s", live.Step, s)
			}
		}
		if p.metric > 0 {
			msg = "no values of " + name + " yet"
		}
		for _, l := range wrap(msg, w) {
			out = append(out, t.Faint.Render(fit(l, w)))
		}
		return out
	}
	chartH := h - 1 - len(legend) - 2 // the x axis and its labels take two rows
	if chartH < 3 || w < 16 || maxStep <= minStep {
		// too small for a chart (or a single step): the legend says it all
		for _, l := range legend {
			out = append(out, fit(l, w))
		}
		return out
	}
	if hi-lo < 0.02 {
		mid := (hi + lo) / 2
		lo, hi = mid-0.01, mid+0.01
	}
	// series, the largest k first so that the smaller ones are drawn over it; raw values as dots
	var data [][]float64
	var colors []asciigraph.AnsiColor
	var chars []asciigraph.CharSet
	addSeries := func(pts []point, color asciigraph.AnsiColor, cs asciigraph.CharSet, cols int) {
		data = append(data, sample(pts, float64(minStep), float64(maxStep), cols))
		colors = append(colors, color)
		chars = append(chars, cs)
	}
	plot := func(cols int) []string {
		data, colors, chars = nil, nil, nil
		for i := len(own) - 1; i >= 0; i-- {
			r := own[i].rank
			if i < len(other) && len(other[i].pts) > 0 {
				addSeries(otherS[i], t.KFaint[r%len(t.KFaint)], asciigraph.CreateCharSet("∘"), cols)
			}
			if a > 0 {
				addSeries(own[i].pts, t.KFaint[r%len(t.KFaint)], asciigraph.CreateCharSet("·"), cols)
			}
			cs := asciigraph.DefaultCharSet
			if g := t.kGlyph(r); g != "" {
				cs = asciigraph.CreateCharSet(g)
			}
			addSeries(ownS[i], t.KColors[r%len(t.KColors)], cs, cols)
		}
		opts := []asciigraph.Option{
			asciigraph.Height(chartH - 1), asciigraph.Width(cols), asciigraph.LowerBound(lo), asciigraph.UpperBound(hi),
			asciigraph.SeriesChars(chars...),
			asciigraph.XAxisRange(float64(minStep), float64(maxStep)),
			asciigraph.XAxisTickCount(clamp(cols/12, 2, maxStep-minStep+1)),
			asciigraph.XAxisValueFormatter(func(v float64) string { return fmt.Sprintf("%.0f", v) }),
			asciigraph.YAxisValueFormatter(func(v float64) string { return fmtNum(v) }),
		}
		if t.Color {
			opts = append(opts, asciigraph.SeriesColors(colors...))
		}
		return strings.Split(asciigraph.PlotMany(data, opts...), "\n")
	}
	cols := max(w-12, 4)
	lines := plot(cols)
	widest := 0
	for _, l := range lines {
		widest = max(widest, width(l))
	}
	if widest != w && cols+w-widest >= 4 {
		cols += w - widest
		lines = plot(cols)
	}
	for _, l := range lines {
		out = append(out, fit(l, w))
	}
	for _, l := range legend {
		out = append(out, fit(l, w))
	}
	return out
}

// glyph is the legend mark of the curve of rank r.
func (p *curvesPane) glyph(r int) string {
	if g := p.sh.theme.kGlyph(r); g != "" {
		return g
	}
	return "━"
}
