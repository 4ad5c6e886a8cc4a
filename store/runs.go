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
}

// Summaries lists every run with its progress, checkpoints and best pass@k per k.
func (s *Store) Summaries() ([]RunSummary, error) {
	runs, err := s.Runs()
	if err != nil {
		return nil, err
	}
	out := make([]RunSummary, 0, len(runs))
	for _, r := range runs {
		sum := RunSummary{Run: r, BestPassAtK: map[int]float64{}, Checkpoints: []int{}}
		m, err := s.Metrics(r.ID)
		if err != nil {
			return nil, err
		}
		sum.Steps = len(m)
		if _, ok := m[0]; ok && r.Kind == KindSFT { // the loss before the first step
			sum.Steps--
		}
		cps, err := s.Checkpoints(r.ID)
		if err != nil {
			return nil, err
		}
		for _, c := range cps {
			sum.Checkpoints = append(sum.Checkpoints, c.Step)
		}
		evals, err := s.Evals(r.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range evals {
			for k, v := range e.PassAtK {
				if v > sum.BestPassAtK[k] {
					sum.BestPassAtK[k] = v
				}
			}
		}
		out = append(out, sum)
	}
	return out, nil
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
		status := r.Status
		if r.StopReason != "" {
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
	return tw.Flush()
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
