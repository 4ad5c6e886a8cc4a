// Package engine runs a recipe: the controller loop (rollout → score → reference/teacher forward →
// advantages → update → sync → eval → save) over the model, the generator, the environment, the
// trainer and the store, emitting plain event values on one channel.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"agentrl/engine/best"
	"agentrl/engine/compiles"
	"agentrl/engine/device"
	"agentrl/engine/eta"
	"agentrl/engine/event"
	"agentrl/engine/hint"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/play"
	"agentrl/engine/record"
	"agentrl/engine/remote"
	"agentrl/engine/residency"
	"agentrl/engine/rollout"
	"agentrl/engine/stopping"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/recipes"
	"agentrl/store"
)

// Options wire a run.
type Options struct {
	Recipe     *recipes.Recipe
	RecipePath string
	RunID      string
	Policy     *model.Model // trained in place
	Reference  *model.Model // frozen reference and teacher; an evaluation-only run (Eval) has none
	Tokenizer  *tokenizer.Tokenizer
	Store      *store.Store      // nil: nothing is saved
	ModelFiles map[string][]byte // config.json and tokenizer files, saved with checkpoints
	Events     chan<- event.Event
	Backend    string
	Kernels    string // the CPU matrix kernels and why (event.RunStart.Kernels); "" on a GPU
	// CompileCache is where the backend keeps compiled programs between runs, or why nowhere
	// (event.RunStart.CompileCache: device.Choice.CacheNote).
	CompileCache string
	Monitor      *device.Monitor // NVML readings for the memory ledger; nil or without a GPU: none
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
	// PRM and PRMTokenizer are prm.kind model's own weights and tokenizer when prm.model names a
	// folder (loaded by Open); nil otherwise (the PRM is the reference, the policy or an endpoint).
	PRM          *model.Model
	PRMTokenizer *tokenizer.Tokenizer
	// Eval makes the run an evaluation-only one (see EvalOnly); nil trains.
	Eval *EvalOnly
	// Log receives the lines a user should see while the run is set up: how far a long dataset
	// read has come (nil: none).
	Log io.Writer
	// hooks are what tests replace or watch in the run (nothing: the run's own behaviour).
	hooks hooks
}

// Controller runs one recipe.
type Controller struct {
	opts       Options
	recipe     *recipes.Recipe
	gen        *rollout.Generator
	prmGen     *rollout.Generator // the model PRM's own engine (prm.kind model on the reference or a folder); nil otherwise
	evalGen    *rollout.Generator // the evaluation's own engine (eval.max_total_tokens longer than rollout's); nil otherwise
	trainer    *train.Trainer
	dev        *residency.Device // what is on the device when: the inference copy, the KV cache, master weights, moments, the reference
	agentEnv   *play.AgentEnv    // env.name external: the endpoint and the agent runner; nil for retool
	hints      *hint.Hinting     // the hinter, the process scorer and the hint probes
	probe      hint.Probe        // the step's hint-usefulness probe (reference phase)
	players    *play.Phase       // the generation phases: trajectories, tickets, tools
	remote     *remote.Link      // rollout.engines: the remote engines the rollout generates on (engines.go); nil: the local engine
	rec        *record.Recorder  // what the store keeps of the events emitted (nil: no store)
	attention  string            // the attention path whole-sequence forwards take and why (event.RunStart.Attention)
	partial    partialStep       // the step's partial rollout (rollout.partial), for its metrics and events
	remoteTok  int64             // the tokens rollout.engines generated in the step's rollout
	train      []envs.Task
	heldout    []envs.Task
	validation []envs.Task // eval.validation_tasks: early stopping and the best checkpoint are chosen on them
	pauseMu    sync.Mutex
	paused     chan struct{} // non-nil while paused; closed on resume
	runMu      sync.Mutex    // serialises read-modify-write of the stored run record
	imEnd      int32
	stops      []int32
	best       *best.Tracker // the best checkpoint: the automatic choice, early stopping, the user's mark
	// first is the run's first evaluation, which later ones are compared with task by task.
	first     *store.Eval
	lastSaved int
	start     int // first step to run (1, or the step after a resumed checkpoint)
	// phases holds the seconds each phase of step phasesStep took, stored with the step.
	phases     map[string]float64
	phasesStep int

	stop     *stopping.Stopper // the stopping model: where the run is, the stop asked for and what it keeps
	end      event.RunEnd      // the run's end, once Run returned
	clock    eta.Clock         // step and evaluation times, for the ETA
	evals    int               // evaluations finished (a resumed run's stored ones too)
	compiles *compiles.Counter
	compiled compiles.Snapshot // the counter at the last step's metrics
}

