package engine

import (
	"errors"
	"fmt"

	"agentrl/engine/attention"
	"agentrl/engine/best"
	"agentrl/engine/device"
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
	if err := o.settle(); err != nil {
		return nil, err
	}
	r := o.Recipe
	c := &Controller{opts: o, recipe: r, best: best.New(r.EarlyStop.Metric, r.EarlyStop.MaxDrop, r.EarlyStop.Patience), start: 1, stop: stopping.New(o.Eval != nil), rec: record.New(o.Store, o.RunID, r.Rollout.GroupSize)}
	c.countCompiles()
	b := &builder{c: c, o: o, r: r}
	// Until the generator exists each step releases what it built when it fails; from there on
	// Close releases all of it.
	for _, step := range []func() error{b.stopTokens, b.chooseAttention, b.executor, b.tasks, b.sizes, b.trainer, b.inference, b.generators} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	// What waits during rollout leaves the device then: offloaded moments and master weights (the
	// inference copy is built; rollout.engines have been given the policy, scored on the master
	// weights) and the reference copy, which comes in only for the reference forward.
	c.dev.Gen, c.dev.Trainer = c.gen, c.trainer
	for _, step := range []func() error{b.players, c.openEngines, c.dev.Settle, b.hints} { // openEngines: rollout.engines, generation on remote servers
		if err := step(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// settle checks that o names what a run needs and fills in its defaults.
func (o *Options) settle() error {
	if o.Recipe == nil || o.Policy == nil || o.Tokenizer == nil {
		return errors.New("engine: a recipe, a policy model and a tokenizer are required")
	}
	// An evaluation-only run scores nothing against a reference and teaches nothing: it has none.
	if o.Reference == nil && o.Eval == nil {
		return errors.New("engine: a training run needs a reference model (the frozen copy its KL and the teacher use)")
	}
	if o.Eval != nil {
		o.Reference = nil
	}
	if o.LogProbAlarm == 0 {
		o.LogProbAlarm = 1e-3
	}
	return nil
}

// builder builds a Controller in New's named steps, carrying what one step leaves for the next.
type builder struct {
	c            *Controller
	o            Options
	r            *recipes.Recipe
	exec         sandbox.Executor
	sb           sandbox.Config
	slots, micro int
}

// stopTokens finds the chat tokens that end a turn, which must be in the model's vocabulary.
func (b *builder) stopTokens() error {
	c, o := b.c, b.o
	var ok bool
	if c.imEnd, ok = o.Tokenizer.TokenID("<|im_end|>"); !ok {
		return errors.New("engine: the tokenizer has no <|im_end|> token (a Qwen chat tokenizer is needed)")
	}
	c.stops = []int32{c.imEnd}
	if id, ok := o.Tokenizer.TokenID("<|endoftext|>"); ok {
		c.stops = append(c.stops, id)
	}
	for _, id := range c.stops {
		if int(id) >= o.Policy.Config.VocabSize {
			return fmt.Errorf("engine: tokenizer id %d is outside the model's vocabulary (%d): model and tokenizer do not match", id, o.Policy.Config.VocabSize)
		}
	}
	return nil
}

// chooseAttention chooses the attention path (engine/attention) and sets it on the models.
func (b *builder) chooseAttention() (err error) {
	r, o := b.r, b.o
	b.c.attention, err = attention.Choose(r.Model.Attention, r.Rollout.MaxTotalTokens, o.Policy, o.Reference, o.hooks.fusedProbe)
	return err
}

// executor makes the executor model-written code runs in, under the recipe's sandbox.
func (b *builder) executor() (err error) {
	r := b.r
	lim := sandbox.Limits{Timeout: r.Env.Timeout, MaxOutputBytes: r.Env.Limits.MaxOutputBytes, MaxSteps: uint64(r.Env.Limits.MaxSteps), MaxMemoryMB: r.Env.Limits.MaxMemoryMB}
	// A nil module list means the default modules; an empty one (modules: []) means none.
	sb := sandbox.Config{Isolation: r.Env.Sandbox.Isolation, Python: r.Env.Sandbox.Python,
		Modules: r.Env.Sandbox.Modules, Workers: int(r.Env.Sandbox.Workers)}
	if sb.Modules != nil {
		sb.Modules = append([]string{}, sb.Modules...)
	}
	b.sb = sb
	b.exec, err = sandbox.NewExecutorWith(r.Env.Executor, lim, r.Env.Session, sb)
	return err // strict isolation the machine cannot give: the refusal says what to enable
}

// tasks loads the run's training, validation and held-out tasks.
func (b *builder) tasks() (err error) {
	c := b.c
	c.train, c.validation, c.heldout, err = dataset.TaskSets(b.r, b.o.Log)
	return err
}

// sizes decides the KV slots, the training micro-batch and where the waiting weights and moments
// are: as the memory plan says when it has a budget, else as the recipe says or the CPU's defaults.
func (b *builder) sizes() error {
	c, o, r := b.c, b.o, b.r
	slots, micro := int(r.Memory.KVSlots), int(r.Train.MicroBatch)
	c.dev = &residency.Device{Backend: o.Policy.Backend, Reference: o.Reference, SharedReference: r.Train.LoRA.Rank > 0,
		MomentsOnHost: r.Memory.OptimizerOffload == "host", MasterOnHost: r.Memory.MasterOffload == "host"}
	if p := o.Plan; p != nil && p.Budget > 0 {
		if !p.Fits && o.Backend == device.Go {
			return fmt.Errorf("engine: the recipe does not fit the %s of memory the go backend plans in (four fifths of this machine's; memory.vram sets another): %s (see agentrl-tui plan RECIPE --set backend.kind=go)", recipes.FormatGiB(p.Budget), p.Reason)
		}
		if !p.Fits {
			return fmt.Errorf("engine: the recipe does not fit the device's %s: %s (see agentrl-tui plan)", recipes.FormatGiB(p.Budget), p.Reason)
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
	b.slots, b.micro = slots, micro
	return nil
}

// trainer makes the trainer. An evaluation-only run trains nothing: no trainer, so no master copy
// or AdamW moments (on a GPU, twice the weights' size in float32) beside the inference weights.
func (b *builder) trainer() (err error) {
	c, o, r, micro := b.c, b.o, b.r, b.micro
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
			return err
		}
	}
	return nil
}

// inference restores a resumed run's checkpoint and builds the inference copy of the weights,
// which a run generating on rollout.engines alone does without.
func (b *builder) inference() (err error) {
	c, o := b.c, b.o
	if o.Resume != nil {
		if err := c.restore(o.Resume); err != nil {
			c.trainer.Close()
			return err
		}
	}
	if c.remoteOnly() {
		return nil
	}
	if c.dev.Infer, err = residency.NewInferenceCopy(o.Policy, c.compiles); err != nil {
		c.trainer.Close()
		return err
	}
	if o.Eval != nil { // nothing updates the master weights: the inference copy is the model
		c.dev.Infer.DropMaster()
	}
	return nil
}

// generators makes rollout's generator and, when the evaluation's context is longer, the
// evaluation's own. With rollout.engines the engines generate rollouts and evaluations: the local
// generator exists only for what still decodes the policy here (ledger.LocalEngineFor), with no
// evaluation generator of its own.
func (b *builder) generators() (err error) {
	c, o, r := b.c, b.o, b.r
	if c.remoteOnly() {
		return nil
	}
	// The python executor's calls queue for the sandbox's workers, so the deterministic schedule
	// models them; a Starlark call takes microseconds and never makes another wait.
	toolWorkers := 0
	if r.Env.Executor == "python" {
		toolWorkers = b.sb.WorkerCount()
	}
	genCfg := rollout.Config{
		Slots: b.slots, MaxLen: model.Bucket(r.Rollout.MaxTotalTokens),
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
		return err
	}
	if r.EvalSlotsOwn() && o.Eval == nil && len(r.Rollout.Engines) == 0 {
		if err := c.newEvalGen(genCfg); err != nil {
			c.gen.Close()
			c.dev.Infer.Close()
			c.trainer.Close()
			return err
		}
	}
	return nil
}

// players makes the generation phases: the ReTool player, partial rollouts, an external agent.
func (b *builder) players() (err error) {
	c, o, r := b.c, b.o, b.r
	weights := retool.Weights{Outcome: r.Reward.Outcome, Process: r.Reward.Process, Shaping: r.Reward.Shaping, FormatPenalty: r.Reward.FormatPenalty}
	if r.Algorithm.Estimator == "step_wise" { // reward.process weighs the verdicts per step instead (advantages)
		weights.Process = 0
	}
	c.players = &play.Phase{Recipe: r, Tokenizer: o.Tokenizer, Gen: c.gen, Exec: b.exec, Pool: sandbox.NewPool(b.sb.WorkerCount()), Weights: weights, Stops: c.stops}
	if r.Rollout.Partial.Enabled { // a resumed run starts its groups where the checkpoint's data position is
		c.players.Partial = play.NewPartialState((c.start - 1) * r.Rollout.TasksPerStep)
	}
	if r.Env.Name == "external" {
		if c.agentEnv, err = play.NewAgentEnv(r, c.gen, o.Tokenizer, c.stops, o.AgentBin, weights); err != nil {
			return err
		}
		c.players.Agent = c.agentEnv.Play // the recipe's agent program plays each trajectory
	}
	return nil
}

// hints makes the hinter, the process scorer and the hint probes, with prm.kind model's judge.
func (b *builder) hints() (err error) {
	c, o, r := b.c, b.o, b.r
	var prmJudge hint.PRMJudge
	if r.PRMModel() && r.PRM.Endpoint == "" && o.Eval == nil { // an evaluation judges nothing
		if prmJudge, err = c.newPRM(); err != nil {
			return err
		}
	}
	c.hints, err = hint.New(hint.Config{Recipe: r, Tokenizer: o.Tokenizer, Gen: c.gen, Stops: c.stops, Reference: o.Reference, PRM: prmJudge,
		Exec: b.exec, TeacherPrompt: c.teacherPrompt, Interrupt: func() error {
			if c.stop.Stopping() {
				return stopping.ErrStop
			}
			return nil
		}})
	return err
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
	if err := c.gen.ReleaseCache(); err != nil { // there is one: without a local engine nothing evaluates here
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
