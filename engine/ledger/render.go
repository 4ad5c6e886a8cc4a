package ledger

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"agentrl/recipes"
)

func gib(b int64) string { return recipes.FormatGiB(b) }

// MarshalJSON writes {"fits", "kv_slots", "micro_batch", "components", "total"} first, in that
// order, then extra keys: "budget" (0 = unlimited), "phases" {"rollout", "train"} in bytes,
// "params", "trainable", "moments_on_host", "master_on_host", "host_bytes", "reason", "shape" and
// "host" (host memory and disk: "ram", "step", "load", "components", "checkpoint_bytes",
// "checkpoints", "disk").
// "phases" has "reference" only when the recipe needs a reference model, "eval" only when the
// evaluation's context is longer than rollout's (then "eval_slots" are its KV slots). With
// rollout.engines planned remote, "engines" is their number and "remote_rollout" whether the
// device holds no rollout engine (kv_slots 0), "local_engine" why it still does.
func (p *Plan) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Fits          bool             `json:"fits"`
		KVSlots       int              `json:"kv_slots"`
		MicroBatch    int              `json:"micro_batch"`
		Components    map[string]int64 `json:"components"`
		Total         int64            `json:"total"`
		Budget        int64            `json:"budget"`
		Phases        map[string]int64 `json:"phases"`
		Params        int64            `json:"params"`
		Trainable     int64            `json:"trainable"`
		MomentsOnHost bool             `json:"moments_on_host"`
		MasterOnHost  bool             `json:"master_on_host"`
		HostBytes     int64            `json:"host_bytes"`
		Reason        string           `json:"reason,omitempty"`
		Shape         string           `json:"shape"`
		Host          hostJSON         `json:"host"`
		PRMSlots      int              `json:"prm_slots,omitempty"`
		EvalSlots     int              `json:"eval_slots,omitempty"`
		Engines       int              `json:"engines,omitempty"`
		RemoteRollout bool             `json:"remote_rollout,omitempty"`
		LocalEngine   string           `json:"local_engine,omitempty"`
	}{
		p.Fits, p.KVSlots, p.MicroBatch, p.Components, p.Total, p.Budget,
		p.phaseBytes(), p.Params, p.Trainable, p.MomentsOnHost, p.MasterOnHost, p.HostBytes, p.Reason, p.Shape.Name,
		hostJSON{p.Host.RAM, p.Host.Step, p.Host.Load, p.Host.Components, p.Host.CheckpointBytes, p.Host.Checkpoints, p.Host.Disk},
		p.PRMSlots, p.EvalSlots, p.Settings.Engines, p.Settings.RemoteRollout, p.Settings.LocalEngine,
	})
}

// hostJSON is HostPlan's JSON form.
type hostJSON struct {
	RAM             int64            `json:"ram"`
	Step            int64            `json:"step"`
	Load            int64            `json:"load"`
	Components      map[string]int64 `json:"components"`
	CheckpointBytes int64            `json:"checkpoint_bytes"`
	Checkpoints     int              `json:"checkpoints"`
	Disk            int64            `json:"disk"`
}

// phases are the phases the plan has: rollout, the evaluation when it has slots of its own, the
// PRM and the reference forward when there are, train.
func (p *Plan) phases() []Phase {
	out := []Phase{p.Rollout}
	if p.Settings.EvalOnly { // generation alone
		return out
	}
	if p.Eval.Bytes > 0 {
		out = append(out, p.Eval)
	}
	if p.PRM.Bytes > 0 {
		out = append(out, p.PRM)
	}
	if p.Reference.Bytes > 0 {
		out = append(out, p.Reference)
	}
	return append(out, p.Train)
}

func (p *Plan) phaseBytes() map[string]int64 {
	out := map[string]int64{}
	for _, ph := range p.phases() {
		out[ph.Name] = ph.Bytes
	}
	return out
}

