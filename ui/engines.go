package ui

import (
	"fmt"
	"strings"

	"agentrl/engine/event"
)

// The engines of rollout.engines (engine/remote): the inference servers a run generates on, as
// its latest engines event shows them. The Status and GPU panes draw the same block.

// engineCol is a numeric column of the engines table: its header where the pane is wide and
// where it is narrow, its width, and its cell.
type engineCol struct {
	wide, narrow string
	w            int
	cell         func(event.EngineState) string
}

var engineCols = []engineCol{
	{"in flight", "infl", 9, func(e event.EngineState) string { return fmt.Sprint(e.InFlight) }},
	{"done", "done", 7, func(e event.EngineState) string { return fmt.Sprint(e.Done) }},
	{"tok/s", "tok/s", 7, func(e event.EngineState) string { return fmtRate(e.TokensPerSec) }},
	{"failovers", "fail", 9, func(e event.EngineState) string { return fmt.Sprint(e.Failovers) }},
	{"errors", "err", 6, func(e event.EngineState) string { return fmt.Sprint(e.Errors) }},
}

// enginesWide is the least width at which the table takes the long headers, enginesTable the
// least at which it is a table (below, each engine is its name, then its counters wrapped).
const (
	enginesWide  = 100
	enginesTable = 60
)

// enginesTitle is the block's heading: the weights the engines were last given and how many are
// in the rotation.
func enginesTitle(e *event.Engines) string {
	up := 0
	for _, s := range e.Engines {
		if s.Up {
			up++
		}
	}
	return fmt.Sprintf("Engines (rollout.engines: weights of step %d, %d of %d up)", e.Weights, up, len(e.Engines))
}

// enginesRows draws the engines table for width w: a header, then each engine (kind and URL, up or
// DOWN, requests in flight and done, tokens/s, failovers, errors), a down engine's reason wrapped
// under it. Nil without an engines event.
func enginesRows(e *event.Engines, t *Theme, w int) []string {
	if e == nil {
		return nil
	}
	if w < enginesTable {
		return enginesList(e, t, w)
	}
	narrow := w < enginesWide
	nums := 0
	for _, c := range engineCols {
		if narrow {
			nums += max(len(c.narrow), 4) + 1
		} else {
			nums += c.w + 1
		}
	}
	const stateW = 5
	urlW := max(w-2-stateW-1-nums, 12)
	row := func(name, state string, cells []string) string {
		s := "  " + fit(name, urlW) + " " + state
		for i, c := range engineCols {
			cw := c.w
			if narrow {
				cw = max(len(c.narrow), 4)
			}
			s += " " + fitRight(cells[i], cw)
		}
		return s
	}
	heads := make([]string, len(engineCols))
	for i, c := range engineCols {
		heads[i] = c.wide
		if narrow {
			heads[i] = c.narrow
		}
	}
	out := []string{t.Faint.Render(row("engine", fit("state", stateW), heads))}
	for _, s := range e.Engines {
		state := t.Good.Render(fit("up", stateW))
		if !s.Up {
			state = t.Bad.Render(fit("DOWN", stateW))
		}
		cells := make([]string, len(engineCols))
		for i, c := range engineCols {
			cells[i] = c.cell(s)
		}
		out = append(out, row(s.Kind+" "+s.URL, state, cells))
		if !s.Up && s.Down != "" {
			for _, l := range wrap("down: "+s.Down, max(w-6, 20)) {
				out = append(out, "      "+t.Bad.Render(l))
			}
		}
	}
	return out
}

// enginesList is enginesRows for a narrow pane: each engine's state and name on a line, its
// counters wrapped under it, a down engine's reason after them.
func enginesList(e *event.Engines, t *Theme, w int) []string {
	var out []string
	for _, s := range e.Engines {
		state := t.Good.Render("up  ")
		if !s.Up {
			state = t.Bad.Render("DOWN")
		}
		out = append(out, " "+state+" "+fit(s.Kind+" "+s.URL, max(w-6, 1)))
		counts := []string{fmt.Sprintf("%d in flight", s.InFlight), fmt.Sprintf("%d done", s.Done), fmtRate(s.TokensPerSec) + " tok/s",
			counted(s.Failovers, "failover"), counted(s.Errors, "error")}
		for _, l := range pack(counts, " · ", max(w-6, 10)) {
			out = append(out, "      "+l)
		}
		if !s.Up && s.Down != "" {
			for _, l := range wrap("down: "+s.Down, max(w-6, 10)) {
				out = append(out, "      "+t.Bad.Render(l))
			}
		}
	}
	return out
}

// enginesLine is an engines event for a log: each engine's state and counters in one line.
func enginesLine(e event.Engines) string {
	parts := make([]string, len(e.Engines))
	for i, s := range e.Engines {
		state := "up"
		if !s.Up {
			state = "DOWN (" + s.Down + ")"
		}
		parts[i] = fmt.Sprintf("%s %s %s, %d in flight, %d done, %s tok/s, %s, %s",
			s.Kind, s.URL, state, s.InFlight, s.Done, fmtRate(s.TokensPerSec), counted(s.Failovers, "failover"), counted(s.Errors, "error"))
	}
	return strings.Join(parts, "; ")
}

// counted is "1 error", "2 errors".
func counted(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
