package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/export"
	"agentrl/store"
)

// tensorboardUsage is the --tensorboard flag's help on run, resume and sft.
const tensorboardUsage = "also write the run's TensorBoard logs (every step metric, evaluations' pass@k, phase times, reward and length histograms) as event files in DIR/RUN_ID, appending when resumed (tensorboard --logdir DIR; docs/export.md)"

// checkTensorboard makes the --tensorboard folder and checks that it takes files, before a run
// starts: once it runs, a failure to write its logs is reported and the run goes on without them.
func checkTensorboard(dir string) error {
	if dir == "" {
		return nil
	}
	fail := func(err error) error {
		return fmt.Errorf("--tensorboard %s: %w; give a folder this user can write to", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(dir, ".agentrl-write-check-*")
	if err != nil {
		return fail(err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// boardTee puts a TensorBoard writer for dir between a run's event stream and what shows it
// (export.Tee): the events pass unchanged, and the returned function waits (boundedly) for the
// logs to be written once the stream has ended, printing a failure the stream could not carry.
// Without dir the stream is returned as it is.
func boardTee(env Env, dir string, events <-chan event.Event) (<-chan event.Event, func()) {
	if dir == "" {
		return events, func() {}
	}
	out, wait := export.Tee(events, export.NewBoard(dir, nil))
	return out, func() {
		if err := wait(boardWait); err != nil {
			fmt.Fprintln(env.Stderr, "agentrl-tui:", err)
		}
	}
}

// boardWait bounds the wait for a run's last TensorBoard values once it has ended.
const boardWait = 30 * time.Second

// runExport is what export writes of a stored run's numbers (its --tensorboard, --metrics and
// --trajectories flags).
type runExport struct {
	tensorboard, metrics, trajectories string
	steps                              string
	eval                               bool
}

func (o runExport) any() bool { return o.tensorboard != "" || o.metrics != "" || o.trajectories != "" }

// check refuses a table file of a kind export does not write, and --steps or --eval without
// --trajectories, before anything is written.
func (o runExport) check() error {
	if o.metrics != "" && !hasExt(o.metrics, ".csv", ".parquet") {
		return fmt.Errorf("export: --metrics %s: give a file ending in .csv or .parquet (the kind written)", o.metrics)
	}
	if o.trajectories != "" && !hasExt(o.trajectories, ".parquet", ".jsonl") {
		return fmt.Errorf("export: --trajectories %s: give a file ending in .parquet or .jsonl (the kind written)", o.trajectories)
	}
	if o.trajectories == "" && (o.steps != "" || o.eval) {
		return errors.New("export: --steps and --eval choose the trajectories --trajectories FILE writes; give --trajectories FILE.parquet or FILE.jsonl")
	}
	if o.steps != "" {
		if _, _, err := export.ParseSteps(o.steps); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	return nil
}

func hasExt(path string, exts ...string) bool {
	for _, e := range exts {
		if strings.EqualFold(filepath.Ext(path), e) {
			return true
		}
	}
	return false
}

// write exports run (the newest when "") of the store at path as o says, a line each on stdout.
func (o runExport) write(env Env, path, runID string) error {
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	if n := st.LiveNote(); n != "" {
		fmt.Fprintln(env.Stderr, n)
	}
	if runID == "" {
		run, err := st.NewestRun()
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		runID = run.ID
	} else if _, err := st.GetRun(runID); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if o.tensorboard != "" {
		b, err := export.WriteBoard(st, runID, o.tensorboard)
		if err != nil {
			return fmt.Errorf("export: --tensorboard %s: %w", o.tensorboard, err)
		}
		if b.Written() == 0 {
			fmt.Fprintf(env.Stdout, "TensorBoard logs of %s: nothing new, %s has every step already\n", runID, b.Dir())
		} else {
			fmt.Fprintf(env.Stdout, "TensorBoard logs of %s: %d values in %s (tensorboard --logdir %s)\n", runID, b.Written(), b.Dir(), o.tensorboard)
		}
	}
	if o.metrics != "" {
		tab, err := export.Metrics(st, runID)
		if err != nil {
			return fmt.Errorf("export: --metrics: %w", err)
		}
		write := tab.WriteCSV
		if hasExt(o.metrics, ".parquet") {
			write = tab.WriteParquet
		}
		if err := writeFile(o.metrics, write); err != nil {
			return fmt.Errorf("export: --metrics %s: %w", o.metrics, err)
		}
		fmt.Fprintf(env.Stdout, "metrics of %s: %d steps × %d columns in %s\n", runID, len(tab.Rows), len(tab.Columns), o.metrics)
	}
	if o.trajectories != "" {
		sel := export.Selection{To: -1, Eval: o.eval}
		if o.steps != "" {
			sel.From, sel.To, _ = export.ParseSteps(o.steps) // checked
		}
		what := "trained"
		if o.eval {
			what = "evaluation"
		}
		n := 0
		err := writeFile(o.trajectories, func(w io.Writer) error {
			tw := export.NewJSONLTrajectories(w)
			if hasExt(o.trajectories, ".parquet") {
				tw = export.NewParquetTrajectories(w)
			}
			err := export.Trajectories(st, runID, sel, func(r export.TrajectoryRow) error {
				n++
				return tw.Write(r)
			})
			if err == nil && n == 0 {
				err = noTrajectories(runID, o, what)
			}
			if cerr := tw.Close(); err == nil {
				err = cerr
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("export: --trajectories %s: %w", o.trajectories, err)
		}
		fmt.Fprintf(env.Stdout, "trajectories of %s: %d %s ones in %s\n", runID, n, what, o.trajectories)
	}
	return nil
}

// noTrajectories says why a selection is empty and what to try.
func noTrajectories(runID string, o runExport, what string) error {
	where := ""
	if o.steps != "" {
		where = " in steps " + o.steps
	}
	msg := fmt.Sprintf("run %s has no %s trajectories%s", runID, what, where)
	if o.eval {
		return errors.New(msg + " (a run keeps its evaluations' trajectories with eval.store_trajectories on)")
	}
	return errors.New(msg + " (without --eval the trained ones are written; with it the evaluations')")
}

// writeFile writes path through write, whole or not at all: into a temporary file beside it,
// renamed over path once complete.
func writeFile(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o644); err != nil { // as os.Create would make it
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
