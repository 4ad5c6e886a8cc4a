package ledger

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// SFTRow is the device memory of one supervised step (sft --data): the train phase of the RL
// ledger with nothing else beside it (no rollout, KV cache, reference or value head): the
// trained weights' float32 master copy, their gradients and AdamW moments, LoRA's frozen base in
// the compute dtype, and a micro-batch's activations at SeqLen tokens (the step is forward and
// backward passes only: its ratio's old log-probs are taken in the graph, train.Config.OnPolicy).
type SFTRow struct {
	Mode       string           `json:"mode"` // "full" or "lora r64", and "+ checkpointing"
	Budget     int64            `json:"budget"`
	Fits       bool             `json:"fits"`
	MicroBatch int              `json:"micro_batch"` // the most conversations of SeqLen tokens a pass fits (0: none)
	Bytes      int64            `json:"bytes"`       // at MicroBatch (1 where none fits)
	Holds      map[string]int64 `json:"holds"`
	Trainable  int64            `json:"trainable"`
}

// SFT sizes the supervised step of shape at st's sequence length and compute dtype for each
// budget, with every weight trained and, when loraRank > 0, with rank-loraRank adapters on all
// seven projections; each without and with gradient checkpointing. maxMicro bounds the
// micro-batch searched.
func SFT(shape Shape, st Settings, budgets []int64, loraRank, maxMicro int) ([]SFTRow, error) {
	if err := shape.Validate(); err != nil {
		return nil, err
	}
	st.Reference, st.ValueHead, st.KVSlots, st.MaxKVSlots = false, false, 0, 1
	st.MicroBatch, st.MaxMicroBatch = 0, max(maxMicro, 1)
	if st.Offload == "" {
		st.Offload = OffloadDevice
	}
	ranks := []int{0}
	if loraRank > 0 {
		ranks = append(ranks, loraRank)
	}
	var rows []SFTRow
	for _, rank := range ranks {
		for _, ckpt := range []bool{false, true} {
			s := st
			s.LoRARank, s.LoRATargets, s.GradientCheckpointing = rank, "", ckpt
			if err := s.validate(); err != nil {
				return nil, err
			}
			z := newSizer(shape, s)
			mode := "full"
			if rank > 0 {
				mode = fmt.Sprintf("lora r%d", rank)
			}
			if ckpt {
				mode += " + checkpointing"
			}
			for _, budget := range budgets {
				r := SFTRow{Mode: mode, Budget: budget, Trainable: z.trainable}
				r.MicroBatch = most(s.MaxMicroBatch, budget, func(n int) int64 { return z.train(n).Bytes })
				p := z.train(max(r.MicroBatch, 1))
				r.Fits, r.Bytes, r.Holds = r.MicroBatch > 0, p.Bytes, p.Holds
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// WriteSFTTable prints SFT's rows for people: per mode and budget, whether a conversation of
// seqLen tokens fits a pass, how many do, the peak and its parts.
func WriteSFTTable(w io.Writer, shape Shape, st Settings, rows []SFTRow) error {
	seqLen := st.SeqLen
	dt := "bf16"
	if st.ComputeBytes == 4 {
		dt = "f32"
	}
	moments := "float32"
	if st.OptimizerBits == 8 {
		moments = "8-bit"
	}
	fmt.Fprintf(w, "SFT step of %s (%.2fB parameters) on conversations of %d tokens, %s compute, AdamW %s moments\n",
		shape.Name, float64(shape.Params())/1e9, seqLen, dt, moments)
	fmt.Fprintln(w, "(the step's peak: weights and their AdamW state, one micro-batch's activations)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tBUDGET\tFITS\tMICRO-BATCH\tPEAK\tBASE\tMASTER\tGRADS\tMOMENTS\tACTIVATIONS")
	for _, r := range rows {
		fits := "no"
		if r.Fits {
			fits = "yes"
		}
		h := r.Holds
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Mode, gib(r.Budget), fits, r.MicroBatch, gib(r.Bytes),
			dash(h[BaseWeights]), gib(h[MasterWeights]), gib(h[Gradients]), gib(h[OptimizerMoments]), gib(h[Activations]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var none []string
	for _, r := range rows {
		if !r.Fits {
			none = append(none, fmt.Sprintf("%s on %s", r.Mode, gib(r.Budget)))
		}
	}
	if len(none) > 0 {
		fmt.Fprintf(w, "one conversation of %d tokens does not fit a pass: %s (shorter --max-len, LoRA or gradient checkpointing)\n", seqLen, strings.Join(none, ", "))
	}
	return nil
}

func dash(b int64) string {
	if b == 0 {
		return "-"
	}
	return gib(b)
}
