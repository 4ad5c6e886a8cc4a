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

	"agentrl/engine/device"
	"agentrl/engine/event"
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
	Monitor    *device.Monitor // NVML readings for the memory ledger; nil or without a GPU: none
	// LogProbAlarm is the max |rollout − trainer| log-prob allowed before an alarm (default 1e-3).
	LogProbAlarm float64
	// Resume continues a run from this checkpoint: weights, optimizer moments, data position and
	// the best-so-far bookkeeping. The run record in the store must exist.
	Resume *store.Checkpoint
}

// Controller runs one recipe.
type Controller struct {
	o          Options
	r          *recipes.Recipe
	gen        *rollout.Generator
	tr         *train.Trainer
	exec       retool.Executor
	pool       *retool.Pool
	train      []envs.Task
	heldout    []envs.Task
	weights    retool.Weights
	stopAfter  atomic.Bool
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
	lastSaved  int
	start      int // first step to run (1, or the step after a resumed checkpoint)
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
	c := &Controller{o: o, r: r, best: -1, start: 1}
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
	if c.exec, err = retool.NewExecutor(r.Env.Executor, lim, r.Env.Session); err != nil {
		return nil, err
	}
	c.pool = retool.NewPool(2)
	switch r.Env.Tasks.Source {
	case "jsonl":
		all, err := envs.LoadJSONL(r.Env.Tasks.JSONL.Path, envs.Fields{ID: r.Env.Tasks.JSONL.IDField, Prompt: r.Env.Tasks.JSONL.PromptField, Answer: r.Env.Tasks.JSONL.AnswerField})
		if err != nil {
			return nil, err
		}
		n := min(r.Env.Tasks.HeldoutSize, len(all)/2)
		c.heldout, c.train = all[:n], all[n:]
	default:
		c.train, c.heldout, err = retool.Synthetic{Levels: r.Env.Tasks.Synthetic.Levels, Seed: uint64(r.Env.Tasks.Synthetic.Seed)}.Split(r.Env.Tasks.TrainSize, r.Env.Tasks.HeldoutSize)
		if err != nil {
			return nil, err
		}
	}
	c.weights = retool.Weights{Outcome: r.Reward.Outcome, Process: r.Reward.Process, Shaping: r.Reward.Shaping, FormatPenalty: r.Reward.FormatPenalty}
	slots := int(r.Memory.KVSlots)
	if slots <= 0 {
		slots = min(16, r.Rollout.TasksPerStep*r.Rollout.GroupSize)
	}
	c.gen, err = rollout.New(o.Policy, rollout.Config{
		Slots: slots, MaxLen: model.Bucket(r.Rollout.MaxTotalTokens),
		Truncation: r.Rollout.TopK > 0 || r.Rollout.TopP < 1,
		Decode:     func(ids []int32) string { return o.Tokenizer.Decode(ids, false) },
	})
	if err != nil {
		return nil, err
	}
	c.tr, err = train.New(o.Policy, train.Config{
		ClipLow: r.Algorithm.ClipLow, ClipHigh: r.Algorithm.ClipHigh, KLCoef: klLoss(r), KLEstimator: r.Algorithm.KLEstimator,
		Aggregation: r.Algorithm.Aggregation, LR: r.Train.LR, WeightDecay: r.Train.WeightDecay,
		Beta1: r.Train.Beta1, Beta2: r.Train.Beta2, Eps: r.Train.Eps, GradClip: r.Train.GradClip, LogitsChunk: 32,
	})
	if err != nil {
		c.gen.Close()
		return nil, err
	}
	if o.Resume != nil {
		if err := c.restore(o.Resume); err != nil {
			c.gen.Close()
			return nil, err
		}
	}
	return c, nil
}