// WriteJSON writes the plan as one JSON object and a newline.
func (p *Plan) WriteJSON(w io.Writer) error {
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding plan: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// Table renders the plan for people: each component in GiB (two decimals) per phase ("host" where
// it waits in host memory, "-" where the phase does not hold it), the phase totals, the options
// that change what the phases hold, then the verdict.
func (p *Plan) Table() string {
	var b strings.Builder
	st := p.Settings
	dtype := "bf16"
	if st.ComputeBytes == 4 {
		dtype = "f32"
	}
	budget := "unlimited"
	if p.Budget > 0 {
		budget = gib(p.Budget)
	}
	evalLen := ""
	if st.Eval != nil {
		evalLen = fmt.Sprintf(" (evaluation: %d)", st.Eval.SeqLen)
	}
	fmt.Fprintf(&b, "memory plan: %s (%s parameters, %s compute), sequences of %d tokens%s, budget %s\n",
		p.Shape.Name, humanCount(p.Params), dtype, st.SeqLen, evalLen, budget)
	phases := p.phases()
	row := func(name string, cells []string, note string) {
		fmt.Fprintf(&b, "  %-19s", name)
		for _, c := range cells {
			fmt.Fprintf(&b, " %12s", c)
		}
		fmt.Fprintf(&b, "  %s\n", strings.TrimRight(note, " "))
	}
	cells := func(f func(Phase) string) []string {
		out := make([]string, len(phases))
		for i, ph := range phases {
			out[i] = f(ph)
		}
		return out
	}
	row("", cells(func(ph Phase) string { return ph.Name }), "")
	for _, n := range componentOrder() {
		held := false
		for _, ph := range phases {
			_, d := ph.Holds[n]
			_, h := ph.Host[n]
			held = held || d || h
		}
		if !held && (n != KVCache || st.RemoteRollout) && (n != Activations || st.EvalOnly) {
			continue
		}
		note := ""
		switch {
		case n == OptimizerMoments && p.MomentsOnHost || n == MasterWeights && p.MasterOnHost:
			note = "on the host during rollout and the reference forward"
		case n == ReferenceWeights && p.PRM.Holds[n] > 0:
			note = "on the device for the PRM and the reference forward"
		case n == ReferenceWeights && p.Reference.Holds[n] > 0:
			note = "on the device only for the reference forward"
		case n == PRMWeights:
			note = "the PRM's own weights, on the device only for its phase"
			if st.PRM.Note != "" {
				note += " (" + st.PRM.Note + ")"
			}
		case n == PRMKVCache:
			note = fmt.Sprintf("%s × %d tokens (prompt + reply)", plural(max(p.PRMSlots, 1), "slot"), st.PRM.SeqLen)
		case n == BaseWeights:
			note = "LoRA's frozen base, shared by every phase"
		case n == GradientWorkspace:
			note = "the go backend assembling the vocabulary projection's gradient"
		case n == KVCache:
			note = fmt.Sprintf("%s × %d tokens", plural(p.shownSlots(), "slot"), st.SeqLen)
			if st.EvalOnly {
				note += " (the evaluation's context)"
			}
		case n == EvalKVCache:
			note = fmt.Sprintf("%s × %d tokens: the evaluation's context (eval.max_total_tokens), rollout's KV cache freed", plural(max(p.EvalSlots, 1), "slot"), st.Eval.SeqLen)
		case n == Activations:
			note = fmt.Sprintf("micro-batch %d", p.shownMicro())
			if st.GradientCheckpointing {
				note += ", gradient checkpointing"
			}
			if p.Reference.Bytes > 0 {
				note += "; reference: 1 sequence, no gradients"
			}
		}
		row(n, cells(func(ph Phase) string {
			if v, ok := ph.Holds[n]; ok {
				return gib(v)
			}
			if _, ok := ph.Host[n]; ok {
				return "host"
			}
			return "-"
		}), note)
	}
	row("total", cells(func(ph Phase) string { return gib(ph.Bytes) }), "")
	switch {
	case st.RemoteRollout:
		fmt.Fprintf(&b, "rollout: remote: the %s of rollout.engines generate the rollouts and evaluations; this device holds no KV cache, inference copy or sampler for them, its rollout column is what waits for the update\n",
			plural(st.Engines, "engine"))
	case st.Engines > 0:
		fmt.Fprintf(&b, "rollout: the %s of rollout.engines generate, but the local engine stays for %s: its inference copy and KV cache are counted\n",
			plural(st.Engines, "engine"), st.LocalEngine)
	}
	if p.HostBytes > 0 {
		fmt.Fprintf(&b, "host memory during rollout: %s\n", gib(p.HostBytes))
	}
	fmt.Fprintf(&b, "options: %s\n", p.options())
	if p.HostBeside > 0 {
		fmt.Fprintf(&b, "one RAM (the go backend): the phases are sized to %s, the budget less the %s host memory holds beside them (reference or PRM copies off the device, a checkpoint's tensor, store chunks, the process)\n",
			gib(max(p.Budget-p.HostBeside, 0)), gib(p.HostBeside))
	}
	peak := p.Rollout
	for _, ph := range phases {
		if ph.Bytes > peak.Bytes {
			peak = ph
		}
	}
	if p.Fits && st.EvalOnly {
		fmt.Fprintf(&b, "fits: %d KV slots (%s); peak %s in rollout; evaluation only: no trainer, reference or PRM\n",
			p.KVSlots, asked(st.KVSlots, st.MaxKVSlots), gib(p.Total))
	} else if p.Fits {
		prm := ""
		if st.Eval != nil {
			prm = fmt.Sprintf(", %d evaluation slots of %d tokens (%s)", p.EvalSlots, st.Eval.SeqLen, asked(0, st.Eval.MaxKVSlots))
		}
		if st.PRM != nil {
			prm += fmt.Sprintf(", %d PRM slots (%s)", p.PRMSlots, asked(st.PRM.KVSlots, st.PRM.MaxKVSlots))
		}
		slots := fmt.Sprintf("%d KV slots (%s)", p.KVSlots, asked(st.KVSlots, st.MaxKVSlots))
		if st.RemoteRollout {
			slots = "no KV slots (rollout on the engines)"
		}
		fmt.Fprintf(&b, "fits: %s%s, micro-batch %d (%s); peak %s in %s\n",
			slots, prm, p.MicroBatch, asked(st.MicroBatch, st.MaxMicroBatch), gib(p.Total), peak.Name)
	} else {
		fmt.Fprintf(&b, "does not fit: %s\n", p.Reason)
	}
	b.WriteString(p.HostTable())
	return b.String()
}

// WriteTable writes Table to w.
func (p *Plan) WriteTable(w io.Writer) error {
	_, err := io.WriteString(w, p.Table())
	return err
}

// shownSlots is the slot count the components were sized at.
func (p *Plan) shownSlots() int {
	if p.KVSlots > 0 {
		return p.KVSlots
	}
	return max(p.Settings.KVSlots, 1)
}

// shownMicro is the micro-batch the components were sized at.
func (p *Plan) shownMicro() int {
	if p.MicroBatch > 0 {
		return p.MicroBatch
	}
	return max(p.Settings.MicroBatch, 1)
}

func asked(fixed, most int) string {
	if fixed > 0 {
		return "fixed"
	}
	return fmt.Sprintf("auto, at most %d", most)
}

// humanCount writes 4022468096 as "4.02B" and 596049920 as "596.0M".
func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// Matrix renders a Markdown table of plans: one row per shape, one column per budget, each cell
// the verdict ("42 slots, micro-batch 3, peak 23.92 GiB" or "no: train 77.90 GiB") — the table of
// docs/memory.md.
func Matrix(shapes []Shape, budgets []int64, st Settings) (string, error) {
	var b strings.Builder
	b.WriteString("| model | parameters |")
	for _, bg := range budgets {
		fmt.Fprintf(&b, " %s |", strings.TrimSuffix(gib(bg), ".00 GiB")+" GiB")
	}
	b.WriteString("\n| --- | ---: |" + strings.Repeat(" --- |", len(budgets)) + "\n")
	for _, sh := range shapes {
		fmt.Fprintf(&b, "| %s | %s |", sh.Name, humanCount(sh.Params()))
		for _, bg := range budgets {
			p, err := Compute(sh, st, bg)
			if err != nil {
				return "", err
			}
			if p.Fits {
				fmt.Fprintf(&b, " %s, micro-batch %d, peak %s |", plural(p.KVSlots, "slot"), p.MicroBatch, gib(p.Total))
				continue
			}
			var over []string
			for _, ph := range p.phases() {
				if ph.Bytes > bg {
					over = append(over, fmt.Sprintf("%s %s", ph.Name, gib(ph.Bytes)))
				}
			}
			fmt.Fprintf(&b, " does not fit: %s |", strings.Join(over, ", "))
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

// options lists, for the table, the settings that change what the phases hold.
func (p *Plan) options() string {
	st := p.Settings
	var on []string
	if st.LoRARank > 0 {
		targets, _ := loraTargets(st.LoRATargets)
		on = append(on, fmt.Sprintf("LoRA rank %d on %s (%s trained parameters; base shared by every phase)",
			st.LoRARank, strings.Join(targets, ","), humanCount(p.Trainable)))
	}
	if st.OptimizerBits == 8 {
		on = append(on, fmt.Sprintf("8-bit AdamW moments (blocks of %d)", MomentBlock))
	}
	for _, o := range []struct {
		what, mode string
		onHost     bool
	}{{"master weights", st.MasterOffload, p.MasterOnHost}, {"moments", st.Offload, p.MomentsOnHost}} {
		if o.onHost {
			on = append(on, fmt.Sprintf("%s on the host during rollout (%s)", o.what, o.mode))
		}
	}
	switch {
	case p.PRM.Holds[ReferenceWeights] > 0:
		on = append(on, "reference weights on the device only for the PRM phase (the PRM is the reference) and the reference forward")
	case p.Reference.Holds[ReferenceWeights] > 0:
		on = append(on, "reference weights on the device only for the reference forward")
	}
	if p.PRM.Holds[PRMWeights] > 0 {
		on = append(on, "the PRM's own weights on the device only for its phase")
	}
	if st.GradientCheckpointing {
		on = append(on, "gradient checkpointing")
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, "; ")
}
