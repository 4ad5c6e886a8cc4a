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
// "params", "moments_on_host", "host_bytes", "reason" and "shape".
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
		MomentsOnHost bool             `json:"moments_on_host"`
		HostBytes     int64            `json:"host_bytes"`
		Reason        string           `json:"reason,omitempty"`
		Shape         string           `json:"shape"`
	}{
		p.Fits, p.KVSlots, p.MicroBatch, p.Components, p.Total, p.Budget,
		map[string]int64{"rollout": p.Rollout.Bytes, "train": p.Train.Bytes},
		p.Params, p.MomentsOnHost, p.HostBytes, p.Reason, p.Shape.Name,
	})
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

// Table renders the plan for people: each component in GiB (two decimals) per phase, the phase
// totals, then the verdict.
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
	fmt.Fprintf(&b, "memory plan: %s (%s parameters, %s compute), sequences of %d tokens, budget %s\n",
		p.Shape.Name, humanCount(p.Params), dtype, st.SeqLen, budget)
	row := func(name, a, c, note string) {
		fmt.Fprintf(&b, "  %-19s %12s %12s  %s\n", name, a, c, note)
	}
	cell := func(ph Phase, n string) string {
		if v, ok := ph.Holds[n]; ok {
			return gib(v)
		}
		return "-"
	}
	row("", "rollout", "train", "")
	for _, n := range componentOrder() {
		note := ""
		switch {
		case n == OptimizerMoments && p.MomentsOnHost:
			note = fmt.Sprintf("on the host during rollout (%s of host memory)", gib(p.HostBytes))
		case n == ReferenceWeights && !st.Reference:
			continue
		case n == KVCache:
			note = fmt.Sprintf("%s × %d tokens", plural(p.shownSlots(), "slot"), st.SeqLen)
		case n == Activations:
			note = fmt.Sprintf("micro-batch %d", p.shownMicro())
			if st.GradientCheckpointing {
				note += ", gradient checkpointing"
			}
		}
		row(n, cell(p.Rollout, n), cell(p.Train, n), note)
	}
	row("total", gib(p.Rollout.Bytes), gib(p.Train.Bytes), "")
	peak := "rollout"
	if p.Train.Bytes > p.Rollout.Bytes {
		peak = "train"
	}
	if p.Fits {
		fmt.Fprintf(&b, "fits: %d KV slots (%s), micro-batch %d (%s); peak %s in %s\n",
			p.KVSlots, asked(st.KVSlots, st.MaxKVSlots), p.MicroBatch, asked(st.MicroBatch, st.MaxMicroBatch), gib(p.Total), peak)
	} else {
		fmt.Fprintf(&b, "does not fit: %s\n", p.Reason)
	}
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
// the README.
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
			for _, ph := range []Phase{p.Rollout, p.Train} {
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
