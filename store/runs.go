package store

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// RunSummary is one row of `agentrl-tui runs`.
type RunSummary struct {
	Run
	Steps       int             `json:"steps"`       // steps with metrics
	Checkpoints []int           `json:"checkpoints"` // steps with a checkpoint
	BestPassAtK map[int]float64 `json:"best_pass_at_k"`
	// A run stored as running whose writer is gone (Interrupted) is listed with Status
	// "interrupted" (its record keeps "running"), where it stood (LastStep: the last step with
	// metrics; LastCheckpoint: its latest checkpoint's step, 0 for none), why it is deemed gone,
	// and the command that continues it ("" when it has no checkpoint to continue from, or is
	// an evaluation run, which is run again instead).
	LastStep       int    `json:"last_step"`
	LastCheckpoint int    `json:"last_checkpoint"`
	Interrupted    string `json:"interrupted,omitempty"`
	Resume         string `json:"resume,omitempty"`
}

// StatusLine is the run's status as `runs` and the view show it: "interrupted at step N (last
// checkpoint M)" for an interrupted run, else its stored status.
func (r RunSummary) StatusLine() string {
	if r.Status == StatusInterrupted {
		return InterruptedLine(r.LastStep, r.LastCheckpoint)
	}
	return r.Status
}

// Summaries lists every run with its progress, checkpoints and best pass@k per k.
func (s *Store) Summaries() ([]RunSummary, error) {
	runs, err := s.Runs()
	if err != nil {
		return nil, err
	}
	out := make([]RunSummary, 0, len(runs))
	for _, r := range runs {
		sum, err := s.Summary(r)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

// Summary is one run's row of Summaries.
func (s *Store) Summary(r Run) (RunSummary, error) {
	sum := RunSummary{Run: r, BestPassAtK: map[int]float64{}, Checkpoints: []int{}}
	m, err := s.Metrics(r.ID)
	if err != nil {
		return sum, err
	}
	sum.Steps = len(m)
	for step := range m {
		sum.LastStep = max(sum.LastStep, step)
	}
	if _, ok := m[0]; ok && r.Kind == KindSFT { // the loss before the first step
		sum.Steps--
	}
	cps, err := s.Checkpoints(r.ID)
	if err != nil {
		return sum, err
	}
	for _, c := range cps {
		sum.Checkpoints = append(sum.Checkpoints, c.Step)
		sum.LastCheckpoint = max(sum.LastCheckpoint, c.Step)
	}
	if gone, why := s.Interrupted(r); gone {
		sum.Status, sum.Interrupted = StatusInterrupted, why
		if sum.LastCheckpoint > 0 && r.Kind != KindEval {
			sum.Resume = ResumeLine(s.path, r.ID)
		}
	}
	evals, err := s.Evals(r.ID)
	if err != nil {
		return sum, err
	}
	for _, e := range evals {
		for k, v := range e.PassAtK {
			if v > sum.BestPassAtK[k] {
				sum.BestPassAtK[k] = v
			}
		}
	}
	return sum, nil
}

// WriteTable prints summaries for people, one line per run: CHECKPOINT STEPS lists the steps
// that have a checkpoint, and STATUS carries the first line of a stop reason only (the JSON
// listing keeps all of it).
func WriteTable(w io.Writer, runs []RunSummary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tNAME\tRECIPE\tSTATUS\tSTEPS\tCHECKPOINT STEPS\tBEST PASS@K")
	for _, r := range runs {
		ks := make([]int, 0, len(r.BestPassAtK))
		for k := range r.BestPassAtK {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		var best []string
		for _, k := range ks {
			best = append(best, fmt.Sprintf("@%d=%.3f", k, r.BestPassAtK[k]))
		}
		cps := make([]string, len(r.Checkpoints))
		for i, c := range r.Checkpoints {
			cps[i] = fmt.Sprint(c)
		}
		status := r.StatusLine()
		if r.StopReason != "" && r.Status != StatusInterrupted {
			status += " (" + firstLine(r.StopReason) + ")"
		}
		steps := fmt.Sprintf("%d/%d", r.Steps, r.TotalSteps)
		if r.Kind == KindSFT {
			status = "sft " + status
		}
		if r.Kind == KindEval { // one evaluation, at the evaluated checkpoint's step
			status = "evaluation " + r.Status + ": " + r.Evaluated + ", " + orDash(r.EvalSet)
			if r.Status != "finished" && r.StopReason != "" {
				status += " (" + firstLine(r.StopReason) + ")"
			}
			steps = fmt.Sprintf("eval@%d", r.EvalStep)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, r.Recipe, status, steps,
			orDash(strings.Join(cps, ",")), orDash(strings.Join(best, " ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// An interrupted run's process is gone: say so, and what continues it.
	for _, r := range runs {
		if r.Status != StatusInterrupted {
			continue
		}
		what, next := InterruptedLine(r.LastStep, r.LastCheckpoint), "it has no checkpoint to continue from: start it again"
		switch {
		case r.Kind == KindEval:
			what, next = "evaluation interrupted", "run the evaluation again"
		case r.Resume != "":
			next = "continue it with: " + r.Resume
		}
		if _, err := fmt.Fprintf(w, "\n%s: %s: %s; %s\n", r.ID, what, r.Interrupted, next); err != nil {
			return err
		}
	}
	return nil
}

// firstLine is s's first non-blank line, with " …" when more lines follow, so that a
// multi-line stop reason keeps the table at one line per run.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	line, rest, more := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if more && strings.TrimSpace(rest) != "" {
		line += " …"
	}
	return line
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
