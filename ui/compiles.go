package ui

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"agentrl/engine/event"
)

// compiledText is the run's compile budget for the Status pane: "14 programs (decode 2,
// prefill 4, …), 3.2 s" (with "; cache: 12 loaded, 2 compiled" when the XLA backend's compilation
// cache served any) from the latest step's totals by kind (before the first step, the run
// start's: the generator's programs), or from the bare totals of a stored run's metrics. late
// is what the latest step compiled when it is past step 1 and compiled anything, which a run
// that buckets its shapes never does ("" otherwise). ok is false when nothing is known yet.
func compiledText(d *runData) (text, late string, ok bool) {
	kinds := d.start.Compiles
	var last *event.StepMetrics
	if n := len(d.metrics); n > 0 {
		last = &d.metrics[n-1]
		if last.Compiles != nil {
			kinds = last.Compiles
		}
	}
	parts := make([]string, 0, len(kinds))
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k].Programs))
	}
	switch t := event.CompiledTotal(kinds); {
	case len(kinds) > 0:
		text = fmt.Sprintf("%d %s (%s), %s", t.Programs, plural(t.Programs, "program"), strings.Join(parts, ", "), fmtSecs(t.Seconds))
		if t.CacheHits+t.CacheMisses > 0 { // the XLA backend's compilation cache: loaded, or compiled and stored
			text += fmt.Sprintf("; cache: %d loaded, %d compiled", t.CacheHits, t.CacheMisses)
		}
	case last != nil && last.Metrics[event.MetricCompiles] > 0:
		n := int(last.Metrics[event.MetricCompiles])
		text = fmt.Sprintf("%d %s, %s", n, plural(n, "program"), fmtSecs(last.Metrics[event.MetricCompileTotalSeconds]))
	default:
		return "", "", false
	}
	if last != nil && last.Step > 1 && last.Metrics[event.MetricCompilesNew] > 0 {
		n := int(last.Metrics[event.MetricCompilesNew])
		late = fmt.Sprintf("step %d compiled %d new %s (%s)", last.Step, n, plural(n, "program"), fmtSecs(last.Metrics[event.MetricCompileSeconds]))
	}
	return text, late, true
}

// plural is word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
