package cli

import (
	"fmt"
	"io"
	"math"
	"strings"

	"agentrl/engine/compare"
)

// splitRuns reads a comma-separated list of run ids (one id is a list of one).
func splitRuns(arg string) []string {
	var ids []string
	for _, id := range strings.Split(arg, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// pm formats x ± se with signs, "–" for an undefined value.
func pm(x, se float64, signed bool) string {
	if math.IsNaN(x) {
		return "–"
	}
	f := "%.3f"
	if signed {
		f = "%+.3f"
	}
	s := fmt.Sprintf(f, x)
	if !math.IsNaN(se) {
		s += fmt.Sprintf(" ± %.3f", se)
	}
	return s
}

// printSeedComparison writes each pair and the n-seed summary as plain tables.
func printSeedComparison(w io.Writer, sc *compare.SeedComparison) {
	for i, c := range sc.Pairs {
		fmt.Fprintf(w, "seed pair %d: A %s, B %s, step %d, %d held-out tasks\n", i+1, c.A, c.B, c.Step, c.Tasks)
		fmt.Fprintf(w, "  %-8s %7s %7s  %-16s %-16s %s\n", "", "A", "B", "A − B", "A since step 0", "B since step 0")
		for _, r := range c.Rows {
			ca, cb := sc.Changes[i].A[r.K], sc.Changes[i].B[r.K]
			since := func(m map[int]compare.Change, ch compare.Change) string {
				if m == nil {
					return "–"
				}
				return pm(ch.Delta, ch.SE, true)
			}
			fmt.Fprintf(w, "  %-8s %7.3f %7.3f  %-16s %-16s %s\n", fmt.Sprintf("pass@%d", r.K), r.A, r.B,
				pm(r.Diff, r.SE, true), since(sc.Changes[i].A, ca), since(sc.Changes[i].B, cb))
		}
	}
	n := 0
	if len(sc.Summary) > 0 {
		n = sc.Summary[0].Seeds
	}
	fmt.Fprintf(w, "\nmean of %d seeds ± spread / √%d\n", n, n)
	fmt.Fprintf(w, "  %-8s %-16s %-16s %-16s %-16s %s\n", "", "A", "B", "A − B", "A since step 0", "B since step 0")
	for _, r := range sc.Summary {
		fmt.Fprintf(w, "  %-8s %-16s %-16s %-16s %-16s %s\n", fmt.Sprintf("pass@%d", r.K), pm(r.A.Mean, r.A.SE, false),
			pm(r.B.Mean, r.B.SE, false), pm(r.Diff.Mean, r.Diff.SE, true), pm(r.Change[0].Mean, r.Change[0].SE, true),
			pm(r.Change[1].Mean, r.Change[1].SE, true))
	}
}
