package engine

import (
	"context"
	"fmt"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/hint"
	"agentrl/engine/rollout"
)

// newPRM builds prm.kind model's judge when it runs here: on the policy's rollout engine
// (prm.model policy), or on an engine of its own over the reference's weights (no second copy)
// or a folder's (Options.PRM), whose KV cache exists only in the PRM phase.
func (c *Controller) newPRM() (_ hint.PRMJudge, err error) {
	r, o := c.recipe, c.opts
	p := r.PRM
	judge := &hint.GenJudge{Tok: o.Tokenizer, Gen: c.gen, Stops: c.stops, MaxNew: p.MaxNewTokens, Temperature: p.Temperature, MaxInput: r.PRMInputTokens()}
	if p.Model == "policy" {
		return judge, nil
	}
	m := o.Reference
	if p.Model != "reference" {
		if o.PRM == nil || o.PRMTokenizer == nil {
			return nil, fmt.Errorf("engine: prm.model %q: the PRM's model and tokenizer were not loaded", p.Model)
		}
		m, judge.Tok = o.PRM, o.PRMTokenizer
		if judge.Stops = judge.Tok.ChatStopIDs(); len(judge.Stops) == 0 {
			return nil, fmt.Errorf("engine: prm.model %q: its tokenizer has no <|im_end|> token (a Qwen chat model is needed)", p.Model)
		}
		c.dev.PRM = m
	}
	slots := int(p.KVSlots)
	if pl := o.Plan; pl != nil && pl.Budget > 0 && pl.PRMSlots > 0 {
		slots = pl.PRMSlots
	}
	if slots <= 0 {
		slots = min(16, r.BatchSize()*p.Samples)
	}
	tok := judge.Tok
	// rollout.New allocates its KV cache: on a GPU the PRM's and rollout's do not fit together
	// (they are planned for different phases), so rollout's is freed while the PRM's exists (a
	// run on rollout.engines alone has none).
	if c.gen != nil {
		if err := c.gen.ReleaseCache(); err != nil {
			return nil, err
		}
		defer func() {
			if rerr := c.gen.RestoreCache(); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	gen, err := rollout.New(m, rollout.Config{
		Slots: slots, MaxLen: (r.PRMInputTokens() + p.MaxNewTokens + 15) / 16 * 16,
		Decode:   func(ids []int32) string { return tok.Decode(ids, false) },
		Lockstep: r.Rollout.Deterministic, Compiles: c.compiles,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: the PRM's rollout engine (%d slots of %d tokens): %w", slots, r.PRMInputTokens()+p.MaxNewTokens, err)
	}
	c.prmGen, c.dev.PRMGen, judge.Gen = gen, gen, gen
	if err := c.dev.FromPRM(0); err != nil { // the KV cache and a folder's weights: in the PRM phase only
		return nil, err
	}
	return judge, nil
}

// prmPhase is the model PRM's phase (prm.kind model): on a PRM of its own the device switches
// from rollout to the PRM (the policy's KV cache and inference copy freed, the PRM's weights and
// KV cache in), the PRM judges every trajectory, and its KV cache (and a folder's weights) leave
// again; the reference's weights stay for the reference forward that follows.
func (c *Controller) prmPhase(ctx context.Context, step int, trajs []*batch.Trajectory) error {
	if !c.recipe.PRMModel() {
		return nil
	}
	return c.inPhase(step, event.PhasePRM, func() error {
		if c.prmGen != nil {
			if err := c.dev.ToPRM(step); err != nil {
				return err
			}
		}
		err := c.hints.Judge(ctx, step, trajs)
		if c.prmGen != nil {
			if ferr := c.dev.FromPRM(step); err == nil {
				err = ferr
			}
		}
		if err != nil {
			return c.stopOr(ctx, err)
		}
		return nil
	})
}
