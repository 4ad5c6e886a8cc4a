package ledger

import "fmt"

// The model PRM's phase (prm.kind model, on this device): after rollout, before the reference
// forward. Rollout's KV cache and inference copy are freed; the PRM's weights come onto the
// device (the reference's, which then stay for the reference forward, or a folder's own, which
// wait in host memory otherwise) with a KV cache of its own slots from the same memory; master
// weights and moments stay where rollout left them. A PRM that is the policy writes on rollout's
// own engine (no phase of its own), and one behind prm.endpoint costs this device nothing.

// Component names of the PRM phase.
const (
	PRMWeights = "prm_weights"  // a folder PRM's weights (the compute dtype)
	PRMKVCache = "prm_kv_cache" // the PRM's KV cache
)

// PRMSettings size the PRM phase (Settings.PRM; nil: no such phase).
type PRMSettings struct {
	// Shape is the PRM model's shape (the policy's for prm.model reference).
	Shape Shape
	// SeqLen is one PRM slot: prm.max_input_tokens + prm.max_new_tokens.
	SeqLen int
	// KVSlots fixes the PRM's slots; 0 lets the ledger choose up to MaxKVSlots.
	KVSlots, MaxKVSlots int
	// Own: the PRM has weights of its own (a folder); false: it reads the reference's.
	Own bool
	// Note says how the shape was found, for the table ("" when from the PRM's own folder).
	Note string
}

// prmSizer is the sizer of the PRM's shape and slot length.
func (z sizer) prmSizer() sizer {
	st := z.st
	st.SeqLen, st.LoRARank, st.PRM = z.st.PRM.SeqLen, 0, nil
	return newSizer(z.st.PRM.Shape, st)
}

// prmPhase is what the PRM phase holds at slots PRM slots.
func (z sizer) prmPhase(slots int, w where) Phase {
	if z.st.PRM == nil {
		return Phase{Name: "prm", Holds: map[string]int64{}, Host: map[string]int64{}}
	}
	zp := z.prmSizer()
	p := newPhase("prm")
	switch {
	case z.st.PRM.Own:
		p.Holds[PRMWeights] = zp.params * zp.b
	case z.reference() > 0:
		p.Holds[ReferenceWeights] = z.reference()
	}
	p.Holds[PRMKVCache] = zp.kvCache(slots)
	p.Holds[SamplerWorkspace] = zp.sampler(slots)
	z.waiting(&p, w)
	z.addBase(&p)
	return p.summed()
}

// prmOwnWeights is a folder PRM's weights, which wait in host memory outside the PRM phase.
func (z sizer) prmOwnWeights() int64 {
	if z.st.PRM == nil || !z.st.PRM.Own {
		return 0
	}
	zp := z.prmSizer()
	return zp.params * zp.b
}

// choosePRM picks the PRM's slots (fixed or the most that fit) and reports why not.
func (z sizer) choosePRM(p *Plan, w where, budget int64) []string {
	ps := z.st.PRM
	if ps == nil {
		return nil
	}
	hi := ps.MaxKVSlots
	if ps.KVSlots > 0 {
		hi = ps.KVSlots
	}
	if budget == 0 {
		p.PRMSlots = hi
	} else {
		p.PRMSlots = most(hi, budget, func(n int) int64 { return z.prmPhase(n, w).Bytes })
	}
	var reasons []string
	switch {
	case ps.KVSlots > 0 && p.PRMSlots < ps.KVSlots:
		reasons = append(reasons, tooBig(z.prmPhase(ps.KVSlots, w), budget, fmt.Sprintf("%d PRM slots (fixed; %s)", ps.KVSlots, fitCount(p.PRMSlots, "slot"))))
		p.PRMSlots = 0
	case p.PRMSlots == 0:
		reasons = append(reasons, tooBig(z.prmPhase(1, w), budget, "1 PRM slot"))
	}
	p.PRM = z.prmPhase(max(p.PRMSlots, 1), w)
	return reasons
}