// restore loads a checkpoint's weights, moments and bookkeeping.
func (c *Controller) restore(cp *store.Checkpoint) error {
	src := fmt.Sprintf("checkpoint %s/%d", cp.Run, cp.Step)
	if err := c.o.Policy.Params.SetFromTensors(cp.Weights, src); err != nil {
		return err
	}
	if len(cp.Moments) > 0 {
		byName := map[string]*safetensors.Tensor{}
		for _, t := range cp.Moments {
			byName[t.Name] = t
		}
		var m, v []*tensors.Tensor
		for _, spec := range c.o.Policy.Params.Specs {
			for _, pre := range []string{"m.", "v."} {
				t, ok := byName[pre+spec.Name]
				if !ok {
					return fmt.Errorf("%s: optimizer moment %s%s is missing", src, pre, spec.Name)
				}
				vals, err := t.Float32()
				if err != nil {
					return err
				}
				tt := tensors.FromFlatDataAndDimensions(vals, spec.Dims...)
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
	c.start = cp.Step + 1
	c.best, c.bestStep, c.sinceBest = cp.Metrics["best"], int(cp.Metrics["best_step"]), int(cp.Metrics["since_best"])
	c.lastSaved = cp.Step
	return nil
}

func klLoss(r *recipes.Recipe) float64 {
	if r.Algorithm.KLMode == "loss" {
		return r.Algorithm.KLCoef
	}
	return 0
}

// Close releases the generator.
func (c *Controller) Close() { c.gen.Close() }

// StopAfterStep asks the run to end after the step in progress (saving a checkpoint); a paused
// run is released so that it can stop.
func (c *Controller) StopAfterStep() {
	c.stopAfter.Store(true)
	c.Resume()
}

// Pause holds the run before its next step (the step in progress finishes); Resume releases it.
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

// waitIfPaused blocks while the run is paused (Resume and StopAfterStep release it) or until ctx ends.
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
// its best from now on, and the end of the run keeps that choice.
func (c *Controller) MarkBest(step int) error {
	if c.o.Store == nil {
		return errors.New("engine: this run has no store to mark a checkpoint in")
	}
	if _, err := c.o.Store.Manifest(c.o.RunID, step); err != nil {
		return fmt.Errorf("mark best: step %d has no checkpoint: %w", step, err)
	}
	c.manualBest.Store(int64(step))
	return c.updateRun(func(r *store.Run) { r.BestStep = step })
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
	params := c.o.Policy.Params.Bytes()
	cfg := c.gen.Config()
	l := event.Ledger{Backend: c.o.Backend, Components: map[string]int64{
		"policy weights":    params,
		"reference weights": c.o.Reference.Params.Bytes(),
		"KV cache":          model.CacheBytes(c.o.Policy.Config, c.o.Policy.Options().Compute, cfg.Slots, cfg.MaxLen),
		"AdamW moments":     2 * params, // float32 m and v, one of each per parameter
	}}
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
	adv       []float32
	drift     string // a token-drift finding, "" when the context matched the chat rendering
}

// Run executes the recipe until max_steps, early stopping, StopAfterStep or ctx's end.
func (c *Controller) Run(ctx context.Context) (err error) {
	r := c.r
	c.emit(event.RunStart{RunID: c.o.RunID, Name: r.Run.Name, Recipe: c.o.RecipePath, TotalSteps: r.Run.MaxSteps, Backend: c.o.Backend, Model: r.Model.Path})
	if c.o.Store != nil && c.o.Resume != nil {
		run, err := c.o.Store.GetRun(c.o.RunID)
		if err != nil {
			return err
		}
		run.Status, run.StopReason = "running", ""
		if err := c.o.Store.PutRun(run); err != nil {
			return err
		}
	} else if c.o.Store != nil {
		yaml, _ := json.Marshal(r)
		if err := c.o.Store.PutRun(store.Run{ID: c.o.RunID, Name: r.Run.Name, Recipe: c.o.RecipePath, RecipeYAML: string(yaml), RecipeHash: r.Hash(), Created: time.Now(), Status: "running", TotalSteps: r.Run.MaxSteps}); err != nil {
			return err
		}
	}
	status, reason, step := "finished", "", 0
	defer func() {
		if err != nil {
			status, reason = "failed", err.Error()
		}
		if c.o.Store != nil {
			_ = c.updateRun(func(run *store.Run) { run.Status, run.StopReason, run.BestStep = status, reason, c.bestChoice() })
		}
		c.emit(event.RunEnd{Status: status, Reason: reason, BestStep: c.bestChoice()})
	}()
	c.emit(c.ledger())
	if r.Eval.AtStart && c.o.Resume == nil {
		if _, err := c.evaluate(ctx, 0); err != nil {
			return err
		}
	}
	for step = c.start; step <= r.Run.MaxSteps; step++ {
		c.waitIfPaused(ctx)
		if c.stopAfter.Load() && step > c.start {
			status, reason = "stopped", "stopped by the user"
			return c.save(ctx, step-1, true)
		}
		err := c.step(ctx, step)
		c.emit(c.ledger())
		if err != nil {
			if ctx.Err() != nil {
				status, reason = "stopped", "interrupted"
				return c.save(context.Background(), step-1, true)
			}
			return err
		}
		if ctx.Err() != nil {
			status, reason = "stopped", "interrupted"
			return c.save(context.Background(), step, true)
		}
		if c.stopAfter.Load() {
			status, reason = "stopped", "stopped by the user"
			return c.save(ctx, step, true)
		}
		if c.dropped != "" {
			status, reason = "stopped", c.dropped
			return c.save(ctx, step, true)
		}
		if r.EarlyStop.Patience > 0 && c.sinceBest >= r.EarlyStop.Patience {
			status, reason = "stopped", fmt.Sprintf("early stop: %s did not improve for %d evaluations", r.EarlyStop.Metric, c.sinceBest)
			return c.save(ctx, step, true)
		}
	}
	return c.save(ctx, r.Run.MaxSteps, true) // the final weights are always kept
}

func (c *Controller) phase(step int, name string, start time.Time) {
	c.emit(event.Phase{Step: step, Phase: name, Seconds: time.Since(start).Seconds()})
}

// step is one training step.
func (c *Controller) step(ctx context.Context, step int) error {
	r := c.r
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(uint64(r.Run.Seed), uint64(step)))
	var batch []*traj
	for i := 0; i < r.Rollout.TasksPerStep; i++ {
		task := c.train[((step-1)*r.Rollout.TasksPerStep+i)%len(c.train)]
		for s := 0; s < r.Rollout.GroupSize; s++ {
			batch = append(batch, &traj{task: task, group: i, sample: s})
		}
	}
	if err := c.rollout(ctx, step, event.PhaseRollout, batch, rng.Uint64(), r.Rollout.Temperature); err != nil {
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
	hybrid := r.Algorithm.Name == "hybrid" || r.Algorithm.Name == "opd"
	for _, t := range batch {
		if r.PRM.Kind == "rules" {
			t.reward.Process = retool.RulesProcessScore(t.summary)
		}
		t.reward = c.weights.Compose(t.reward)
		if hybrid && r.Hinter.Kind == "rules" {
			t.hint = retool.RulesHint(t.summary)
		}
	}
	c.phase(step, "score", t0)

	t0 = time.Now()
	teacher := make([][]float32, len(batch))
	for i, t := range batch {
		if t.hint == "" {
			continue
		}
		tp, err := c.prompt(t.task, t.hint)
		if err != nil {
			return err
		}
		seq := append(append([]int32{}, tp...), t.tokens[t.promptLen:]...)
		s, err := c.o.Reference.Score([][]int32{seq})
		if err != nil {
			return err
		}
		// Align: the teacher's log-prob of student token j (j ≥ promptLen) is at index
		// len(tp) + (j − promptLen) − 1 of its next-token log-probs.
		teacher[i] = make([]float32, len(t.tokens))
		for j := t.promptLen; j < len(t.tokens); j++ {
			teacher[i][j] = s.NextLogProbs[0][len(tp)+j-t.promptLen-1]
		}
	}
	c.phase(step, "reference", t0)

	t0 = time.Now()
	rewards := make([]float64, len(batch))
	groups := make([]int, len(batch))
	for i, t := range batch {
		rewards[i], groups[i] = t.reward.Total, t.group
	}
	seqAdv, err := train.GRPO(rewards, groups, r.Algorithm.StdNormalize, 1e-6)
	if err != nil {
		return err
	}
	hinted := 0
	for i, t := range batch {
		var opd []float64
		if teacher[i] != nil {
			hinted++
			if opd, err = train.OPD(teacher[i], t.lps, t.mask); err != nil {
				return err
			}
			opd = train.CenterClip(opd, t.mask, opdClip)
		}
		adv := train.Hybrid(seqAdv[i], opd, t.mask, r.Algorithm.OPDLambda)
		t.adv = make([]float32, len(adv))
		for j, a := range adv {
			t.adv[j] = float32(a)
		}
	}
	c.phase(step, "advantage", t0)

	t0 = time.Now()
	mb := int(r.Train.MicroBatch)
	if mb <= 0 {
		mb = 8
	}
	lr := train.LR(r.Train.LR, step, r.Train.WarmupSteps, r.Run.MaxSteps, r.Train.Schedule)
	metrics := map[string]float64{"lr": lr}
	var loss, probeMax float64
	updates := 0
	for start := 0; start < len(batch); start += mb {
		var seqs []train.Sequence
		for _, t := range batch[start:min(start+mb, len(batch))] {
			seqs = append(seqs, train.Sequence{Tokens: t.tokens, LossMask: t.mask, OldLogProbs: t.lps, Advantages: t.adv})
		}
		b, err := train.Pack(seqs, 0)
		if err != nil {
			return err
		}
		m, err := c.tr.Step(b, lr)
		if err != nil {
			return err
		}
		if updates == 0 { // before any update of this step: rollout and trainer used the same weights
			probeMax = m.MaxLogProbDiff
			metrics["logprob_diff_mean"] = m.MeanLogProbDiff
		}
		loss += m.Loss
		metrics["clip_frac"] += m.ClipFrac
		metrics["grad_norm"] += m.GradNorm
		updates++
	}
	metrics["loss"] = loss / float64(updates)
	metrics["clip_frac"] /= float64(updates)
	metrics["grad_norm"] /= float64(updates)
	metrics["logprob_diff_max"] = probeMax
	if probeMax > c.o.LogProbAlarm {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmLogProbMismatch, Value: probeMax, Threshold: c.o.LogProbAlarm,
			Message: "rollout and trainer log-probs disagree: the inference weights may be stale"})
	}
	c.phase(step, "train", t0)

	// The generator reads the policy's parameter tensors, which the trainer replaced: the
	// inference copy is the master copy on this path, so the sync is checked, not copied.
	t0 = time.Now()
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
	st := c.gen.Stats()
	metrics["tokens_per_s"] = float64(st.Tokens) / max(st.StepTime.Seconds(), 1e-9)
	c.emit(event.StepMetrics{Step: step, Metrics: metrics})

	for _, t := range batch {
		c.emit(c.trajectoryEvent(step, t))
	}
	if r.Eval.Every > 0 && step%r.Eval.Every == 0 {
		if _, err := c.evaluate(ctx, step); err != nil {
			return err
		}
	}
	t0 = time.Now()
	if c.o.Store != nil {
		if err := c.o.Store.PutMetrics(c.o.RunID, step, metrics); err != nil {
			return err
		}
		var recs []store.TrajectoryRecord
		for _, t := range batch {
			data, _ := json.Marshal(c.trajectoryEvent(step, t))
			recs = append(recs, store.TrajectoryRecord{Step: step, TaskID: t.task.ID, Sample: t.group*r.Rollout.GroupSize + t.sample,
				Reward: t.reward.Total, Correct: t.summary.Correct, Hinted: t.hint != "", Data: data})
		}
		if err := c.o.Store.PutTrajectories(c.o.RunID, recs); err != nil {
			return err
		}
		if r.Checkpoint.Every > 0 && step%r.Checkpoint.Every == 0 {
			if err := c.save(ctx, step, false); err != nil {
				return err
			}
		}
	}
	c.phase(step, "save", t0)
	return nil
}

func (c *Controller) trajectoryEvent(step int, t *traj) event.Trajectory {
	e := event.Trajectory{Step: step, TaskID: t.task.ID, Prompt: t.task.Prompt, Group: t.group, Sample: t.sample, Turns: t.turns,
		Reward: t.reward, Correct: t.summary.Correct, Hint: t.hint, Tokens: len(t.tokens), ToolErrors: t.summary.ToolErrors}
	for j := t.promptLen; j < len(t.tokens); j++ {
		if t.mask[j] {
			e.Pieces = append(e.Pieces, c.o.Tokenizer.Decode(t.tokens[j:j+1], false))
			if t.adv != nil {
				e.Advantages = append(e.Advantages, t.adv[j])
			}
		}
	}
	return e
}

// prompt renders the opening messages with the generation prompt; a hint (bridge thought) is
// appended to the user's problem for the teacher.
func (c *Controller) prompt(task envs.Task, hint string) ([]int32, error) {
	user := task.Prompt
	if hint != "" {
		user += "\n\nHint: " + hint
	}
	text, err := tokenizer.RenderChat([]tokenizer.Message{{Role: "system", Content: retool.DefaultSystem}, {Role: "user", Content: user}}, nil, true)
	if err != nil {
		return nil, err
	}
	return c.o.Tokenizer.Encode(text), nil
}

// rollout runs every trajectory of the batch concurrently through the generator, reporting
// progress as phase (rollout, or eval for the held-out tasks).
func (c *Controller) rollout(ctx context.Context, step int, phase string, batch []*traj, seed uint64, temperature float64) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(batch))
	var done atomic.Int64
	for i, t := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.runTrajectory(ctx, t, seed+uint64(i)*7919, temperature); err != nil {
				errs <- err
				return
			}
			c.emit(event.Progress{Step: step, Phase: phase, Done: int(done.Add(1)), Total: len(batch)})
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// runTrajectory plays one multi-turn episode. The trained tokens are exactly the sampled ones plus
// the tokenized template pieces and observations: decoded text is never re-tokenized.
func (c *Controller) runTrajectory(ctx context.Context, t *traj, seed uint64, temperature float64) error {
	r := c.r
	env, err := retool.New(retool.Config{Executor: c.exec, Pool: c.pool, MaxTurns: r.Rollout.MaxTurns, Format: retool.FormatInterpreter, MaxObsChars: r.Env.Observation.MaxChars, Weights: c.weights})
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
		next = append(closing, c.o.Tokenizer.Encode("\n<|im_start|>user\n"+st.Observation+"<|im_end|>\n<|im_start|>assistant\n")...)
		if len(t.tokens)+len(next)+8 >= model.Bucket(r.Rollout.MaxTotalTokens) || res.Stop == rollout.StopContext {
			t.reward = c.weights.Compose(envs.Reward{FormatPenalty: 1}) // out of context: no answer
			break
		}
		add(next, false, nil)
		chat = append(chat, tokenizer.Message{Role: "user", Content: st.Observation})
		// Token-drift probe at the turn boundary: the context must read as the chat template renders it.
		want, err := tokenizer.RenderChat(chat, nil, true)
		if err == nil && c.o.Tokenizer.Decode(t.tokens, false) != want && t.drift == "" {
			t.drift = fmt.Sprintf("turn %d of %s", turn, t.task.ID)
		}
	}
	t.summary = env.Summary()
	return nil
}

