package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"agentrl/engine/evalset"
	"agentrl/engine/event"
	"agentrl/engine/stopping"
	"agentrl/envs"
	"agentrl/store"
)

// EvalOnly makes a run an evaluation-only one (agentrl-tui eval): the controller loads the model
// as for training, runs its own evaluation once on the tasks of Set, records it as a run of kind
// store.KindEval and ends; it trains, saves and chooses nothing. Its pass@k is the training run's
// by construction: the same evaluate, the same tasks and the same seed (run.seed and the step).
type EvalOnly struct {
	// Set names the evaluation set: the tasks whose Meta["set"] is Set, the held-out tasks
	// without one being in evalset.Heldout and the validation tasks without one in
	// evalset.Validation.
	Set string
	// Store, Run and Step name a stored checkpoint to evaluate; Run "" evaluates the recipe's
	// model (model.path, or the built-in model). The evaluation is kept at Step, so that it
	// pairs with a training run's evaluation of the same step.
	Store, Run string
	Step       int
	// Of says what is evaluated, for the run record and the workbench: "model DIR",
	// "checkpoint RUN step N"; Open fills it in when it is "".
	Of string
}

// evalTasks is the tasks of evaluation set name, in the order evaluations score them (see
// evalset.Tasks).
func (c *Controller) evalTasks(name string) ([]envs.Task, error) {
	return evalset.Tasks(name, c.recipe, c.heldout, c.validation)
}

// runEval is Run for an evaluation-only run: the run record (kind eval, naming what it
// evaluates), RunStart, the evaluation of opts.Eval.Step as training runs evaluate (its phase,
// progress, trajectories and pass@k on the stream and in the store), and RunEnd. A stop drops
// the evaluation, and then nothing of it is kept but the run's end.
func (c *Controller) runEval(ctx context.Context) (err error) {
	r, e := c.recipe, c.opts.Eval
	if _, err := c.evalTasks(e.Set); err != nil {
		return err
	}
	start := event.RunStart{RunID: c.opts.RunID, Name: r.Run.Name, Recipe: c.opts.RecipePath, Backend: c.opts.Backend, Model: r.Model.Path, Kernels: c.opts.Kernels, CompileCache: c.opts.CompileCache, Reward: RewardWeightsOf(r),
		Attention: c.attention, Sandbox: sandboxLine(c.players.Exec), Compiles: byKind(c.compiles.Snapshot()), Evaluates: e.Of + ", " + e.Set}
	if c.opts.Store != nil {
		yaml, _ := json.Marshal(r)
		if err := c.opts.Store.PutRun(store.Run{ID: c.opts.RunID, Name: r.Run.Name, Recipe: c.opts.RecipePath, RecipeYAML: string(yaml), RecipeHash: r.Hash(),
			Created: time.Now(), Status: "running", Kind: store.KindEval, Evaluated: e.Of, EvalSet: e.Set, EvalStep: e.Step, Grader: GraderOf(r)}); err != nil {
			return err
		}
	}
	work, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.stop.Begin(cancel)
	defer context.AfterFunc(ctx, func() { c.Stop("interrupted") })()
	c.emit(start)
	defer func() { c.finish(err) }()
	c.emit(c.ledger())
	if !c.stop.Enter(e.Step, event.PhaseEval) {
		return nil
	}
	if _, err := c.evaluate(work, e.Step); err != nil && !errors.Is(err, stopping.ErrStop) {
		return err
	}
	return c.storePhases(e.Step)
}
