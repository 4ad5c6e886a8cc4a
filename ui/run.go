package ui

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/record"
	"agentrl/store"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Options for the interactive workbench.
type Options struct {
	Events  <-chan event.Event // live stream; closed when the run ends. nil for view.
	Initial []event.Event      // events to apply before the stream (view: the whole stored run)
	Control Controller         // nil = read-only view
	Store   *store.Store       // for overlays; may be nil
	RunID   string
	Input   io.Reader // nil = os.Stdin
	Output  io.Writer // nil = os.Stdout
	NoColor bool
	// NoSignals leaves SIGINT and SIGTERM to the caller (a live run stops on them its own way);
	// otherwise bubbletea quits on them.
	NoSignals bool
}

// RunTUI runs the workbench (bubbletea on the alternate screen, with mouse cell motion) until
// the user quits with q or ctrl+c, or ctx ends. Quitting does not stop the run: RunTUI returns
// and the caller decides. It returns nil when the user quit, ctx's error when ctx ended it.
// Colours are off when NoColor is set or NO_COLOR is in the environment (the renderer then uses
// the Ascii profile and the screens mark things with glyphs instead).
func RunTUI(ctx context.Context, o Options) error {
	var out io.Writer = os.Stdout
	if o.Output != nil {
		out = o.Output
	}
	r := lipgloss.NewRenderer(out)
	noColor := o.NoColor || os.Getenv("NO_COLOR") != ""
	if noColor {
		r.SetColorProfile(termenv.Ascii)
	} else if r.ColorProfile() != termenv.Ascii {
		r.HasDarkBackground() // ask the terminal now, before bubbletea reads the input
	}
	c := config{
		events: o.Events, initial: o.Initial, ctrl: o.Control, store: o.Store, runID: o.RunID,
		renderer: r, noColor: noColor, memEvery: memEvery,
	}
	if f, ok := out.(*os.File); !ok || !charDevice(f) {
		c.width, c.height = 120, 40 // no terminal to ask: draw at the size the screen captures use
	} else {
		// OSC 52: the terminal (or tmux, with set-clipboard on) puts the text on the clipboard;
		// one short write, between two of bubbletea's frames
		c.clipboard = func(s string) { termenv.NewOutput(f).Copy(s) }
	}
	m := newModel(c)
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithOutput(out), tea.WithAltScreen(), tea.WithMouseCellMotion()}
	if o.Input != nil {
		opts = append(opts, tea.WithInput(o.Input))
	}
	if o.NoSignals {
		opts = append(opts, tea.WithoutSignalHandler())
	}
	_, err := tea.NewProgram(m, opts...).Run()
	if err != nil && errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// charDevice reports whether f is a terminal (a character device).
func charDevice(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// memEvery is how often the workbench samples its own memory (shown on the CPU backend).
const memEvery = 2 * time.Second

// StoredEvents rebuilds a stored run's events for the read-only view (record.Replay: the same
// mapping the controller stores them by).
func StoredEvents(st *store.Store, runID string) ([]event.Event, error) {
	return record.Replay(st, runID)
}

// trajectoryOf decodes a stored trajectory (see record.Trajectory).
func trajectoryOf(r store.TrajectoryRecord) event.Trajectory { return record.Trajectory(r) }
