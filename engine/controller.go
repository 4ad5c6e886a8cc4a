// Package engine runs a recipe: the controller loop (rollout → score → reference/teacher forward →
// advantages → update → sync → eval → save) over the model, the generator, the environment, the
// trainer and the store, emitting plain event values on one channel.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/compiles"
	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// Options wire a run.
type Options struct {
	Recipe     *recipes.Recipe
	RecipePath string
	RunID      string
	Policy     *model.Model // trained in place
	Reference  *model.Model // frozen reference and teacher
	Tokenizer  *tokenizer.Tokenizer
	Store      *store.Store      // nil: nothing is saved
	ModelFiles map[string][]byte // config.json and tokenizer files, saved with checkpoints
	Events     chan<- event.Event
	Backend    string
	Kernels    string          // the CPU matrix kernels and why (event.RunStart.Kernels); "" on a GPU
	Monitor    *device.Monitor // NVML readings for the memory ledger; nil or without a GPU: none
	// LogProbAlarm is the max |rollout − trainer| log-prob allowed before an alarm (default 1e-3).
	LogProbAlarm float64
	// Resume continues a run from this checkpoint: weights, optimizer moments, data position and
	// the best-so-far bookkeeping. The run record in the store must exist.
	Resume *store.Checkpoint
	// Plan is the memory ledger's plan for this recipe and device (see ledger.PlanFor). With a
	// budget it sizes what the recipe leaves on auto: KV slots, the training micro-batch and where
	// the AdamW moments wait during rollout. nil, or a plan without a budget (the CPU backend):
	// at most 16 slots, one micro-batch per update pass, moments kept in place.
	Plan *ledger.Plan
	// Compiles counts the programs the run compiles (see compilebudget.go); nil: the controller keeps
	// its own.
	Compiles *compiles.Counter
	// AgentBin is the agentrl-tui executable an external agent runs its tools with (AGENTRL_BIN,
	// unless env.external.env sets it); "" is this process's own executable.
	AgentBin string
}

// Controller runs one recipe.
type Controller struct {
	o          Options
	r          *recipes.Recipe
	gen        *rollout.Generator
	infer      *inferenceCopy // the generator's weights: the master weights cast, rebuilt by each sync
	tr         *train.Trainer
	offload    bool // AdamW moments wait in host memory during rollout
	masterHost bool // the float32 master weights wait in host memory during rollout and the reference forward
	judge      *selfJudge
	ext        *agentEnv     // env.name external: the endpoint and the agent runner (external.go); nil for retool
	hinter     retool.Hinter // nil: no hints
	probe      hintProbe     // the step's hint-usefulness probe (reference phase)
	scorer     retool.Scorer // nil: no process reward
	exec       retool.Executor
	pool       *retool.Pool
	train      []envs.Task
	heldout    []envs.Task
	validation []envs.Task // eval.validation_tasks: early stopping and the best checkpoint are chosen on them
	weights    retool.Weights
	pauseMu    sync.Mutex
	paused     chan struct{} // non-nil while paused; closed on resume
	manualBest atomic.Int64  // the step the user marked best, 0 = automatic
	runMu      sync.Mutex    // serialises read-modify-write of the stored run record
	imEnd      int32
	stops      []int32
	best       float64
	bestStep   int
	sinceBest  int
	dropped    string // why the metric's fall below its best stops the run ("" = it does not)
	// first is the run's first evaluation, which later ones are compared with task by task.
	first     *store.Eval
	lastSaved int
	start     int // first step to run (1, or the step after a resumed checkpoint)
	// phases holds the seconds each phase of step phasesStep took, stored with the step.
	phases     map[string]float64
	phasesStep int
	// skipSync, when set (tests only), leaves the inference weights of that step stale: the
	// mis-synced copy the log-prob probe exists to catch.
	skipSync func(step int) bool
	// onEmit and onUpdate (tests only) see each event as it is emitted, on the emitting goroutine,
	// and each micro-batch of an update as it is about to run: a test stops the run there.
	onEmit   func(event.Event)
	onUpdate func(done, total int)
	// onTrain (tests only) sees a step's trajectories (an agent's later segments included) and
	// the sequences the update is about to train on.
	onTrain func(step int, batch []*traj, seqs []train.Sequence)

	// the stopping model (stop.go): where the run is, the stop asked for and what it keeps
	stopMu       sync.Mutex
	st           stopState
	discard      atomic.Bool    // the update in progress is to be discarded
	finishWithin time.Duration  // how much of an update a stop waits for (finishWithin; tests change it)
	outside      sync.WaitGroup // Stop calls emitting from other goroutines
	end          event.RunEnd   // the run's end, once Run returned
	clock        clock          // step and evaluation times, for the ETA
	evals        int            // evaluations finished (a resumed run's stored ones too)
	compiles     *compiles.Counter
	compiled     compiles.Snapshot // the counter at the last step's metrics
}

