package ui

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"agentrl/engine/event"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

func TestCompute(t *testing.T) {
	for _, sz := range [][2]int{{0, 0}, {1, 1}, {10, 5}, {23, 8}, {24, 7}, {24, 8}, {80, 15}, {80, 16}, {80, 24}, {119, 40}, {120, 29}, {120, 30}, {120, 40}, {200, 60}, {500, 200}} {
		w, h := sz[0], sz[1]
		l := Compute(w, h)
		if small := w < MinWidth || h < MinHeight; l.TooSmall != small {
			t.Fatalf("%dx%d: TooSmall=%v", w, h, l.TooSmall)
		}
		if l.TooSmall {
			continue
		}
		// every row belongs to exactly one part: tabs, strip, body (with the side column), footer
		rows := []Rect{l.Tabs, l.Strip, l.Body, l.Footer}
		y := 0
		for _, r := range rows {
			if r.Y != y || r.X != 0 || r.H < 1 {
				t.Fatalf("%dx%d: part %+v does not follow row %d", w, h, r, y)
			}
			y += r.H
		}
		if y != h {
			t.Fatalf("%dx%d: parts cover %d rows", w, h, y)
		}
		sideW, sideH := 0, 0
		for _, s := range l.Side {
			if s.X != l.Body.W || s.Y != l.Body.Y+sideH {
				t.Fatalf("%dx%d: side %+v misplaced", w, h, s)
			}
			sideW = s.W
			sideH += s.H
		}
		if len(l.Side) > 0 && (sideH != l.Body.H || l.Body.W+sideW != w) {
			t.Fatalf("%dx%d: side column %d×%d next to body %d", w, h, sideW, sideH, l.Body.W)
		}
		if len(l.Side) == 0 && l.Body.W != w {
			t.Fatalf("%dx%d: body %d wide", w, h, l.Body.W)
		}
		if wantSide := w >= SideWidth && h >= SideRows; wantSide != (len(l.Side) > 0) {
			t.Fatalf("%dx%d: %d side panes", w, h, len(l.Side))
		}
		// panes stay usable: a framed body at least 20×4 inside
		if iw, ih := inner(l.Body.W, l.Body.H); iw < 20 || ih < 1 {
			t.Fatalf("%dx%d: body inner %d×%d", w, h, iw, ih)
		}
	}
	if l := Compute(80, 24); l.Strip.H != 2 || l.Body.H != 20 {
		t.Fatalf("80x24: strip %d body %d", l.Strip.H, l.Body.H)
	}
}

// TestEverySize draws every pane, the help and the confirmation at sizes from 1×1 to 500×200:
// no panic, and always exactly the terminal's rows and columns.
func TestEverySize(t *testing.T) {
	evs := append(sampleRun(), event.RunEnd{Status: "finished", BestStep: 3})
	sizes := [][2]int{{1, 1}, {10, 5}, {23, 7}, {24, 8}, {30, 10}, {40, 12}, {80, 24}, {120, 40}, {500, 200}}
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			m := testModel(evs, &fakeCtrl{}, w, h)
			for p := paneStatus; p < numPanes; p++ {
				press(m, fmt.Sprint(int(p)+1))
				screen(t, m, w, h)
				for _, k := range []string{"j", "G", "g", "s", "t", "enter", "esc"} {
					press(m, k)
					screen(t, m, w, h)
				}
			}
			press(m, "3", "enter", "t")
			screen(t, m, w, h)
			press(m, "?")
			screen(t, m, w, h)
			press(m, "esc", "S")
			screen(t, m, w, h)
			press(m, "n")
			// an empty model at the same size
			e := testModel(nil, nil, w, h)
			for p := paneStatus; p < numPanes; p++ {
				press(e, fmt.Sprint(int(p)+1))
				screen(t, e, w, h)
			}
		})
	}
	// resizing down and up again keeps the shape
	m := testModel(evs, &fakeCtrl{}, 120, 40)
	press(m, "3", "enter")
	for _, sz := range sizes {
		m.resize(sz[0], sz[1])
		screen(t, m, sz[0], sz[1])
	}
	m.resize(0, 0)
	if m.View() != "" {
		t.Fatal("a 0×0 terminal should draw nothing")
	}
}

func TestTooSmallNotice(t *testing.T) {
	m := testModel(sampleRun(), nil, 20, 6)
	if v := screen(t, m, 20, 6); !strings.HasPrefix(v, "terminal 20×6 is to") {
		t.Fatalf("notice: %q", v)
	}
}

// TestColourScreens draws every pane with colours on (code highlighting, the heat map, the
// ledger's coloured bar): the same shapes, and escape sequences present.
func TestColourScreens(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	r.SetHasDarkBackground(true)
	for _, sz := range [][2]int{{80, 24}, {120, 40}} {
		w, h := sz[0], sz[1]
		m := newModel(config{initial: sampleRun(), ctrl: &fakeCtrl{}, renderer: r, memSample: func() uint64 { return 1 }})
		if !m.sh.theme.Color {
			t.Fatal("colours are off on a true-colour renderer")
		}
		m.resize(w, h)
		for p := paneStatus; p < numPanes; p++ {
			press(m, fmt.Sprint(int(p)+1))
			if v := screen(t, m, w, h); !strings.Contains(v, "\x1b[") {
				t.Fatalf("%v has no colour", p)
			}
		}
		press(m, "3", "g", "j", "j", "j", "j", "enter")
		screen(t, m, w, h)
		press(m, "G")
		screen(t, m, w, h)
		press(m, "t")
		if v := screen(t, m, w, h); !strings.Contains(v, "negative") || strings.Contains(v, "⟨") {
			t.Fatalf("the coloured heat map:\n%s", v)
		}
		press(m, "?")
		screen(t, m, w, h)
	}
	// NoColor wins over the renderer's profile
	m := newModel(config{initial: sampleRun(), renderer: r, noColor: true})
	if m.sh.theme.Color {
		t.Fatal("noColor left colours on")
	}
}
