package engine

import (
	"errors"
	"fmt"

	"agentrl/engine/attention"
	"agentrl/engine/best"
	"agentrl/engine/hint"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/play"
	"agentrl/engine/record"
	"agentrl/engine/residency"
	"agentrl/engine/rollout"
	"agentrl/engine/stopping"
	"agentrl/engine/train"
	"agentrl/envs/dataset"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/recipes"
	"agentrl/store"
)

// New prepares the generator, trainer, executor and task sets.
func New(o Options) (*Controller, error) {
	r := o.Recipe
	if r == nil || o.Policy == nil || o.Tokenizer == nil {
		return nil, errors.New("engine: a recipe, a policy model and a tokenizer are required")
	}
	// An evaluation-only run scores nothing against a reference and teaches nothing: it has none.
	if o.Reference == nil && o.Eval == nil {
		return nil, errors.New("engine: a training run needs a reference model (the frozen copy its KL and the teacher use)")
	}
	if o.Eval != nil {
		o.Reference = nil
	}
	if o.LogProbAlarm == 0 {
		o.LogProbAlarm = 1e-3
	}
	c := &Controller{opts: o, recipe: r, best: best.New(r.EarlyStop.Metric, r.EarlyStop.MaxDrop, r.EarlyStop.Patience), start: 1, stop: stopping.New(o.Eval != nil), rec: record.New(o.Store, o.RunID, r.Rollout.GroupSize)}
	c.countCompiles()
	var ok bool
	if c.imEnd, ok = o.Tokenizer.TokenID("<|im_end|>"); !ok {
		return nil, errors.New("engine: the tokenizer has no <|im_end|> token (a Qwen chat tokenizer is needed)")
	}
	c.stops = []int32{c.imEnd}
	if id, ok := o.Tokenizer.TokenID("<|endoftext|>"); ok {
		c.stops = append(c.stops, id)
	}
	for _, id := range c.stops {
		if int(id) >= o.Policy.Config.VocabSize {
			return nil, fmt.Errorf("engine: tokenizer id %d is outside the model's vocabulary (%d): model and tokenizer do not match", id, o.Policy.Config.VocabSize)
		}
	}
	var err error
	if c.attention, err = attention.Choose(r.Model.Attention, r.Rollout.MaxTotalTokens, o.Policy, o.Reference, o.hooks.fusedProbe); err != nil {
		return nil, err
	}
	lim := sandbox.Limits{Timeout: r.Env.Timeout, MaxOutputBytes: r.Env.Limits.MaxOutputBytes, MaxSteps: uint64(r.Env.Limits.MaxSteps), MaxMemoryMB: r.Env.Limits.MaxMemoryMB}
	// A nil module list means the default modules; an empty one (modules: []) means none.
	sb := sandbox.Config{Isolation: r.Env.Sandbox.Isolation, Python: r.Env.Sandbox.Python,
		Modules: r.Env.Sandbox.Modules, Workers: int(r.Env.Sandbox.Workers)}
	if sb.Modules != nil {
		sb.Modules = append([]string{}, sb.Modules...)
	}
	exec, err := sandbox.NewExecutorWith(r.Env.Executor, lim, r.Env.Session, sb)
	if err != nil {
		return nil, err // strict isolation the machine cannot give: the refusal says what to enable
	}
	if c.train, c.validation, c.heldout, err = dataset.TaskSets(r, o.Log); err != nil {
		return nil, err
	}
	weights := retool.Weights{Outcome: r.Reward.Outcome, Process: r.Reward.Process, Shaping: r.Reward.Shaping, FormatPenalty: r.Reward.FormatPenalty}
	if r.Algorithm.Estimator == "step_wise" { // reward.process weighs the verdicts per step instead (advantages)
		weights.Process = 0
	}
	slots, micro := int(r.Memory.KVSlots), int(r.Train.MicroBatch)
	c.dev = &residency.Device{Reference: o.Reference, SharedReference: r.Train.LoRA.Rank > 0,
		MomentsOnHost: r.Memory.OptimizerOffload == "host", MasterOnHost: r.Memory.MasterOffload == "host"}
	if p := o.Plan; p != nil && p.Budget > 0 {
		if !p.Fits {
			return nil, fmt.Errorf("engine: the recipe does not fit the device's %s: %s (see agentrl-tui plan)", recipes.FormatGiB(p.Budget), p.Reason)
		}
		slots, micro, c.dev.MomentsOnHost, c.dev.MasterOnHost = p.KVSlots, p.MicroBatch, p.MomentsOnHost, p.MasterOnHost
	}
	// No budget to size against (the CPU backend): more decode lanes than the cores can feed
	// only lengthen each step, and 8-row micro-batches are where the recipes were measured.
	if slots <= 0 {
		slots = min(16, r.BatchSize())
	}
	if micro <= 0 {
		micro = min(8, r.BatchSize())
	}
	// An evaluation-only run trains nothing: no trainer, so no master copy or AdamW moments (on a
	// GPU, twice the weights' size in float32) beside the inference weights.
	if o.Eval == nil {
		c.trainer, err = train.New(o.Policy, train.Config{
			ClipLow: r.Algorithm.ClipLow, ClipHigh: r.Algorithm.ClipHigh, KLCoef: klLoss(r), KLEstimator: r.Algorithm.KLEstimator,
			EntropyCoef: r.Algorithm.EntropyCoef, Aggregation: r.Algorithm.Aggregation,
			LR: r.Train.LR, WeightDecay: r.Train.WeightDecay, Beta1: r.Train.Beta1, Beta2: r.Train.Beta2, Eps: r.Train.Eps,
			GradClip: r.Train.GradClip, MicroBatch: micro, GradAccumulation: gradAccumulation(r, micro),
			GradientCheckpointing: r.Train.GradientCheckpointing, LogitsChunk: train.RunLogitsChunk(micro), ValueCoef: valueCoef(r),
			OptimizerBits: r.Train.OptimizerBits,
			Compiles:      c.compiles,
		})
		if err != nil {
			return nil, err
		}
	}
	if o.Resume != nil {
		if err := c.restore(o.Resume); err != nil {
			c.trainer.Close()
			return nil, err
		}
	}
	if c.dev.Infer, err = residency.NewInferenceCopy(o.Policy, c.compiles); err != nil {
		c.trainer.Close()
		return nil, err
	}
	if o.Eval != nil { // nothing updates the master weights: the inference copy is the model
		c.dev.Infer.DropMaster()
	}
	// The python executor's calls queue for the sandbox's workers, so the deterministic schedule
	// models them; a Starlark call takes microseconds and never makes another wait.
	toolWorkers := 0
	if r.Env.Executor == "python" {
		toolWorkers = sb.WorkerCount()
	}
	genCfg := rollout.Config{
		Slots: slots, MaxLen: model.Bucket(r.Rollout.MaxTotalTokens),
		Truncation:      r.Rollout.TopK > 0 || r.Rollout.TopP < 1,
		Decode:          func(ids []int32) string { return o.Tokenizer.Decode(ids, false) },
		Lockstep:        r.Rollout.Deterministic,
		ToolReturnSteps: r.ToolReturn(),
		ToolWorkers:     toolWorkers,
		Compiles:        c.compiles,
	}
	if o.Eval != nil { // an evaluation-only run's one generator decodes the evaluation's context
		genCfg.MaxLen = model.Bucket(r.EvalTotalTokens())
	}
	if c.gen, err = rollout.New(c.dev.Infer.Model(), genCfg); err != nil {
		c.dev.Infer.Close()
		c.trainer.Close()
		return nil, err
	}
	if r.EvalSlotsOwn() && o.Eval == nil {
		if err := c.newEvalGen(genCfg); err != nil {
			c.gen.Close()
			c.dev.Infer.Close()
			c.trainer.Close()
			return nil, err
		}
	}
	// What waits during rollout leaves the device now: offloaded moments and master weights (the
	// inference copy is built) and the reference copy, which comes in only for the reference forward.
	c.dev.Gen, c.dev.Trainer = c.gen, c.trainer
	if err := c.dev.Settle(); err != nil {
		c.Close()
		return nil, err
	}
	c.players = &play.Phase{Recipe: r, Tokenizer: o.Tokenizer, Gen: c.gen, Exec: exec, Pool: sandbox.NewPool(sb.WorkerCount()), Weights: weights, Stops: c.stops}
	if r.Rollout.Partial.Enabled { // a resumed run starts its groups where the checkpoint's data position is
		c.players.Partial = play.NewPartialState((c.start - 1) * r.Rollout.TasksPerStep)
	}
	if r.Env.Name == "external" {
		if c.agentEnv, err = play.NewAgentEnv(r, c.gen, o.Tokenizer, c.stops, o.AgentBin, weights); err != nil {
			c.Close()
			return nil, err
		}
		c.players.Agent = c.agentEnv.Play // the recipe's agent program plays each trajectory
	}
	var prmJudge hint.PRMJudge
	if r.PRMModel() && r.PRM.Endpoint == "" && o.Eval == nil { // an evaluation judges nothing
		if prmJudge, err = c.newPRM(); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.hints, err = hint.New(hint.Config{Recipe: r, Tokenizer: o.Tokenizer, Gen: c.gen, Stops: c.stops, Reference: o.Reference, PRM: prmJudge,
		Exec: exec, TeacherPrompt: c.teacherPrompt, Interrupt: func() error {
			if c.stop.Stopping() {
				return stopping.ErrStop
			}
			return nil
		}})
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// newEvalGen makes the evaluation's own generator (eval.max_total_tokens longer than rollout's:
// the ledger's eval phase), like rollout's (cfg) but with slots of the evaluation's context, as
// many as the plan fits (on the CPU: at most 16, at most one evaluation's trajectories). Its KV
// cache exists only while it evaluates (residency.Device.ToEval); rollout's is freed while it is
// first allocated, as the two are planned for different phases.
func (c *Controller) newEvalGen(cfg rollout.Config) (err error) {
	r := c.recipe
	es := ledger.EvalSettingsFor(r)
	slots := min(16, es.MaxKVSlots)
	if p := c.opts.Plan; p != nil && p.Budget > 0 && p.EvalSlots > 0 {
		slots = p.EvalSlots
	}
	cfg.Slots, cfg.MaxLen = slots, model.Bucket(es.SeqLen)
	if err := c.gen.ReleaseCache(); err != nil {
		return err
	}
	defer func() {
		if rerr := c.gen.RestoreCache(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	gen, err := rollout.New(c.dev.Infer.Model(), cfg)
	if err != nil {
		return fmt.Errorf("engine: the evaluation's rollout engine (%d slots of %d tokens, eval.max_total_tokens): %w", slots, es.SeqLen, err)
	}
	if err := gen.ReleaseCache(); err != nil {
		gen.Close()
		return err
	}
	c.evalGen, c.dev.EvalGen = gen, gen
	return nil
}

// restore loads a checkpoint's weights, moments and bookkeeping.
func (c *Controller) restore(cp *store.Checkpoint) error {
	src := fmt.Sprintf("checkpoint %s/%d", cp.Run, cp.Step)
	if err := residency.SetWeights(c.opts.Policy, cp.Weights, src); err != nil {
		return err
	}
	if err := residency.RestoreMoments(c.trainer, cp.Moments, int(cp.Metrics["adam_step"]), src); err != nil {
		return err
	}
	if valueCoef(c.recipe) > 0 {
		if err := residency.RestoreValueHead(c.trainer, cp.Moments, src); err != nil {
			return err
		}
	}
	c.start = cp.Step + 1
	c.best.Restore(cp.Metrics)
	c.lastSaved = cp.Step
	c.stop.Resumed(cp.Step)
	if c.opts.Store != nil {
		evals, err := c.opts.Store.Evals(c.opts.RunID)
		if err != nil {
			return err
		}
		for _, e := range evals {
			if e.Step > cp.Step {
				continue
			}
			c.evals++
			if e.Counts != nil && c.first == nil {
				c.first = &e
			}
		}
	}
	return nil
}

// valueCoef is the value-head loss weight: ppo's value_coef, 0 (no head) for the other algorithms.
func valueCoef(r *recipes.Recipe) float64 {
	if r.Algorithm.Name == "ppo" {
		return r.Algorithm.ValueCoef
	}
	return 0
}

func klLoss(r *recipes.Recipe) float64 {
	if r.Algorithm.KLMode == "loss" {
		return r.Algorithm.KLCoef
	}
	return 0
}

// sandboxLine is the isolation model-written code runs under, for RunStart: the python executor's
// own description ("strict: …" or "NONE …"), "" for the Starlark executor (no files, no network).
func sandboxLine(e sandbox.Executor) string {
	if p, ok := e.(interface{ Isolation() string }); ok {
		return p.Isolation()
	}
	return ""
}

// gradAccumulation is the micro-batches per AdamW update: train.grad_accumulation as set (0: one
// update per pass over the step's batch), or with train.updates_per_step U the step's
// ⌈batch ÷ micro⌉ micro-batches shared out over U updates, so that the split holds whatever
// micro-batch the ledger chose.
func gradAccumulation(r *recipes.Recipe, micro int) int {
	u := r.Train.UpdatesPerStep
	if u <= 1 || micro <= 0 {
		return int(r.Train.GradAccumulation)
	}
	n := (r.BatchSize() + micro - 1) / micro
	return max(1, (n+u-1)/u)
}
