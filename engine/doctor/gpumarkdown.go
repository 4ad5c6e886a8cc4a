package doctor

import (
	"cmp"
	"fmt"
	"strings"
)

// Markdown renders the report as one table: a row per figure docs/ states about the GPU,
// then the steps with their exit codes and times.
func (r *GPUReport) Markdown() string {
	var b strings.Builder
	verdict := "every step ran and every parity row holds"
	if !r.OK {
		verdict = "NOT ALL GOOD: see the rows marked ✗ and the steps below"
	}
	fmt.Fprintf(&b, "# GPU self-check, %s\n\nDevice: %s. Backend: %s. %s.\n\n", r.Created, orDash(r.Device), orDash(r.Backend), verdict)
	b.WriteString("| check | | result |\n| --- | --- | --- |\n")
	row := func(ok bool, name, format string, a ...any) {
		mark := "✓"
		if !ok {
			mark = "✗"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, mark, strings.ReplaceAll(fmt.Sprintf(format, a...), "|", "/"))
	}
	for _, p := range r.Parity {
		if p.Error != "" {
			row(false, fmt.Sprintf("HF parity %s %s", p.Fixture, p.DType), "error: %s", firstLine(p.Error))
			continue
		}
		row(p.OK, fmt.Sprintf("HF parity %s %s", p.Fixture, p.DType),
			"log-prob error %.2g (tolerance %.0e), argmax %.0f%%, greedy = HF: score %d/%d, generate %d/%d",
			p.MaxLogProbErr, p.Tolerance, 100*p.ArgmaxAgree, p.ScoreGreedy, p.Cases, p.Generate, p.Cases)
	}
	for _, v := range r.ParityVariants {
		for _, p := range v.Rows {
			name := fmt.Sprintf("HF parity %s %s, %s (diagnostic)", p.Fixture, p.DType, v.Name)
			if p.Error != "" {
				row(false, name, "error: %s", firstLine(p.Error))
				continue
			}
			row(p.OK, name, "log-prob error %.2g (tolerance %.0e), argmax %.0f%%; the step took %.0f s", p.MaxLogProbErr, p.Tolerance, 100*p.ArgmaxAgree, v.Seconds)
		}
	}
	for _, op := range r.OpParity {
		for _, o := range op.Rows {
			name := fmt.Sprintf("float32 %s on %s against float64 (diagnostic)", o.Op, op.Backend)
			if o.Error != "" {
				row(false, name, "error: %s", firstLine(o.Error))
				continue
			}
			row(true, name, "%.2g relative, %.1f ulps (%s)", o.MaxRel, o.Ulps, o.Worst)
		}
	}
	for _, h := range r.HFLoad {
		name := fmt.Sprintf("export loads in HF transformers, %s", h.Name)
		if h.Error != "" {
			row(false, name, "%d shards: %s", h.Shards, firstLine(h.Error))
			continue
		}
		row(h.OK, name, "%d bf16 shards as %s (transformers %s, torch %s, %s %s): log-prob error %.2g against score's (tolerance %.0e) over %d tokens; loaded in %.1f s",
			h.Shards, h.Class, h.Transformers, h.Torch, h.Device, h.DType, h.MaxErr, h.Tol, h.N, h.LoadSeconds)
	}
	for _, x := range r.Rollout {
		ref := x.Reference
		if x.RefTokensPerS > 0 {
			ref = fmt.Sprintf("%s: %.0f tokens/s, engine ÷ reference %.2f", x.Reference, x.RefTokensPerS, x.Ratio)
		}
		failures := ""
		if x.CacheFailures > 0 {
			failures = fmt.Sprintf("; %d compilation cache failures, the last: %s", x.CacheFailures, firstLine(x.CacheFailure))
		}
		row(x.CacheFailures == 0, "bench rollout, "+rolloutName(x), "%.0f tokens/s, %.2f ms/step, %.0f%% of the %.0f GB/s roofline; %s; %s%s",
			x.TokensPerSec, x.StepMs, 100*x.RooflineShare, x.Bandwidth/1e9, ref, compiledText(x.Programs, x.CompileSeconds, x.CacheHits, x.CacheMisses), failures)
	}
	if t := r.Train; t != nil {
		ref := t.Reference
		if t.RefTokensPerS > 0 {
			ref = fmt.Sprintf("%s: %.0f tokens/s, engine ÷ reference %.2f", t.Reference, t.RefTokensPerS, t.Ratio)
		}
		name := fmt.Sprintf("bench train, %d × %d", t.Sequences, t.Length)
		if t.Model != "" {
			name = fmt.Sprintf("bench train, %s, %d × %d", t.Model, t.Sequences, t.Length)
		}
		row(true, name, "%.0f tokens/s, %.0f ms/micro-step, %.0f%% of the measured matmul peak; %s",
			t.TokensPerSec, t.MicroStepMs, 100*t.PeakShare, ref)
	}
	if u := r.Run; u != nil {
		peak := "NVML: no reading"
		if u.NVMLAvailable {
			peak = fmt.Sprintf("NVML peak %s (%s over the %s before the run)", gib(int64(u.NVMLPeak)), gib(int64(u.NVMLPeak)-int64(u.NVMLBaseline)), gib(int64(u.NVMLBaseline)))
		}
		pred := "no prediction"
		if u.Predicted > 0 {
			pred = fmt.Sprintf("ledger predicts %s (%s)", gib(u.Predicted), u.PredictedPhases)
		}
		phases := make([]string, len(u.Phases))
		for i, p := range u.Phases {
			phases[i] = fmt.Sprintf("%s %.1f s", p.Phase, p.Seconds)
		}
		row(u.Status == "finished", fmt.Sprintf("recipe run, %d steps", u.Steps), "%s on %s%s; switch to train %s s, to rollout %s s, sync %s s, step %s s (%s); %s; %s; %s; engine ledger %s",
			orDash(u.Status), orDash(u.Backend), modelText(u.Model), secs(u.SwitchToTrain), secs(u.SwitchToRollout), secs(u.Sync), secs(u.StepSeconds), orDash(strings.Join(phases, ", ")),
			compiledText(u.Compiled.Programs, u.Compiled.Seconds, u.Compiled.CacheHits, u.Compiled.CacheMisses), peak, pred, gib(u.EngineLedger))
	}
	if p := r.Plan; p != nil {
		if p.Fits {
			row(true, fmt.Sprintf("plan %s at %s", p.Shape, gib(p.Budget)), "fits: %d KV slots, micro-batch %d, peak %s", p.KVSlots, p.MicroBatch, gib(p.Total))
		} else {
			row(true, fmt.Sprintf("plan %s at %s", p.Shape, gib(p.Budget)), "does not fit: %s", p.Reason)
		}
	}
	if p := r.Partial; p != nil {
		row(p.Ratio >= PartialGoal, "partial rollouts, long-tail workload", "%.2f× trained tokens/s (goal %.1f×; no rollout schedule can pass %.2f× here): synchronous %.1f tokens/s, occupancy %.2f, tail %.2f s, rollout %.0f of %.0f s; partial %.1f tokens/s, occupancy %.2f, tail %.2f s",
			p.Ratio, PartialGoal, p.Bound, p.Sync.TokensPerS, p.Sync.Occupancy, p.Sync.TailS, p.Sync.RolloutS, p.Sync.Seconds, p.Partial.TokensPerS, p.Partial.Occupancy, p.Partial.TailS)
	}
	r.goals(row)
	b.WriteString("\n| step | exit | seconds |\n| --- | --- | --- |\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "| %s | %d | %.1f |\n", s.Name, s.ExitCode, s.Seconds)
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(&b, "\nMissing outputs: %s.\n", strings.Join(r.Missing, ", "))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// secs lists per-step seconds: "1.20, 0.80, 0.79".
func secs(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// Goals of issue #49 for a GPU: decode at batch 64 at least DecodeGoal × transformers' generate,
// an update at least TrainGoal × PyTorch eager, and a second start (the same command again, its
// programs from the compilation cache) compiling in under SecondStartGoal seconds.
const (
	DecodeGoal      = 3.0
	TrainGoal       = 1.0
	SecondStartGoal = 10.0
)

// againTag ends the tag of a rollout step that repeats another's command (a second start).
const againTag = "-again"

// goals adds a row per goal the report has the figures for.
func (r *GPUReport) goals(row func(ok bool, name, format string, a ...any)) {
	for _, x := range r.Rollout {
		if x.Batch == 64 && x.Ratio > 0 && !strings.HasSuffix(x.Tag, againTag) {
			row(x.Ratio >= DecodeGoal, "goal: decode at batch 64 ≥ 3× HF generate, "+cmp.Or(x.Model, x.Tag, "the check's shape"), "%.2f×", x.Ratio)
		}
		if strings.HasSuffix(x.Tag, againTag) {
			row(x.CompileSeconds < SecondStartGoal, "goal: a second start compiles in < 10 s, "+cmp.Or(x.Model, x.Tag), "%s, batch %d", compiledText(x.Programs, x.CompileSeconds, x.CacheHits, x.CacheMisses), x.Batch)
		}
	}
	if t := r.Train; t != nil && t.Ratio > 0 {
		row(t.Ratio >= TrainGoal, "goal: an update ≥ 1.0× PyTorch eager, "+cmp.Or(t.Model, "the check's shape"), "%.2f×", t.Ratio)
	}
}

// rolloutName names a rollout row: its model and batch, and a second start as such.
func rolloutName(x RolloutRow) string {
	name := fmt.Sprintf("batch %d", x.Batch)
	if x.Model != "" {
		name = x.Model + ", " + name
	}
	if strings.HasSuffix(x.Tag, againTag) {
		name += ", second start"
	}
	return name
}

// compiledText is "compiled 12 programs in 3.4 s (cache: 10 loaded, 2 compiled)".
func compiledText(programs int, seconds float64, hits, misses int) string {
	if programs == 0 && seconds == 0 {
		return "compiled nothing counted"
	}
	t := fmt.Sprintf("compiled %d programs in %.1f s", programs, seconds)
	if hits+misses > 0 {
		t += fmt.Sprintf(" (cache: %d loaded, %d compiled)", hits, misses)
	}
	return t
}

func modelText(m string) string {
	if m == "" {
		return ""
	}
	return ", model " + m
}