// evaluate runs pass@k on the held-out tasks.
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
	if err := c.rollout(ctx, step, event.PhaseEval, batch, uint64(r.Run.Seed)*1_000_003+uint64(step), r.Eval.Temperature); err != nil {
		return event.Eval{}, err
	}
	counts := make([][2]int, len(tasks))
	for _, t := range batch {
		counts[t.group][0]++
		if t.summary.Correct {
			counts[t.group][1]++
		}
	}
	ev := event.Eval{Step: step, PassAtK: map[int]float64{}}
	for _, k := range r.Eval.Ks {
		p, err := envs.MeanPassAtK(counts, k)
		if err != nil {
			return ev, err
		}
		ev.PassAtK[k] = p
	}
	var k int
	if _, err := fmt.Sscanf(r.EarlyStop.Metric, "pass@%d", &k); err == nil {
		if v := ev.PassAtK[k]; v > c.best {
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
		if err := c.o.Store.PutEval(c.o.RunID, store.Eval{Step: step, PassAtK: ev.PassAtK}); err != nil {
			return ev, err
		}
	}
	c.phase(step, "eval", t0)
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
		Weights: ts, FileData: c.o.ModelFiles}
	if c.r.Checkpoint.SaveOptimizer {
		for i, spec := range c.o.Policy.Params.Specs {
			for _, pair := range []struct {
				prefix string
				t      *tensors.Tensor
			}{{"m.", m[i]}, {"v.", v[i]}} {
				vals, err := tensors.CopyFlatData[float32](pair.t)
				if err != nil {
					return err
				}
				st, err := safetensors.FromFloat32(pair.prefix+spec.Name, spec.Dims, vals, safetensors.F32)
				if err != nil {
					return err
				}
				cp.Moments = append(cp.Moments, st)
			}
		}
	}
	if err := c.o.Store.SaveCheckpoint(cp); err != nil {
		return err
	}
	var size int64
	for _, t := range ts {
		size += int64(len(t.Data))
	}
	c.emit(event.Checkpoint{Step: step, Bytes: size, Best: step == c.bestStep})
	if !final && c.r.Checkpoint.KeepLast > 0 {
		if _, err := c.o.Store.Retain(c.o.RunID, "best", c.r.Checkpoint.KeepBest, c.r.Checkpoint.KeepLast); err != nil {
			return err
		}
	}
	return nil
}
