package ui

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"agentrl/engine/event"

	tea "github.com/charmbracelet/bubbletea"
)

// procMemory returns the resident memory of this process: VmRSS from /proc/self/status, or the
// Go runtime's own total when that cannot be read.
func procMemory() uint64 {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				fields := strings.Fields(rest)
				if len(fields) >= 1 {
					if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
						return kb << 10
					}
				}
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Sys
}

// cpuBackend reports whether a ledger comes from the CPU (Go) backend, which has no device
// memory to show.
func cpuBackend(l *event.Ledger) bool {
	return strings.HasPrefix(l.Backend, "go") || l.DeviceTotal == 0
}

// gpuPane is the GPU pane: the engine's memory ledger as a bar stacked by component, next to
// NVML's used/total and utilisation, with a short history; on the CPU backend, the process's
// own memory instead of the device's. With rollout.engines, the inference servers first.
type gpuPane struct {
	paneBase
	keyHelp
	sh     *shared
	scroll textScroll
	lines  []string
	dirty  bool
	builtW int
}

func newGPUPane(sh *shared) *gpuPane {
	return &gpuPane{sh: sh, keyHelp: keyHelp{sh.keys, paneGPU}, dirty: true}
}

func (p *gpuPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case dataMsg:
		if msg.ch&(chLedger|chRun|chEngines) != 0 {
			p.dirty = true
		}
	case tea.KeyMsg:
		p.build()
		p.scroll.move(msg, &p.sh.keys.GPU, len(p.lines), p.h)
	}
	return nil
}

func (p *gpuPane) Scroll(n int) {
	p.build()
	p.scroll.top += n
	p.scroll.clampTo(len(p.lines), p.h)
}

func (p *gpuPane) Subtitle() string {
	l := p.sh.data.ledger
	switch {
	case l == nil:
		return ""
	case cpuBackend(l):
		return "CPU backend " + l.Backend
	}
	return l.Backend
}

func (p *gpuPane) build() {
	if !p.dirty && p.builtW == p.w {
		return
	}
	p.lines, p.dirty, p.builtW = p.render(p.w), false, p.w
	for i := range p.lines {
		p.lines[i] = fit(p.lines[i], p.w)
	}
	p.scroll.clampTo(len(p.lines), p.h)
}

func (p *gpuPane) View() string {
	p.build()
	return strings.Join(window(p.lines, p.scroll.top, p.h), "\n")
}

// partGlyphs draw the ledger's components, each its own shape, with colours on or off: a
// component never differs from another by colour alone (NO_COLOR, colour-blind readers). Past
// them, letters.
var partGlyphs = []string{"█", "▓", "▒", "░", "#", "=", "+", "%", "*", ":"}

// partGlyph is the glyph of ledger component i (in the order drawn).
func partGlyph(i int) string {
	if i < len(partGlyphs) {
		return partGlyphs[i]
	}
	return string(rune('a' + (i-len(partGlyphs))%26))
}

// render draws the pane: with rollout.engines, the engines the rollout generates on first
// (where its GPUs are), then this device's memory.
func (p *gpuPane) render(w int) []string {
	d, t := p.sh.data, p.sh.theme
	var out []string
	if d.engines != nil {
		for _, l := range wrap(enginesTitle(d.engines), w) {
			out = append(out, t.Bold.Render(l))
		}
		out = append(out, enginesRows(d.engines, t, w)...)
		out = append(out, "", t.Bold.Render("This device"))
	}
	return append(out, p.renderMemory(w)...)
}