// Close releases the generator, the inference weights and the trainer's graphs and moments.
func (c *Controller) Close() {
	c.players.DropPaused()
	c.agentEnv.Close()
	if c.gen != nil {
		c.gen.Close()
	}
	if c.prmGen != nil {
		c.prmGen.Close()
	}
	if c.evalGen != nil {
		c.evalGen.Close()
	}
	if c.dev.Infer != nil {
		c.dev.Infer.Close()
	}
	c.trainer.Close()
}

// remoteOnly says that nothing decodes the policy on this device: rollout.engines generate the
// rollouts and evaluations, and no judge generates with the policy here (ledger.LocalEngineFor),
// so the run builds no inference copy and no local generator, as its memory plan counts.
func (c *Controller) remoteOnly() bool {
	return len(c.recipe.Rollout.Engines) > 0 && ledger.LocalEngineFor(c.recipe) == ""
}

// RunID is the id the run is stored under (the launch's, or the first free one after it: see
// store.FreeRunID).
func (c *Controller) RunID() string { return c.opts.RunID }

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
	if c.opts.Store == nil {
		return errors.New("engine: this run has no store to mark a checkpoint in")
	}
	if _, err := c.opts.Store.Manifest(c.opts.RunID, step); err != nil {
		return fmt.Errorf("mark best: step %d has no checkpoint: %w", step, err)
	}
	c.best.Mark(step)
	return c.updateRun(func(r *store.Run) { r.BestStep, r.BestPinned = step, true })
}

