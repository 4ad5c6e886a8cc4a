package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"agentrl/engine/event"
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

// StoredEvents rebuilds a stored run's events for the read-only view: RunStart from the run,
// then step by step its phase times, metrics, trajectories, evaluation and checkpoint (the run's
// best step flagged Best), and RunEnd when the run has an end status. Ledgers and alarms are
// not stored and so not shown.
func StoredEvents(st *store.Store, runID string) ([]event.Event, error) {
	run, err := st.GetRun(runID)
	if err != nil {
		return nil, err
	}
	metrics, err := st.Metrics(runID)
	if err != nil {
		return nil, err
	}
	evals, err := st.Evals(runID)
	if err != nil {
		return nil, err
	}
	cps, err := st.Checkpoints(runID)
	if err != nil {
		return nil, err
	}
	trajs, err := st.Trajectories(runID, -1)
	if err != nil {
		return nil, err
	}
	phases, err := st.Phases(runID)
	if err != nil {
		return nil, err
	}
	type stepEvents struct {
		phases  map[string]float64
		metrics map[string]float64
		trajs   []event.Event
		eval    *store.Eval
		ckpt    *store.Manifest
	}
	steps := map[int]*stepEvents{}
	at := func(s int) *stepEvents {
		if steps[s] == nil {
			steps[s] = &stepEvents{}
		}
		return steps[s]
	}
	for s, m := range metrics {
		at(s).metrics = m
	}
	for s, p := range phases {
		at(s).phases = p
	}
	for i := range evals {
		at(evals[i].Step).eval = &evals[i]
	}
	for i := range cps {
		at(cps[i].Step).ckpt = &cps[i]
	}
	for _, r := range trajs {
		at(r.Step).trajs = append(at(r.Step).trajs, trajectoryOf(r))
	}
	order := make([]int, 0, len(steps))
	for s := range steps {
		order = append(order, s)
	}
	sort.Ints(order)

	evs := []event.Event{event.RunStart{RunID: run.ID, Name: run.Name, Recipe: run.Recipe, TotalSteps: run.TotalSteps}}
	var first *store.Eval // the first evaluation with per-task counts, as the controller compares
	for _, s := range order {
		se := steps[s]
		for _, name := range event.Phases() {
			if sec, ok := se.phases[name]; ok {
				evs = append(evs, event.Phase{Step: s, Phase: name, Seconds: sec})
			}
		}
		if se.metrics != nil {
			evs = append(evs, event.StepMetrics{Step: s, Metrics: se.metrics})
		}
		evs = append(evs, se.trajs...)
		if se.eval != nil {
			ev := event.Eval{Step: s, PassAtK: se.eval.PassAtK, ByLevel: se.eval.ByLevel, Best: run.BestStep > 0 && s == run.BestStep}
			switch {
			case se.eval.Counts == nil:
			case first == nil:
				first = se.eval
			case first.Tasks == se.eval.Tasks:
				ev.Since, ev.Change = first.Step, event.ChangeSince(first.Counts, se.eval.Counts, ev.Ks())
			}
			evs = append(evs, ev)
		}
		if c := se.ckpt; c != nil {
			evs = append(evs, event.Checkpoint{Step: s, ID: fmt.Sprintf("%s/%d", runID, s), Bytes: c.Bytes, Metrics: c.Metrics,
				Best: run.BestStep > 0 && s == run.BestStep})
		}
	}
	switch run.Status {
	case "", "running":
	default:
		end := event.RunEnd{Status: run.Status, Reason: run.StopReason, BestStep: run.BestStep, Marked: run.BestPinned,
			Detail: run.StopDetail, Evaluations: len(evals)}
		for _, s := range order {
			if steps[s].metrics != nil {
				end.Step = s
			}
		}
		if n := len(cps); n > 0 {
			end.Checkpoint = cps[n-1].Step
		}
		evs = append(evs, end)
	}
	return evs, nil
}

// trajectoryOf decodes a stored trajectory (the engine's JSON of event.Trajectory), falling back
// to the record's index fields when its data does not decode.
func trajectoryOf(r store.TrajectoryRecord) event.Trajectory {
	var t event.Trajectory
	if len(r.Data) > 0 && json.Unmarshal(r.Data, &t) == nil {
		return t
	}
	t = event.Trajectory{Step: r.Step, TaskID: r.TaskID, Sample: r.Sample, Correct: r.Correct}
	t.Reward.Total = r.Reward
	if r.Hinted {
		t.Hint = "(hinted; the bridge thought was not stored)"
	}
	return t
}