// New prepares the generator, trainer, executor and task sets.
func New(o Options) (*Controller, error) {
	r := o.Recipe
	if r == nil || o.Policy == nil || o.Reference == nil || o.Tokenizer == nil {
		return nil, errors.New("engine: a recipe, a policy and a reference model, and a tokenizer are required")
	}
	if o.LogProbAlarm == 0 {
		o.LogProbAlarm = 1e-3
	}
	c := &Controller{o: o, r: r, best: -1, start: 1, finishWithin: finishWithin}
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
	lim := retool.Limits{Timeout: r.Env.Timeout, MaxOutputBytes: r.Env.Limits.MaxOutputBytes, MaxSteps: uint64(r.Env.Limits.MaxSteps), MaxMemoryMB: r.Env.Limits.MaxMemoryMB}
	// A nil module list means the default modules; an empty one (modules: []) means none.
	sb := retool.Sandbox{Isolation: r.Env.Sandbox.Isolation, Python: r.Env.Sandbox.Python,
		Modules: r.Env.Sandbox.Modules, Workers: int(r.Env.Sandbox.Workers)}
	if sb.Modules != nil {
		sb.Modules = append([]string{}, sb.Modules...)
	}
	if c.exec, err = retool.NewExecutorSandbox(r.Env.Executor, lim, r.Env.Session, sb); err != nil {
		return nil, err // strict isolation the machine cannot give: the refusal says what to enable
	}
	c.pool = retool.NewPool(sb.WorkerCount())
	switch r.Env.Tasks.Source {
	case "jsonl":
		all, err := envs.LoadJSONL(r.Env.Tasks.JSONL.Path, envs.Fields{ID: r.Env.Tasks.JSONL.IDField, Prompt: r.Env.Tasks.JSONL.PromptField, Answer: r.Env.Tasks.JSONL.AnswerField})
		if err != nil {
			return nil, err
		}
		n := min(r.Env.Tasks.HeldoutSize, len(all)/2)
		v := min(r.Eval.ValidationTasks, (len(all)-n)/2)
		c.heldout, c.validation, c.train = all[:n], all[n:n+v], all[n+v:]
	default:
		syn := retool.Synthetic{Levels: r.Env.Tasks.Synthetic.Levels, Seed: uint64(r.Env.Tasks.Synthetic.Seed)}
		if c.train, c.heldout, err = syn.Split(r.Env.Tasks.TrainSize, r.Env.Tasks.HeldoutSize); err != nil {
			return nil, err
		}
		if c.validation, err = syn.Validation(r.Eval.ValidationTasks, c.train); err != nil {
			return nil, err
		}
	}
	c.weights = retool.Weights{Outcome: r.Reward.Outcome, Process: r.Reward.Process, Shaping: r.Reward.Shaping, FormatPenalty: r.Reward.FormatPenalty}
	slots, micro := int(r.Memory.KVSlots), int(r.Train.MicroBatch)
	c.offload = r.Memory.OptimizerOffload == "host"
	c.masterHost = r.Memory.MasterOffload == "host"
	if p := o.Plan; p != nil && p.Budget > 0 {
		if !p.Fits {
			return nil, fmt.Errorf("engine: the recipe does not fit the device's %s: %s (see agentrl-tui plan)", recipes.FormatGiB(p.Budget), p.Reason)
		}
		slots, micro, c.offload, c.masterHost = p.KVSlots, p.MicroBatch, p.MomentsOnHost, p.MasterOnHost
	}
	// No budget to size against (the CPU backend): more decode lanes than the cores can feed
	// only lengthen each step, and 8-row micro-batches are where the recipes were measured.
	if slots <= 0 {
		slots = min(16, r.BatchSize())
	}
	if micro <= 0 {
		micro = min(8, r.BatchSize())
	}
	c.tr, err = train.New(o.Policy, train.Config{
		ClipLow: r.Algorithm.ClipLow, ClipHigh: r.Algorithm.ClipHigh, KLCoef: klLoss(r), KLEstimator: r.Algorithm.KLEstimator,
		EntropyCoef: r.Algorithm.EntropyCoef, Aggregation: r.Algorithm.Aggregation,
		LR: r.Train.LR, WeightDecay: r.Train.WeightDecay, Beta1: r.Train.Beta1, Beta2: r.Train.Beta2, Eps: r.Train.Eps,
		GradClip: r.Train.GradClip, MicroBatch: micro, GradAccumulation: int(r.Train.GradAccumulation),
		GradientCheckpointing: r.Train.GradientCheckpointing, LogitsChunk: 32, ValueCoef: valueCoef(r),
		OptimizerBits: r.Train.OptimizerBits,
		Compiles:      c.compiles,
	})
	if err != nil {
		return nil, err
	}
	if o.Resume != nil {
		if err := c.restore(o.Resume); err != nil {
			c.tr.Close()
			return nil, err
		}
	}
	if c.infer, err = newInferenceCopy(o.Policy, c.compiles); err != nil {
		c.tr.Close()
		return nil, err
	}
	// The python executor's calls queue for the sandbox's workers, so the deterministic schedule
	// models them; a Starlark call takes microseconds and never makes another wait.
	toolWorkers := 0
	if r.Env.Executor == "python" {
		toolWorkers = sb.WorkerCount()
	}
	c.gen, err = rollout.New(c.infer.model, rollout.Config{
		Slots: slots, MaxLen: model.Bucket(r.Rollout.MaxTotalTokens),
		Truncation:      r.Rollout.TopK > 0 || r.Rollout.TopP < 1,
		Decode:          func(ids []int32) string { return o.Tokenizer.Decode(ids, false) },
		Lockstep:        r.Rollout.Deterministic,
		ToolReturnSteps: r.ToolReturn(),
		ToolWorkers:     toolWorkers,
		Compiles:        c.compiles,
	})
	if err != nil {
		c.infer.close()
		c.tr.Close()
		return nil, err
	}
	if c.offload {
		if err := c.tr.OffloadMoments(); err != nil {
			c.Close()
			return nil, err
		}
	}
	// What waits during rollout leaves the device now: offloaded master weights (the inference
	// copy is built) and the reference copy, which comes in only for the reference forward.
	if c.masterHost {
		if err := c.tr.OffloadMaster(); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.moveReference(false); err != nil {
		c.Close()
		return nil, err
	}
	if r.Env.Name == "external" {
		if c.ext, err = c.newAgentEnv(); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.judge = &selfJudge{c: c}
	if c.hinter, c.scorer, err = c.newHinter(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// restore loads a checkpoint's weights, moments and bookkeeping.
func (c *Controller) restore(cp *store.Checkpoint) error {
	src := fmt.Sprintf("checkpoint %s/%d", cp.Run, cp.Step)
	if err := c.setWeights(cp.Weights, src); err != nil {
		return err
	}
	byName := map[string]*safetensors.Tensor{}
	for _, t := range cp.Moments {
		byName[t.Name] = t
	}
	// The model's moments are there when the checkpoint saved the optimizer (ppo's value head
	// is kept in the same file, so the file alone says nothing).
	if _, saved := byName["m."+c.tr.TrainedSpecs()[0].Name]; saved {
		var m, v []*tensors.Tensor
		for _, spec := range c.tr.TrainedSpecs() { // a LoRA run's: the adapters
			for _, pre := range []string{"m.", "v."} {
				t, ok := byName[pre+spec.Name]
				if !ok {
					return fmt.Errorf("%s: optimizer moment %s%s is missing", src, pre, spec.Name)
				}
				tt, err := momentFrom(t, spec.Dims, src)
				if err != nil {
					return err
				}
				if pre == "m." {
					m = append(m, tt)
				} else {
					v = append(v, tt)
				}
			}
		}
		if err := c.tr.SetMoments(m, v, int(cp.Metrics["adam_step"])); err != nil {
			return err
		}
	}
	if valueCoef(c.r) > 0 {
		if err := c.restoreValueHead(cp, src); err != nil {
			return err
		}
	}
	c.start = cp.Step + 1
	c.best, c.bestStep, c.sinceBest = cp.Metrics["best"], int(cp.Metrics["best_step"]), int(cp.Metrics["since_best"])
	c.lastSaved = cp.Step
	c.st.trained, c.st.saved = cp.Step, cp.Step
	if c.o.Store != nil {
		evals, err := c.o.Store.Evals(c.o.RunID)
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

// Close releases the generator, the inference weights and the trainer's graphs and moments.
func (c *Controller) Close() {
	c.ext.close()
	c.gen.Close()
	c.infer.close()
	c.tr.Close()
}

// Pause holds the run before its next step (the step in progress finishes); Resume (or Stop)
// releases it.
func (c *Controller) Pause() {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	if c.paused == nil {
		c.paused = make(chan struct{})
	}
}

// Resume releases a paused run.
func (c *Controller) Resume() {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	if c.paused != nil {
		close(c.paused)
		c.paused = nil
	}
}

// waitIfPaused blocks while the run is paused (Resume and Stop release it) or until ctx ends.
func (c *Controller) waitIfPaused(ctx context.Context) {
	c.pauseMu.Lock()
	ch := c.paused
	c.pauseMu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// MarkBest overrides the automatic choice of the best checkpoint: the run record names step as
// its best from now on (pinned, so a resumed run keeps the choice too), checkpoint retention
// never deletes it, and the end of the run keeps that choice.
func (c *Controller) MarkBest(step int) error {
	if c.o.Store == nil {
		return errors.New("engine: this run has no store to mark a checkpoint in")
	}
	if _, err := c.o.Store.Manifest(c.o.RunID, step); err != nil {
		return fmt.Errorf("mark best: step %d has no checkpoint: %w", step, err)
	}
	c.manualBest.Store(int64(step))
	return c.updateRun(func(r *store.Run) { r.BestStep, r.BestPinned = step, true })
}

// Export writes the checkpoint of step as a HuggingFace folder next to the store
// (export/RUN-stepN) and returns its path.
func (c *Controller) Export(step int) (string, error) {
	if c.o.Store == nil {
		return "", errors.New("engine: this run has no store to export from")
	}
	dir := filepath.Join(filepath.Dir(c.o.Store.Path()), "export", fmt.Sprintf("%s-step%d", c.o.RunID, step))
	if err := c.o.Store.Export(c.o.RunID, step, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// ledger reports what the engine holds on the device, by component, with NVML's reading of the
// whole device when there is one (ok=false on the CPU backend: then only the components count).
func (c *Controller) ledger() event.Ledger {
	params, base := c.paramBytes()
	cfg := c.gen.Config()
	l := event.Ledger{Backend: c.o.Backend, Components: map[string]int64{
		"inference weights": c.infer.bytes(),
		"KV cache":          model.CacheBytes(c.o.Policy.Config, c.o.Policy.Options().Compute, cfg.Slots, cfg.MaxLen),
	}}
	// Where each waiting component is now, from the tensors themselves: "NAME (host)" for the
	// part in host memory.
	put := func(name string, onDevice, total int64) {
		if onDevice > 0 {
			l.Components[name] = onDevice
		}
		if total > onDevice {
			l.Components[name+" (host)"] = total - onDevice
		}
	}
	fp := c.tr.Footprint()
	put("master weights", fp.MasterWeights, params)
	put("AdamW moments", fp.OptimizerMoments, fp.OptimizerMoments+fp.HostMoments)
	if base > 0 { // LoRA: one frozen base, the reference being that base with the adapters off
		l.Components["base weights"] = base
	} else {
		put("reference weights", deviceBytes(c.o.Reference.Params.Values), c.o.Reference.Params.Bytes())
	}
	if c.o.Monitor != nil {
		if rd, ok := c.o.Monitor.Read(); ok {
			l.DeviceUsed, l.DeviceTotal, l.UtilPct = rd.UsedBytes, rd.TotalBytes, rd.UtilPct
			l.Budget = int64(rd.TotalBytes)
		}
	}
	return l
}

// updateRun changes the stored run record; the run goroutine and the UI's commands share it.
func (c *Controller) updateRun(fn func(*store.Run)) error {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	run, err := c.o.Store.GetRun(c.o.RunID)
	if err != nil {
		return err
	}
	fn(&run)
	return c.o.Store.PutRun(run)
}

// bestChoice is the run's best step: the user's choice if they made one, else the automatic one.
func (c *Controller) bestChoice() int {
	if m := c.manualBest.Load(); m > 0 {
		return int(m)
	}
	return c.bestStep
}

func (c *Controller) emit(e event.Event) {
	if c.onEmit != nil {
		c.onEmit(e)
	}
	if c.o.Events != nil {
		c.o.Events <- e
	}
}

// opdClip bounds each token's centred OPD advantage (see train.CenterClip): a teacher that is
// unsure of a digit must not outweigh the outcome, whose GRPO advantage is about ±1 to ±3.
const opdClip = 1.0

// traj is one trajectory in flight and its results.
type traj struct {
	task      envs.Task
	group     int
	sample    int
	tokens    []int32
	mask      []bool
	lps       []float32
	promptLen int
	turns     []event.Turn
	reward    envs.Reward
	summary   retool.Summary
	hint      string
	hintCut   string // hintShortened or hintDropped when the hinter's text did not fit, else ""
	adv       []float32
	ref       []float32 // the reference model's log-prob of each token (KL term), nil without one
	teacher   []float32 // the teacher's log-prob of each response token given the hint, nil unhinted
	ret       []float32 // ppo: the value head's targets (GAE returns) per token
	oldValues []float32 // ppo: the value head's predictions before the update
	drift     string    // a token-drift finding, "" when the context matched the chat rendering
	ext       *agentRun // an external agent's run (external.go); nil for a ReTool trajectory
}

// Run executes the recipe until max_steps, early stopping, Stop or ctx's end (which stops the
// run as Stop("interrupted") does). Whatever ends it, the run saves its last trained step and
// records its end; see stop.go for what a stop keeps.
func (c *Controller) Run(ctx context.Context) (err error) {
	r := c.r
	start := event.RunStart{RunID: c.o.RunID, Name: r.Run.Name, Recipe: c.o.RecipePath, TotalSteps: r.Run.MaxSteps, Backend: c.o.Backend, Model: r.Model.Path, Kernels: c.o.Kernels,
		Sandbox: sandboxLine(c.exec), Compiles: byKind(c.compiles.Snapshot())}
	if c.o.Store != nil && c.o.Resume != nil {
		run, err := c.o.Store.GetRun(c.o.RunID)
		if err != nil {
			return err
		}
		run.Status, run.StopReason, run.StopDetail, run.Ended = "running", "", "", time.Time{}
		if run.BestPinned {
			c.manualBest.Store(int64(run.BestStep))
			start.MarkedBest = run.BestStep
		}
		if err := c.o.Store.PutRun(run); err != nil {
			return err
		}
	} else if c.o.Store != nil {
		yaml, _ := json.Marshal(r)
		if err := c.o.Store.PutRun(store.Run{ID: c.o.RunID, Name: r.Run.Name, Recipe: c.o.RecipePath, RecipeYAML: string(yaml), RecipeHash: r.Hash(), Created: time.Now(), Status: "running", TotalSteps: r.Run.MaxSteps}); err != nil {
			return err
		}
	}
	// Generation runs under work, which a stop cancels when its plan drops what is in progress.
	work, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.stopMu.Lock()
	c.st.cancel = cancel
	c.st.trained = c.start - 1
	c.stopMu.Unlock()
	defer context.AfterFunc(ctx, func() { c.Stop("interrupted") })()
	c.emit(start)
	defer func() { c.finish(err) }()
	c.emit(c.ledger())
	if r.Eval.AtStart && c.o.Resume == nil && c.enter(0, event.PhaseEval) {
		if _, err := c.evaluate(work, 0); err != nil && !errors.Is(err, errStop) {
			return err
		}
		if err := c.storePhases(0); err != nil {
			return err
		}
	}
	for step := c.start; step <= r.Run.MaxSteps; step++ {
		c.pass(step-1, "")
		c.waitIfPaused(work)
		if c.stopping() {
			break
		}
		err := c.step(work, step)
		c.emit(c.ledger())
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		c.pass(step, "")
		switch {
		case c.stopping():
		case c.dropped != "":
			c.decide(c.dropped, false)
		case r.EarlyStop.Patience > 0 && c.sinceBest >= r.EarlyStop.Patience:
			c.decide(fmt.Sprintf("early stop: %s did not improve for %d evaluations", r.EarlyStop.Metric, c.sinceBest), false)
		case step == r.Run.MaxSteps:
			c.decide(fmt.Sprintf("all %d steps done", r.Run.MaxSteps), true)
		}
		if c.stopping() {
			break
		}
	}
	c.decide(fmt.Sprintf("all %d steps done", r.Run.MaxSteps), true) // a resumed run with no step left
	c.stopMu.Lock()
	trained := c.st.trained
	c.stopMu.Unlock()
	return c.save(context.Background(), trained, true) // the final weights are always kept
}

func (c *Controller) phase(step int, name string, start time.Time) {
	s := time.Since(start).Seconds()
	c.emit(event.Phase{Step: step, Phase: name, Seconds: s})
	if c.phases == nil || c.phasesStep != step {
		c.phases, c.phasesStep = map[string]float64{}, step
	}
	c.phases[name] += s
}

// storePhases keeps step's phase times, so that a stored run's view shows where its time went.
func (c *Controller) storePhases(step int) error {
	if c.o.Store == nil || c.phasesStep != step || len(c.phases) == 0 {
		return nil
	}
	return c.o.Store.PutPhases(c.o.RunID, step, c.phases)
}

// step is one training step. Each phase is entered only while no stop is pending; a stop cuts
// the step short with errStop (see stop.go for what it keeps).
func (c *Controller) step(ctx context.Context, step int) error {
	r := c.r
	t0 := time.Now()
	if !c.enter(step, event.PhaseRollout) {
		return errStop
	}
	rng := rand.New(rand.NewPCG(uint64(r.Run.Seed), uint64(step)))
	var batch []*traj
	for i := 0; i < r.Rollout.TasksPerStep; i++ {
		task := c.train[((step-1)*r.Rollout.TasksPerStep+i)%len(c.train)]
		for s := 0; s < r.Rollout.GroupSize; s++ {
			batch = append(batch, &traj{task: task, group: i, sample: s})
		}
	}
	gen, err := c.rollout(ctx, step, event.PhaseRollout, batch, rng.Uint64(), r.Rollout.Temperature)
	if err != nil {
		return c.stopOr(ctx, err)
	}
	// An external agent that gave nothing usable is shown and stored, not trained on.
	batch, dropped, err := splitDropped(step, batch)
	if err != nil {
		return err
	}
	c.phase(step, "rollout", t0)
	for _, t := range batch {
		if t.drift != "" {
			c.emit(event.Alarm{Step: step, Kind: event.AlarmTokenDrift, Value: 1, Threshold: 0,
				Message: "the trained tokens do not read as the chat template renders the conversation (" + t.drift + ")"})
			break
		}
	}

	t0 = time.Now()
	if !c.enter(step, event.PhaseScore) {
		return errStop
	}
	if err := c.hindsight(ctx, batch); err != nil {
		return c.stopOr(ctx, err)
	}
	for _, t := range batch {
		t.reward = c.composeReward(t)
	}
	batch = expandSegments(batch) // an agent's later segments train as sequences of their own
	c.phase(step, "score", t0)

	// The rest of the step is the training phase: the KV cache and the inference weights make
	// room for the reference forward, the update and their activations.
	t0 = time.Now()
	if !c.enter(step, event.PhaseReference) {
		return errStop
	}
	if err := c.toReference(step); err != nil {
		return err
	}
	switchToTrain := time.Since(t0).Seconds()
	if err := c.referenceForward(batch); err != nil {
		_ = c.toTrain(step) // a consistent device for what follows the error (save, close)
		return err
	}
	t1 := time.Now()
	if err := c.toTrain(step); err != nil {
		return err
	}
	switchToTrain += time.Since(t1).Seconds()
	c.phase(step, "reference", t0)

	t0 = time.Now()
	if !c.enter(step, event.PhaseAdvantage) {
		return errStop
	}
	hinted, err := c.advantages(batch)
	if err != nil {
		return err
	}
	c.phase(step, "advantage", t0)

	t0 = time.Now()
	metrics := map[string]float64{"switch_to_train_s": switchToTrain}
	generationMetrics(gen, metrics)
	lr := train.Schedule{Base: r.Train.LR, Warmup: r.Train.WarmupSteps, Total: r.Run.MaxSteps, Kind: r.Train.Schedule, MinRatio: r.Train.MinLRRatio}.At(step)
	metrics["lr"] = lr
	seqs := make([]train.Sequence, len(batch))
	for i, t := range batch {
		seqs[i] = train.Sequence{Tokens: t.tokens, LossMask: t.mask, OldLogProbs: t.lps, Advantages: t.adv, RefLogProbs: t.ref,
			Returns: t.ret, OldValues: t.oldValues}
	}
	if c.onTrain != nil {
		c.onTrain(step, batch, seqs)
	}
	var loss, probeMax float64
	err = c.update(step, func(stop func(done, total int) bool) error { // finished, or discarded by a stop
		for epoch := 0; epoch < max(r.Train.EpochsPerStep, 1); epoch++ {
			m, err := c.tr.UpdateUntil(seqs, lr, stop)
			if err != nil {
				return err
			}
			if epoch == 0 { // its first micro-batches ran before any update: rollout and trainer weights agree
				probeMax = m.MaxLogProbDiff
				metrics["logprob_diff_mean"] = m.MeanLogProbDiff
				metrics["clip_frac"], metrics["grad_norm"], metrics["entropy"], metrics["ref_kl"] = m.ClipFrac, m.GradNorm, m.Entropy, m.RefKL
				metrics["updates"] = float64(m.Updates)
				if c.r.Algorithm.Name == "ppo" {
					metrics["value_loss"], metrics["explained_variance"] = m.ValueLoss, m.ExplainedVariance
				}
			}
			loss = m.Loss
		}
		return nil
	})
	if err != nil {
		return err
	}
	metrics["loss"] = loss
	metrics["logprob_diff_max"] = probeMax
	if probeMax > c.o.LogProbAlarm {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmLogProbMismatch, Value: probeMax, Threshold: c.o.LogProbAlarm,
			Message: "rollout and trainer log-probs disagree: the inference weights may be stale"})
	}
	c.phase(step, "train", t0)
	batch = collapseSegments(batch)

	t0 = time.Now()
	diff, err := c.toRollout(step)
	if err != nil {
		return err
	}
	metrics["sync_diff_max"] = diff
	metrics["switch_to_rollout_s"] = time.Since(t0).Seconds()
	if diff > 0 {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmStaleWeights, Value: diff, Threshold: 0,
			Message: "after the sync the inference weights differ from the cast master weights"})
	}
	c.phase(step, "sync", t0)

	var meanReward, correct float64
	for _, t := range batch {
		meanReward += t.reward.Total
		if t.summary.Correct {
			correct++
		}
	}
	metrics["reward_mean"] = meanReward / float64(len(batch))
	metrics["accuracy"] = correct / float64(len(batch))
	metrics["hinted_share"] = float64(hinted) / float64(len(batch))
	c.dropMetrics(metrics, dropped)
	c.hintMetrics(step, batch, metrics)
	if r.Hinter.Kind == "self" || r.Hinter.Kind == "openai" || r.PRM.Kind == "judge" {
		metrics["judge_unparsed"] = float64(c.judge.unparsed.Swap(0)) // replies with no usable \boxed{}
	}
	st := c.gen.Stats()
	metrics["tokens_per_s"] = float64(st.Tokens) / max(st.StepTime.Seconds(), 1e-9)
	c.emit(event.StepMetrics{Step: step, Metrics: metrics, Compiles: c.compileMetrics(metrics)})

	// The step is trained: its metrics and trajectories are kept whatever comes next (part of
	// the save phase's time).
	t0 = time.Now()
	c.pass(step, event.PhaseSave)
	batch = append(batch, dropped...)
	trajs := make([]event.Trajectory, len(batch))
	for i, t := range batch {
		trajs[i] = c.trajectoryEvent(step, t, false)
		c.emit(trajs[i])
	}
	if c.o.Store != nil {
		if err := c.o.Store.PutMetrics(c.o.RunID, step, metrics); err != nil {
			return err
		}
		recs := make([]store.TrajectoryRecord, len(batch))
		for i, t := range batch {
			data, _ := json.Marshal(trajs[i])
			recs[i] = store.TrajectoryRecord{Step: step, TaskID: t.task.ID, Sample: t.group*r.Rollout.GroupSize + t.sample,
				Reward: t.reward.Total, Correct: t.summary.Correct, Hinted: t.hint != "", Data: data}
		}
		if err := c.o.Store.PutTrajectories(c.o.RunID, recs); err != nil {
			return err
		}
	}
	recorded := time.Since(t0)
	c.clock.stepDone(c.stepSeconds(step) + recorded.Seconds())
	if r.Eval.Every > 0 && step%r.Eval.Every == 0 && c.enter(step, event.PhaseEval) {
		if _, err := c.evaluate(ctx, step); err != nil && !errors.Is(err, errStop) {
			return err
		}
	}
	t0 = time.Now().Add(-recorded)
	c.pass(step, event.PhaseSave)
	if c.o.Store != nil && r.Checkpoint.Every > 0 && step%r.Checkpoint.Every == 0 {
		if err := c.save(ctx, step, false); err != nil {
			return err
		}
	}
	c.phase(step, "save", t0)
	return c.storePhases(step)
}

// stopOr is errStop when a stop abandoned (cancelled ctx, the generation's) the work that failed
// with err, else err.
func (c *Controller) stopOr(ctx context.Context, err error) error {
	if errors.Is(err, errStop) || (ctx.Err() != nil && c.stopping()) {
		return errStop
	}
	return err
}

// stepSeconds sums the phases of step timed so far (all of a training step's but its evaluation
// and save when called before them).
func (c *Controller) stepSeconds(step int) float64 {
	if c.phasesStep != step {
		return 0
	}
	var s float64
	for name, v := range c.phases {
		if name != event.PhaseEval {
			s += v
		}
	}
	return s
}

// trajectoryEvent is t as shown and stored; an evaluation's (eval) carries no token pieces, as it
// has no advantages to colour them by.
func (c *Controller) trajectoryEvent(step int, t *traj, eval bool) event.Trajectory {
	e := event.Trajectory{Step: step, TaskID: t.task.ID, Prompt: t.task.Prompt, Group: t.group, Sample: t.sample, Turns: t.turns,
		Reward: t.reward, Correct: t.summary.Correct, Hint: t.hint, Tokens: len(t.tokens), ToolErrors: t.summary.ToolErrors, Eval: eval}
	if !eval {
		for j := t.promptLen; j < len(t.tokens); j++ {
			if t.mask[j] {
				e.Pieces = append(e.Pieces, c.o.Tokenizer.Decode(t.tokens[j:j+1], false))
				if t.adv != nil {
					e.Advantages = append(e.Advantages, t.adv[j])
				}
			}
		}
	}
	c.agentEvent(&e, t) // an external agent's run, and its later segments' tokens
	return e
}

// prompt renders the opening messages with the generation prompt; a hint (bridge thought) is
// appended to the user's problem for the teacher.
func (c *Controller) prompt(task envs.Task, hint string) ([]int32, error) {
	text, err := tokenizer.RenderChat([]tokenizer.Message{{Role: "system", Content: retool.SystemFor(c.r.Env.Observation.Format)}, {Role: "user", Content: retool.WithHint(task.Prompt, hint)}}, nil, true)
	if err != nil {
		return nil, err
	}
	return c.o.Tokenizer.Encode(text), nil
}

// rollout runs every trajectory of the batch concurrently through the generator, reporting
// progress as phase (rollout, or eval for the held-out tasks: then each trajectory is emitted as
// it finishes, and pass@k over the tasks complete so far), and at the end how the phase used the
// generator's slots (event.Generation, also returned).
func (c *Controller) rollout(ctx context.Context, step int, phase string, batch []*traj, seed uint64, temperature float64) (event.Generation, error) {
	meter := c.gen.Measure()
	defer meter.Stop()
	queued := c.pool.QueueWait()
	var wg sync.WaitGroup
	errs := make(chan error, len(batch))
	tk := c.newTracker(step, phase, batch)
	// Each trajectory opens its session with its own ticket, so a lockstep generator admits them
	// in batch order whatever the goroutines' timing; a trajectory that fails before it opens one
	// gives its ticket up.
	base := c.gen.Reserve(len(batch))
	run := c.runTrajectory
	if c.ext != nil {
		run = c.runAgent // env.name external: the recipe's agent program plays the trajectory
	}
	for i, t := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.gen.Skip(base + int64(i))
			if err := run(rollout.WithTicket(ctx, base+int64(i)), t, seed+uint64(i)*7919, temperature); err != nil {
				errs <- err
				return
			}
			tk.finished(t)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return event.Generation{}, err
	}
	g := generationEvent(step, phase, meter.Stop(), c.pool.QueueWait()-queued)
	c.emit(g)
	return g, nil
}

// runTrajectory plays one multi-turn episode. The trained tokens are exactly the sampled ones plus
// the tokenized template pieces and observations: decoded text is never re-tokenized.
func (c *Controller) runTrajectory(ctx context.Context, t *traj, seed uint64, temperature float64) error {
	r := c.r
	cfg := retool.Config{Executor: c.exec, Pool: c.pool, MaxTurns: r.Rollout.MaxTurns, Format: r.Env.Observation.Format, MaxObsChars: r.Env.Observation.MaxChars, Weights: c.weights}
	if retool.LongTrajectory(t.task.ID, t.sample, r.Env.LongTail.Share) {
		cfg.MinTurns = r.Env.LongTail.Turns
	}
	env, err := retool.New(cfg)
	if err != nil {
		return err
	}
	defer env.Close()
	msgs, err := env.Reset(ctx, t.task)
	if err != nil {
		return err
	}
	chat := []tokenizer.Message{{Role: msgs[0].Role, Content: msgs[0].Content}, {Role: msgs[1].Role, Content: msgs[1].Content}}
	prompt, err := c.prompt(t.task, "")
	if err != nil {
		return err
	}
	t.promptLen = len(prompt)
	add := func(ids []int32, policy bool, lps []float32) {
		t.tokens = append(t.tokens, ids...)
		for i := range ids {
			t.mask = append(t.mask, policy)
			if lps != nil {
				t.lps = append(t.lps, lps[i])
			} else {
				t.lps = append(t.lps, 0)
			}
		}
	}
	add(prompt, false, nil)
	sess, err := c.gen.Open(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	next := prompt
	stops := append([]string{"</code>"}, r.Rollout.Stop...)
	for turn := 1; ; turn++ {
		room := model.Bucket(r.Rollout.MaxTotalTokens) - len(t.tokens) - 1
		res, err := sess.Generate(ctx, rollout.Request{Append: next, MaxNew: min(r.Rollout.MaxNewTokens, room), StopIDs: c.stops, StopStrings: stops,
			Sampling: rollout.Sampling{Temperature: float32(temperature), TopP: float32(r.Rollout.TopP), TopK: r.Rollout.TopK, Seed: seed + uint64(turn)}})
		if err != nil {
			return err
		}
		add(res.IDs, true, res.LogProbs)
		text := strings.TrimSuffix(c.o.Tokenizer.Decode(res.IDs, false), "<|im_end|>")
		st, err := env.Step(ctx, text)
		if err != nil {
			return err
		}
		et := event.Turn{Assistant: text}
		if len(st.ToolCalls) > 0 {
			et.Code, et.ToolStatus, et.ToolSeconds = st.ToolCalls[0].Code, st.ToolCalls[0].Status, st.ToolCalls[0].DurationSec
			et.Observation = st.Observation
		}
		t.turns = append(t.turns, et)
		chat = append(chat, tokenizer.Message{Role: "assistant", Content: text})
		if st.Done {
			t.reward = st.Reward
			break
		}
		// Close the assistant turn (unless it ended on <|im_end|>) and add the observation.
		var closing []int32
		if len(res.IDs) == 0 || res.IDs[len(res.IDs)-1] != c.imEnd {
			closing = []int32{c.imEnd}
		}
		// The observation turn as the chat template renders it: a user turn, or for
		// tool_response a tool turn (a user turn wrapping the text in <tool_response>).
		obsMsg, body := tokenizer.Message{Role: "user", Content: st.Observation}, st.Observation
		if r.Env.Observation.Format == retool.FormatToolResponse && len(st.ToolCalls) > 0 {
			obsMsg.Role, body = "tool", "<tool_response>\n"+st.Observation+"\n</tool_response>"
		}
		next = append(closing, c.o.Tokenizer.Encode("\n<|im_start|>user\n"+body+"<|im_end|>\n<|im_start|>assistant\n")...)
		if len(t.tokens)+len(next)+8 >= model.Bucket(r.Rollout.MaxTotalTokens) || res.Stop == rollout.StopContext {
			t.reward = c.weights.Compose(envs.Reward{FormatPenalty: 1}) // out of context: no answer
			break
		}
		add(next, false, nil)
		chat = append(chat, obsMsg)
		// Token-drift probe at the turn boundary: the context must read as the chat template renders it.
		want, err := tokenizer.RenderChat(chat, nil, true)
		if err == nil && c.o.Tokenizer.Decode(t.tokens, false) != want && t.drift == "" {
			t.drift = fmt.Sprintf("turn %d of %s", turn, t.task.ID)
		}
	}
	t.summary = env.Summary()
	return nil
}

// evaluate runs pass@k on the held-out tasks. A stop during it drops it (errStop): nothing of it
// is emitted or stored but its trajectories and progress.
func (c *Controller) evaluate(ctx context.Context, step int) (event.Eval, error) {
	r := c.r
	t0 := time.Now()
	tasks := c.heldout[:min(r.Eval.HeldoutTasks, len(c.heldout))]
	var batch []*traj
	for i, task := range tasks {
		for s := 0; s < r.Eval.NSamples; s++ {
			batch = append(batch, &traj{task: task, group: i, sample: s})
		}
	}
	c.noteEval(0, len(tasks))
	if _, err := c.rollout(ctx, step, event.PhaseEval, batch, uint64(r.Run.Seed)*1_000_003+uint64(step), r.Eval.Temperature); err != nil {
		return event.Eval{}, c.stopOr(ctx, err)
	}
	var val map[int]float64
	if len(c.validation) > 0 {
		var err error
		if val, err = c.validate(ctx, step); err != nil {
			return event.Eval{}, c.stopOr(ctx, err)
		}
	}
	if !c.enter(step, event.PhaseEval) { // a stop came as the last trajectory finished: dropped as announced
		return event.Eval{}, errStop
	}
	counts := make([][2]int, len(tasks))
	for _, t := range batch {
		counts[t.group][0]++
		if t.summary.Correct {
			counts[t.group][1]++
		}
	}
	ev, err := passAtK(step, tasks, counts, r.Eval.Ks)
	if err != nil {
		return ev, err
	}
	fp := envs.Fingerprint(tasks)
	switch {
	case c.first == nil:
		c.first = &store.Eval{Step: step, Counts: counts, Tasks: fp}
	case c.first.Tasks == fp:
		ev.Since, ev.Change = c.first.Step, event.ChangeSince(c.first.Counts, counts, r.Eval.Ks)
	}
	choose := ev.PassAtK
	if val != nil {
		ev.Validation, choose = val, val
	}
	var k int
	if _, err := fmt.Sscanf(r.EarlyStop.Metric, "pass@%d", &k); err == nil {
		if v := choose[k]; v > c.best {
			c.best, c.bestStep, c.sinceBest, ev.Best = v, step, 0, true
		} else {
			c.sinceBest++
			if r.EarlyStop.MaxDrop > 0 && c.best-v > r.EarlyStop.MaxDrop {
				c.dropped = fmt.Sprintf("early stop: %s fell to %.3f, more than %.3g below its best %.3f at step %d", r.EarlyStop.Metric, v, r.EarlyStop.MaxDrop, c.best, c.bestStep)
			}
		}
	}
	c.emit(ev)
	if c.o.Store != nil {
		if err := c.o.Store.PutEval(c.o.RunID, store.Eval{Step: step, PassAtK: ev.PassAtK, ByLevel: ev.ByLevel, Counts: counts, Tasks: fp, Validation: ev.Validation}); err != nil {
			return ev, err
		}
	}
	c.phase(step, "eval", t0)
	c.clock.evalDone(time.Since(t0).Seconds())
	c.evals++
	return ev, nil
}

// validate samples the validation tasks (eval.validation_samples each) and returns their pass@k
// for the ks the samples allow. Its trajectories are not shown or stored: they choose, not report.
func (c *Controller) validate(ctx context.Context, step int) (map[int]float64, error) {
	r := c.r
	var batch []*traj
	for i, task := range c.validation {
		for s := 0; s < r.Eval.ValidationSamples; s++ {
			batch = append(batch, &traj{task: task, group: i, sample: s})
		}
	}
	if _, err := c.rollout(ctx, step, event.PhaseValidate, batch, uint64(r.Run.Seed)*1_000_003+uint64(step)+500_009, r.Eval.Temperature); err != nil {
		return nil, err
	}
	counts := make([][2]int, len(c.validation))
	for _, t := range batch {
		counts[t.group][0]++
		if t.summary.Correct {
			counts[t.group][1]++
		}
	}
	out := map[int]float64{}
	for _, k := range r.Eval.Ks {
		if k > r.Eval.ValidationSamples {
			break
		}
		v, err := envs.MeanPassAtK(counts, k)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// passAtK is the eval event for per-task (samples, correct) counts: pass@k over all tasks, and
// over the tasks of each level when the tasks carry one.
func passAtK(step int, tasks []envs.Task, counts [][2]int, ks []int) (event.Eval, error) {
	levels := map[string][][2]int{}
	for i, t := range tasks {
		if l, ok := t.Meta["level"]; ok {
			levels[l] = append(levels[l], counts[i])
		}
	}
	mean := func(counts [][2]int) (map[int]float64, error) {
		p := make(map[int]float64, len(ks))
		for _, k := range ks {
			v, err := envs.MeanPassAtK(counts, k)
			if err != nil {
				return nil, err
			}
			p[k] = v
		}
		return p, nil
	}
	ev := event.Eval{Step: step}
	var err error
	if ev.PassAtK, err = mean(counts); err != nil {
		return ev, err
	}
	for l, lc := range levels {
		if ev.ByLevel == nil {
			ev.ByLevel = map[string]map[int]float64{}
		}
		if ev.ByLevel[l], err = mean(lc); err != nil {
			return ev, err
		}
	}
	return ev, nil
}

// save writes a checkpoint of the policy (and, when asked, optimizer state) and applies retention.
func (c *Controller) save(_ context.Context, step int, final bool) error {
	if c.o.Store == nil || step <= 0 || step == c.lastSaved {
		return nil
	}
	c.lastSaved = step
	ts, err := c.o.Policy.Params.Tensors(safetensors.F32)
	if err != nil {
		return err
	}
	m, v, adamStep := c.tr.Moments()
	cp := &store.Checkpoint{Manifest: store.Manifest{Run: c.o.RunID, Step: step, RecipeHash: c.r.Hash(),
		DataPosition: int64(step * c.r.Rollout.TasksPerStep),
		Metrics:      map[string]float64{"best": c.best, "best_step": float64(c.bestStep), "since_best": float64(c.sinceBest), "adam_step": float64(adamStep)}},
		Weights: ts, FileData: c.checkpointFiles()}
	if c.r.Checkpoint.SaveOptimizer {
		for i, spec := range c.tr.TrainedSpecs() { // a LoRA run's: the adapters
			for _, pair := range []struct {
				prefix string
				t      *tensors.Tensor
			}{{"m.", m[i]}, {"v.", v[i]}} {
				st, err := momentTensor(pair.prefix+spec.Name, spec.Dims, pair.t)
				if err != nil {
					return err
				}
				cp.Moments = append(cp.Moments, st)
			}
		}
	}
	if valueCoef(c.r) > 0 {
		if err := c.saveValueHead(cp); err != nil {
			return err
		}
	}
	if err := c.o.Store.SaveCheckpoint(cp); err != nil {
		return err
	}
	c.stopMu.Lock()
	c.st.saved = step
	c.stopMu.Unlock()
	var size int64
	for _, t := range ts {
		size += int64(len(t.Data))
	}
	c.emit(event.Checkpoint{Step: step, Bytes: size, Best: step == c.bestStep})
	if !final && c.r.Checkpoint.KeepLast > 0 {
		var pinned []int
		if m := c.manualBest.Load(); m > 0 {
			pinned = append(pinned, int(m))
		}
		if _, err := c.o.Store.Retain(c.o.RunID, "best", c.r.Checkpoint.KeepBest, c.r.Checkpoint.KeepLast, pinned...); err != nil {
			return err
		}
	}
	return nil
}

// saveValueHead puts ppo's value head in the checkpoint's optimizer-state file (it is not part
// of the HuggingFace model): its weights always, its AdamW moments with checkpoint.save_optimizer.
func (c *Controller) saveValueHead(cp *store.Checkpoint) error {
	names, values, m, v := c.tr.ValueHead()
	for i, name := range names {
		parts := []struct {
			prefix string
			t      *tensors.Tensor
		}{{"", values[i]}}
		if c.r.Checkpoint.SaveOptimizer {
			parts = append(parts, struct {
				prefix string
				t      *tensors.Tensor
			}{"m.", m[i]}, struct {
				prefix string
				t      *tensors.Tensor
			}{"v.", v[i]})
		}
		for _, p := range parts {
			vals, err := tensors.CopyFlatData[float32](p.t)
			if err != nil {
				return err
			}
			st, err := safetensors.FromFloat32(p.prefix+name, p.t.Shape().Dimensions, vals, safetensors.F32)
			if err != nil {
				return err
			}
			cp.Moments = append(cp.Moments, st)
		}
	}
	return nil
}

// restoreValueHead loads ppo's value head (and its moments, when saved) from a checkpoint.
func (c *Controller) restoreValueHead(cp *store.Checkpoint, src string) error {
	byName := map[string]*safetensors.Tensor{}
	for _, t := range cp.Moments {
		byName[t.Name] = t
	}
	names, cur, _, _ := c.tr.ValueHead()
	get := func(name string, like *tensors.Tensor) (*tensors.Tensor, error) {
		t, ok := byName[name]
		if !ok {
			return nil, nil
		}
		vals, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", src, name, err)
		}
		return tensors.FromFlatDataAndDimensions(vals, like.Shape().Dimensions...), nil
	}
	var values, m, v []*tensors.Tensor
	for i, name := range names {
		w, err := get(name, cur[i])
		if err != nil {
			return err
		}
		if w == nil {
			return fmt.Errorf("%s: the value head %s is missing; it was saved by a run without algorithm.name: ppo", src, name)
		}
		values = append(values, w)
		mt, err := get("m."+name, cur[i])
		if err != nil {
			return err
		}
		vt, err := get("v."+name, cur[i])
		if err != nil {
			return err
		}
		if mt != nil && vt != nil {
			m, v = append(m, mt), append(v, vt)
		}
	}
	if len(m) != len(names) {
		m, v = nil, nil // moments start from zero
	}
	return c.tr.SetValueHead(values, m, v)
}

// sandboxLine is the isolation model-written code runs under, for RunStart: the python executor's
// own description ("strict: …" or "NONE …"), "" for the Starlark executor (no files, no network).
func sandboxLine(e retool.Executor) string {
	if p, ok := e.(interface{ Isolation() string }); ok {
		return p.Isolation()
	}
	return ""
}