// Export writes the checkpoint of step as a HuggingFace folder next to the store
// (export/RUN-stepN) and returns its path.
func (c *Controller) Export(step int) (string, error) {
	if c.opts.Store == nil {
		return "", errors.New("engine: this run has no store to export from")
	}
	dir := filepath.Join(filepath.Dir(c.opts.Store.Path()), "export", fmt.Sprintf("%s-step%d", c.opts.RunID, step))
	if err := c.opts.Store.Export(c.opts.RunID, step, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// ledger reports what the engine holds on the device, by component, with NVML's reading of the
// whole device when there is one (ok=false on the CPU backend: then only the components count).
func (c *Controller) ledger() event.Ledger {
	params, base := residency.ParamBytes(c.opts.Policy)
	l := event.Ledger{Backend: c.opts.Backend, Components: map[string]int64{}}
	if c.gen != nil { // none when rollout.engines generate everything
		cfg := c.gen.Config()
		l.Components["inference weights"] = c.dev.Infer.Bytes()
		l.Components["KV cache"] = model.CacheBytes(c.opts.Policy.Config, c.opts.Policy.Options().Compute, cfg.Slots, cfg.MaxLen)
	}
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
	if c.trainer != nil { // an evaluation-only run has neither
		fp := c.trainer.Footprint()
		put("master weights", fp.MasterWeights, params)
		put("AdamW moments", fp.OptimizerMoments, fp.OptimizerMoments+fp.HostMoments)
	}
	switch {
	case base > 0: // LoRA: one frozen base, the reference being that base with the adapters off
		l.Components["base weights"] = base
	case c.opts.Reference != nil: // an evaluation-only run has none
		put("reference weights", residency.DeviceBytes(c.opts.Reference.Params.Values), c.opts.Reference.Params.Bytes())
	}
	if c.opts.Monitor != nil {
		if rd, ok := c.opts.Monitor.Read(); ok {
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
	run, err := c.opts.Store.GetRun(c.opts.RunID)
	if err != nil {
		return err
	}
	fn(&run)
	return c.opts.Store.PutRun(run)
}

func (c *Controller) emit(e event.Event) {
	c.rec.Observe(e)
	c.opts.hooks.emitted(e)
	if c.opts.Events != nil {
		c.opts.Events <- e
	}
}

// Run executes the recipe until max_steps, early stopping, Stop or ctx's end (which stops the
// run as Stop("interrupted") does). Whatever ends it, the run saves its last trained step and
// records its end; see engine/stopping for what a stop keeps.
func (c *Controller) Run(ctx context.Context) (err error) {
	if c.opts.Eval != nil {
		return c.runEval(ctx)
	}
	r := c.recipe
	start := event.RunStart{RunID: c.opts.RunID, Name: r.Run.Name, Recipe: c.opts.RecipePath, TotalSteps: r.Run.MaxSteps, Backend: c.opts.Backend, Model: r.Model.Path, Kernels: c.opts.Kernels, Reward: RewardWeightsOf(r),
		Attention: c.attention, Sandbox: sandboxLine(c.players.Exec), Compiles: byKind(c.compiles.Snapshot()), CompileCache: c.opts.CompileCache}
	if err := c.recordStart(&start); err != nil {
		return err
	}
	// Generation runs under work, which a stop cancels when its plan drops what is in progress.
	work, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.stop.Begin(cancel)
	defer context.AfterFunc(ctx, func() { c.Stop("interrupted") })()
	c.emit(start)
	defer func() { err = c.storeFailure(err); c.finish(err) }() // a store write the disk failed: one line (engine/diskspace)
	c.emit(c.ledger())
	if r.Eval.AtStart && c.opts.Resume == nil && c.stop.Enter(0, event.PhaseEval) {
		if _, err := c.evaluate(work, 0); err != nil && !errors.Is(err, stopping.ErrStop) {
			return err
		}
		if err := c.storePhases(0); err != nil {
			return err
		}
	}
	for step := c.start; step <= r.Run.MaxSteps; step++ {
		c.stop.Pass(step-1, "")
		c.waitIfPaused(work)
		if c.stop.Stopping() {
			break
		}
		if err := c.step(work, step); err != nil && !errors.Is(err, stopping.ErrStop) {
			return err
		}
		c.emit(c.ledger())
		c.stop.Pass(step, "")
		switch early := c.best.EarlyStop(); {
		case c.stop.Stopping():
		case early != "":
			c.decide(early, false)
		case step == r.Run.MaxSteps:
			c.decide(fmt.Sprintf("all %d steps done", r.Run.MaxSteps), true)
		}
		if c.stop.Stopping() {
			break
		}
	}
	c.decide(fmt.Sprintf("all %d steps done", r.Run.MaxSteps), true) // a resumed run with no step left
	return c.save(context.Background(), c.stop.Trained(), true)      // the final weights are always kept
}

// recordStart stores the run record of a run starting (a resumed one's marked running again, its
// pinned best step kept, and said in start).
func (c *Controller) recordStart(start *event.RunStart) error {
	r := c.recipe
	if c.opts.Store != nil && c.opts.Resume != nil {
		run, err := c.opts.Store.GetRun(c.opts.RunID)
		if err != nil {
			return err
		}
		run.Status, run.StopReason, run.StopDetail, run.Ended = "running", "", "", time.Time{}
		if run.BestPinned {
			c.best.Mark(run.BestStep)
			start.MarkedBest = run.BestStep
		}
		if err := c.opts.Store.PutRun(run); err != nil {
			return err
		}
	} else if c.opts.Store != nil {
		yaml, _ := json.Marshal(r)
		if err := c.opts.Store.PutRun(store.Run{ID: c.opts.RunID, Name: r.Run.Name, Recipe: c.opts.RecipePath, RecipeYAML: string(yaml), RecipeHash: r.Hash(), Created: time.Now(), Status: "running", TotalSteps: r.Run.MaxSteps, Grader: GraderOf(r)}); err != nil {
			return err
		}
	}
	return nil
}
