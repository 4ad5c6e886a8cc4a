package ui

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"agentrl/engine/event"
)

// Modes of --ui.
const (
	ModeAuto  = "auto"
	ModeTUI   = "tui"
	ModePlain = "plain"
	ModeJSON  = "json"
)

// Choose resolves auto: the TUI only when both stdin and stdout are terminals.
func Choose(mode string, stdinTTY, stdoutTTY bool) (string, error) {
	switch mode {
	case ModeAuto, "":
		if stdinTTY && stdoutTTY {
			return ModeTUI, nil
		}
		return ModePlain, nil
	case ModeTUI, ModePlain, ModeJSON:
		return mode, nil
	}
	return "", fmt.Errorf("--ui %q is not one of auto, tui, plain, json", mode)
}

// JSONLines writes one JSON object per event until the channel closes.
func JSONLines(w io.Writer, events <-chan event.Event) error {
	for e := range events {
		line, err := event.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// Plain writes one line per event for people reading a log; rollout progress is shown every
// quarter of the batch, an evaluation's every tenth (with pass@k so far), both with the ETA.
func Plain(w io.Writer, events <-chan event.Event) error {
	for e := range events {
		line := PlainLine(e)
		if line == "" {
			continue
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// PlainLine formats one event ("" for events not worth a line; an eval with levels adds a line per level).
func PlainLine(e event.Event) string {
	switch v := e.(type) {
	case event.RunStart:
		line := fmt.Sprintf("run %s (%s): recipe %s, %d steps, backend %s", v.RunID, v.Name, v.Recipe, v.TotalSteps, v.Backend)
		if v.Evaluates != "" {
			line = fmt.Sprintf("evaluation run %s (%s): %s, recipe %s, backend %s", v.RunID, v.Name, v.Evaluates, v.Recipe, v.Backend)
		}
		if v.Kernels != "" {
			line += "; " + v.Kernels
		}
		if v.Attention != "" {
			line += "; attention " + v.Attention
		}
		if strings.HasPrefix(v.Sandbox, "NONE") {
			line += "; SANDBOX ISOLATION NONE: model-written code can read your files and reach the network"
		}
		return line
	case event.Phase:
		return fmt.Sprintf("step %d  %-9s %6.2fs", v.Step, v.Phase, v.Seconds)
	case event.Progress:
		every := max(1, v.Total/4)
		if v.Phase == event.PhaseEval {
			every = max(1, v.Total/10)
		}
		if v.Done%every != 0 && v.Done != v.Total {
			return ""
		}
		line := fmt.Sprintf("step %d  %s %d/%d", v.Step, v.Phase, v.Done, v.Total)
		if s := evalSoFar(&v); s != "" {
			line += "  " + s
		}
		if v.ETA > 0 {
			line += "  ETA " + v.Phase + " " + fmtSecs(v.ETA)
		}
		if v.RunETA > 0 {
			at := ""
			if v.RunETAAtLeast {
				at = "≥ "
			}
			line += ", run " + at + fmtSecs(v.RunETA)
		}
		return line
	case event.Stopping:
		return v.Reason + ": " + v.Message
	case event.Trajectory:
		if !v.IsDropped() {
			return ""
		}
		// An external agent's trajectory that gives nothing to train on: say why, with the last
		// line of its stderr unless the reason quotes its stderr already.
		set := ""
		if v.Eval {
			set = "eval "
		}
		line := fmt.Sprintf("step %d  %sdropped %s #%d: %s", v.Step, set, v.TaskID, v.Sample, v.Agent.Dropped)
		if tail := strings.TrimSpace(v.Agent.StderrTail); tail != "" && !strings.Contains(v.Agent.Dropped, "stderr ends") && !strings.Contains(v.Agent.Dropped, "stderr says") {
			if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
				tail = tail[i+1:]
			}
			line += fmt.Sprintf(" (stderr ends %q)", tail)
		}
		return line
	case event.StepMetrics:
		keys := make([]event.Metric, 0, len(v.Metrics))
		for k := range v.Metrics {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%.4g", k, v.Metrics[k])
		}
		return fmt.Sprintf("step %d  metrics %s", v.Step, strings.Join(parts, " "))
	case event.Generation:
		return fmt.Sprintf("step %d  %s slots: %s", v.Step, v.Phase, generationText(v))
	case event.Eval:
		var parts []string
		for _, k := range v.Ks() {
			parts = append(parts, fmt.Sprintf("pass@%d=%.3f", k, v.PassAtK[k]))
		}
		best := ""
		if v.Best {
			best = " (best)"
		}
		line := fmt.Sprintf("step %d  eval %s%s", v.Step, strings.Join(parts, " "), best)
		for _, name := range v.Sets() {
			parts = parts[:0]
			for _, k := range v.Ks() {
				parts = append(parts, fmt.Sprintf("pass@%d=%.3f", k, v.BySet[name][k]))
			}
			line += fmt.Sprintf("\nstep %d  eval set %s: %s", v.Step, name, strings.Join(parts, " "))
		}
		for _, l := range v.Levels() {
			parts = parts[:0]
			for _, k := range v.Ks() {
				parts = append(parts, fmt.Sprintf("pass@%d=%.3f", k, v.ByLevel[l][k]))
			}
			line += fmt.Sprintf("\nstep %d  eval level %s: %s", v.Step, l, strings.Join(parts, " "))
		}
		if len(v.Validation) > 0 {
			parts = parts[:0]
			for _, k := range v.Ks() {
				if p, ok := v.Validation[k]; ok {
					parts = append(parts, fmt.Sprintf("pass@%d=%.3f", k, p))
				}
			}
			line += fmt.Sprintf("\nstep %d  eval validation (chooses the best checkpoint and when to stop): %s", v.Step, strings.Join(parts, " "))
		}
		if len(v.Change) > 0 {
			parts = parts[:0]
			for _, k := range v.Ks() {
				if d, ok := v.Change[k]; ok {
					parts = append(parts, fmt.Sprintf("pass@%d %+.3f ± %.3f", k, d.Mean, d.SE))
				}
			}
			line += fmt.Sprintf("\nstep %d  eval change since step %d (± paired standard error): %s", v.Step, v.Since, strings.Join(parts, ", "))
		}
		return line
	case event.Checkpoint:
		if v.WeightBytes > 0 && v.WeightBytes != v.Bytes {
			return fmt.Sprintf("step %d  checkpoint %.1f MB (weights %.1f MB, the rest optimizer state)", v.Step, float64(v.Bytes)/1e6, float64(v.WeightBytes)/1e6)
		}
		return fmt.Sprintf("step %d  checkpoint %.1f MB (weights)", v.Step, float64(v.Bytes)/1e6)
	case event.Alarm:
		return fmt.Sprintf("step %d  ALARM %s: %s (%s)", v.Step, v.Kind, v.Message, v.Compare())
	case event.Ledger:
		names := make([]string, 0, len(v.Components))
		var total int64
		for n, b := range v.Components {
			names = append(names, n)
			total += b
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + " " + fmtBytes(float64(v.Components[n]))
		}
		line := fmt.Sprintf("memory %s held by the engine: %s", fmtBytes(float64(total)), strings.Join(parts, ", "))
		if v.DeviceTotal > 0 {
			line += fmt.Sprintf("; device %s of %s used, %d%% busy", fmtBytes(float64(v.DeviceUsed)), fmtBytes(float64(v.DeviceTotal)), v.UtilPct)
		}
		return line
	case event.Engines:
		if v.Phase != event.EnginesSync { // every few seconds while generating: the TUI's, not a log's
			return ""
		}
		return fmt.Sprintf("step %d  engines after the push: %s", v.Weights, enginesLine(v))
	case event.RunEnd:
		return EndLine(v)
	case event.Error:
		return "error: " + v.Message
	}
	return ""
}

// EndLine is a run's end for people: its status and reason, what a stop dropped, then the best
// step (or why there is none) and the latest checkpoint. E.g. "run stopped: terminated (SIGTERM);
// the evaluation of step 15 was dropped (40 of 128 tasks done); best step 15; last checkpoint:
// step 15".
func EndLine(e event.RunEnd) string {
	s := "run " + e.Status
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Detail != "" {
		s += "; " + e.Detail
	}
	if e.EvalOnly { // an evaluation run has no steps, best step or checkpoints to speak of
		return s
	}
	switch {
	case e.SFT: // no evaluation chooses a best step
		s += fmt.Sprintf("; step %d trained", e.Step)
	case e.Marked:
		s += fmt.Sprintf("; best step %d, marked by hand", e.BestStep)
	case e.BestStep > 0:
		s += fmt.Sprintf("; best step %d", e.BestStep)
	case e.Evaluations == 0:
		s += "; no evaluation ran, so no best step"
	default:
		s += "; no trained step evaluated better than the start"
	}
	switch {
	case e.Checkpoint > 0:
		s += fmt.Sprintf("; last checkpoint: step %d", e.Checkpoint)
	case e.Step == 0:
		s += "; no checkpoint (no step was trained)"
	default:
		s += "; no checkpoint"
	}
	return s
}