// renderMemory draws the ledger, NVML's memory and utilisation, or the process's memory.
func (p *gpuPane) renderMemory(w int) []string {
	d, t := p.sh.data, p.sh.theme
	var out []string
	add := func(s ...string) { out = append(out, s...) }
	l := d.ledger
	bw := max(min(w-2, 60), 4)
	if l == nil {
		add(t.Faint.Render("no memory ledger from the engine yet"))
	} else {
		type comp struct {
			name  string
			bytes int64
		}
		var comps []comp
		var sum int64
		for n, b := range l.Components {
			comps = append(comps, comp{n, b})
			sum += b
		}
		sort.Slice(comps, func(i, j int) bool {
			if comps[i].bytes != comps[j].bytes {
				return comps[i].bytes > comps[j].bytes
			}
			return comps[i].name < comps[j].name
		})
		scale := float64(max(l.Budget, sum))
		if !cpuBackend(l) {
			scale = max(scale, float64(l.DeviceTotal))
		}
		head := []string{fmt.Sprintf("ledger %s", fmtBytes(float64(sum)))}
		if l.Budget > 0 {
			head = append(head, fmt.Sprintf("of budget %s (%.0f%%)", fmtBytes(float64(l.Budget)), 100*float64(sum)/float64(l.Budget)))
		}
		for _, s := range pack(head, " ", w) {
			add(t.Bold.Render(s))
		}
		// the stacked bar: each component's share of the scale, in its colour or glyph
		var sb strings.Builder
		used := 0
		for i, c := range comps {
			n := 0
			if scale > 0 {
				n = int(float64(c.bytes) / scale * float64(bw))
			}
			if c.bytes > 0 && n == 0 {
				n = 1
			}
			n = min(n, bw-used)
			sb.WriteString(t.part(i).Render(strings.Repeat(partGlyph(i), n)))
			used += n
		}
		budgetMark := bw
		if scale > 0 && l.Budget > 0 {
			budgetMark = int(float64(l.Budget) / scale * float64(bw))
		}
		for x := used; x < bw; x++ {
			if x == budgetMark-1 && budgetMark < bw {
				sb.WriteString(t.Warn.Render("┊"))
			} else {
				sb.WriteString(t.Faint.Render("·"))
			}
		}
		add("▕" + sb.String() + "▏")
		// the legend: glyph, name, size, share, in columns as wide as the longest name (a
		// component in host memory is "NAME (host)"); the share goes first where they do not fit
		nameW := 0
		for _, c := range comps {
			nameW = max(nameW, width(c.name))
		}
		pct := true
		if 3+nameW+11+6 > w {
			pct = false
			nameW = max(min(nameW, w-3-11), 4)
		}
		for i, c := range comps {
			row := " " + t.part(i).Render(partGlyph(i)) + " " + fit(c.name, nameW) + fitRight(fmtBytes(float64(c.bytes)), 11)
			if pct {
				share := 0.0
				if sum > 0 {
					share = float64(c.bytes) / float64(sum)
				}
				row += fmt.Sprintf(" %4.0f%%", 100*share)
			}
			add(row)
		}
		add("")
		if cpuBackend(l) {
			for _, s := range wrap(fmt.Sprintf("CPU backend (%s): no GPU, showing this process's memory", orDash(l.Backend)), w) {
				add(t.Warn.Render(s))
			}
		} else {
			frac := float64(l.DeviceUsed) / float64(l.DeviceTotal)
			nvml := []string{fmt.Sprintf("NVML used %s of %s (%.0f%%)", fmtBytes(float64(l.DeviceUsed)), fmtBytes(float64(l.DeviceTotal)), 100*frac), fmt.Sprintf("util %d%%", l.UtilPct)}
			for _, s := range pack(nvml, " · ", w) {
				add(t.Bold.Render(s))
			}
			lw := max(min(w-2-width(" utilisation"), 60), 4) // the bars and their labels fit the row
			add("▕" + t.Accent.Render(bar(frac, lw)) + "▏ memory")
			add("▕" + t.Good.Render(bar(float64(l.UtilPct)/100, lw)) + "▏ utilisation")
			if len(d.ledgerHist) > 1 {
				var led, dev, util []float64
				for _, s := range d.ledgerHist {
					led, dev, util = append(led, s.Ledger), append(dev, s.Device), append(util, s.Util)
				}
				sw := max(w-10, 1)
				add("", t.Faint.Render("history (last "+strconv.Itoa(min(len(led), sw))+" ledgers)"))
				add(fit("ledger ", 8)+t.Accent.Render(sparkline(led, 0, 1, sw)),
					fit("device ", 8)+t.Accent.Render(sparkline(dev, 0, 1, sw)),
					fit("util ", 8)+t.Good.Render(sparkline(util, 0, 1, sw)))
			}
			return out
		}
	}
	if d.procRSS > 0 {
		add(t.Bold.Render("process resident memory " + fmtBytes(float64(d.procRSS))))
		if len(d.procHist) > 1 {
			lo, hi := d.procHist[0], d.procHist[0]
			for _, v := range d.procHist {
				lo, hi = min(lo, v), max(hi, v)
			}
			add(fmt.Sprintf("%s  %s … %s", t.Accent.Render(sparkline(d.procHist, lo*0.9, hi, max(w-28, 1))), fmtBytes(lo), fmtBytes(hi)))
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
