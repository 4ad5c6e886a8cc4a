package engine

import (
	"agentrl/engine/compiles"
	"agentrl/engine/event"
)

// countCompiles sets up the run's compile counter (Options.Compiles, else the controller's own)
// and makes the models' forward passes count under it: the reference model's (reference and
// teacher log-probs, the hint probe) as "reference", the policy's as "policy". The generator,
// the trainer and the weight sync are handed the counter as they are built.
func (c *Controller) countCompiles() {
	c.compiles = c.opts.Compiles
	if c.compiles == nil {
		c.compiles = compiles.NewCounter()
	}
	if c.opts.Reference != nil { // an evaluation-only run has none
		c.opts.Reference.CountCompiles(c.compiles, "reference")
	}
	if c.opts.Policy != c.opts.Reference {
		c.opts.Policy.CountCompiles(c.compiles, "policy")
	}
}

// compileMetrics adds the compile budget to a step's metrics and returns the totals by kind:
// compiles (programs so far), compiles_new and compile_s (programs and seconds since the previous
// step's metrics: step 1's include those compiled before the run started, the generator's), and
// compile_total_s.
func (c *Controller) compileMetrics(metrics map[event.Metric]float64) map[string]event.Compiled {
	now := c.compiles.Snapshot()
	d := now.Sub(c.compiled)
	c.compiled = now
	metrics[event.MetricCompiles] = float64(now.Programs)
	metrics[event.MetricCompilesNew] = float64(d.Programs)
	metrics[event.MetricCompileSeconds] = d.Seconds
	metrics[event.MetricCompileTotalSeconds] = now.Seconds
	return byKind(now)
}

// byKind is a snapshot's totals as the events carry them (nil when nothing was compiled).
func byKind(s compiles.Snapshot) map[string]event.Compiled {
	if len(s.Kinds) == 0 {
		return nil
	}
	out := make(map[string]event.Compiled, len(s.Kinds))
	for k, t := range s.Kinds {
		out[k] = event.Compiled{Programs: t.Programs, Seconds: t.Seconds, CacheHits: t.CacheHits, CacheMisses: t.CacheMisses}
	}
	return out
}

// Compiles returns what the run has compiled so far.
func (c *Controller) Compiles() compiles.Snapshot { return c.compiles.Snapshot() }
