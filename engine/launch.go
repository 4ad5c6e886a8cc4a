package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/hint"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/residency"
	"agentrl/engine/tokenizer"
	"agentrl/recipes"
	"agentrl/store"
)

// Launch describes a run to set up from a validated recipe.
type Launch struct {
	Recipe     *recipes.Recipe
	RecipePath string
	RunID      string
	// Resume continues RunID from its latest checkpoint in the recipe's store.
	Resume bool
	// Builtin returns the built-in model's folder; it is called only when the recipe names no model.
	Builtin func() (string, error)
	Events  chan<- event.Event
	// Kernels is the CPU matrix kernel set the process runs and why (see device.ChooseKernels);
	// it goes in the run's first event. "" on a GPU.
	Kernels string
	// Log receives the few lines a user should see before the first event: which backend and why,
	// the memory plan (on a GPU, and on the CPU for a real model), the step a resumed run starts from.
	Log io.Writer
	// Eval makes the run an evaluation-only one (agentrl-tui eval; see EvalOnly); nil trains.
	Eval *EvalOnly
}

// Session is a run ready to start: its controller and the store it writes to. Close releases both.
type Session struct {
	*Controller
	Store *store.Store
	// Cache is the XLA backend's compilation cache (nil on the Go backend), whose totals the
	// command prints when the run ends.
	Cache *device.CompileCache
	mon   *device.Monitor
}

// Close releases the controller, the NVML monitor and the store, in that order.
func (s *Session) Close() {
	s.Controller.Close()
	s.mon.Close()
	s.Store.Close()
}

// Open sets a run up: it opens the backend the recipe asks for, loads the tokenizer, the policy
// and the reference model, opens the store (and, to resume, the run's latest checkpoint), sizes
// what the recipe leaves on auto from the device's memory, and builds the controller.
//
// An evaluation-only run (l.Eval) of a stored checkpoint loads it as the model: the checkpoint
// is exported to a temporary HuggingFace folder (a LoRA run's with its adapters merged), which
// is loaded as model.path would be and removed once loaded.
func Open(l Launch) (sess *Session, err error) {
	r, eval := l.Recipe, l.Eval.clone()
	dir, done, err := modelDir(l, eval)
	defer done()
	if err != nil {
		return nil, err
	}
	if err := fitPRM(l, dir, eval); err != nil {
		return nil, err
	}
	choice, hostPlan, err := openBackend(l, dir, eval)
	if err != nil {
		return nil, err
	}
	m, err := loadModels(r, choice, dir, eval)
	if err != nil {
		return nil, err
	}
	st, err := openStore(r.Run.Store)
	if err != nil {
		return nil, err
	}
	mon := device.NewMonitor()
	defer func() {
		if err != nil {
			mon.Close()
			st.Close()
		}
	}()
	cp, err := runRecord(&l, st)
	if err != nil {
		return nil, err
	}
	plan, err := memoryPlan(l, choice, hostPlan, mon, dir, eval)
	if err != nil {
		return nil, err
	}
	c, err := New(Options{Recipe: r, RecipePath: l.RecipePath, RunID: l.RunID, Policy: m.policy, Reference: m.reference,
		Tokenizer: m.tok, PRM: m.prm, PRMTokenizer: m.prmTok, Store: st, ModelFiles: m.files, Events: l.Events, Backend: choice.Kind, Kernels: l.Kernels, CompileCache: choice.CacheNote, Resume: cp, Monitor: mon, Plan: plan, Eval: eval, Log: l.Log})
	if err != nil {
		return nil, err
	}
	if eval != nil { // an unknown set is refused before anything is stored
		if _, err := c.evalTasks(eval.Set); err != nil {
			c.Close()
			return nil, err
		}
	}
	fmt.Fprintln(l.Log, "attention: "+c.attention)
	return &Session{Controller: c, Store: st, Cache: choice.Cache, mon: mon}, nil
}

// clone is a copy of e that Open may fill in (nil for nil).
func (e *EvalOnly) clone() *EvalOnly {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}

// fitPRM fits prm.kind model's prompt and lengths to the model that judges (FitPRM) and says what
// it changed; an evaluation (eval) judges nothing.
func fitPRM(l Launch, dir string, eval *EvalOnly) error {
	if eval != nil {
		return nil
	}
	said, err := hint.FitPRM(l.Recipe, dir)
	if err != nil {
		return recipes.WithLine(l.RecipePath, "prm.model", l.Recipe.PRM.Model, err)
	}
	said = append(said, hint.FitPRMEndpoint(context.Background(), l.Recipe)...)
	for _, line := range said {
		fmt.Fprintln(l.Log, line)
	}
	return nil
}

// openStore opens the store at path for a live run, making its folder first.
func openStore(path string) (*store.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store folder: %w", err)
	}
	return store.Open(path, store.Options{Live: true})
}

// modelDir is the folder the run loads its model from: model.path, the built-in model's, or for
// an evaluation of a stored checkpoint a temporary one it is exported to, which done removes.
// It fills in what an evaluation evaluates (EvalOnly.Of) when eval leaves it "".
func modelDir(l Launch, eval *EvalOnly) (dir string, done func(), err error) {
	dir, done = l.Recipe.Model.Path, func() {}
	switch {
	case eval != nil && eval.Run != "":
		tmp, err := os.MkdirTemp("", "agentrl-eval-")
		if err != nil {
			return "", done, err
		}
		done = func() { os.RemoveAll(tmp) }
		if err := store.ExportFrom(eval.Store, eval.Run, eval.Step, tmp); err != nil {
			return "", done, fmt.Errorf("eval: %w", err)
		}
		dir = tmp
		if eval.Of == "" {
			eval.Of = fmt.Sprintf("checkpoint %s step %d", eval.Run, eval.Step)
		}
	case dir == "":
		if dir, err = l.Builtin(); err != nil {
			return "", done, err
		}
		if eval != nil && eval.Of == "" {
			eval.Of = "model built-in"
		}
	case eval != nil && eval.Of == "":
		eval.Of = "model " + dir
	}
	return dir, done, nil
}

// openBackend opens the backend the recipe asks for, for the model in dir. A real model on the
// CPU is also planned there, in the machine's memory (memory.vram auto: four fifths of it): the
// plan sizes its micro-batch and KV slots as on a GPU (memoryPlan), and the collector keeps the
// heap near the plan's host memory (device.LimitHeap) rather than at twice what was live. The
// plan is nil for the built-in model (its 8-row micro-batches are where the recipes were measured)
// and on a GPU, whose plan memoryPlan makes from the device's free memory.
func openBackend(l Launch, dir string, eval *EvalOnly) (*device.Choice, *ledger.Plan, error) {
	r := l.Recipe
	var params int64 // picks the Go backend's op scheduler; an unreadable config is reported by the load below
	if sh, err := ledger.ReadShape(dir); err == nil {
		params = sh.Params()
	}
	choice, err := device.Open(device.Request{Kind: r.Backend.Kind, PluginPath: r.Backend.Plugin, ModelParams: params, CompileCache: r.Backend.CompileCache})
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(l.Log, choice.Reason)
	if choice.Cache != nil {
		fmt.Fprintln(l.Log, choice.CacheNote)
	}
	if choice.Kind != device.Go || params < device.SequentialOpsFrom {
		return choice, nil, nil
	}
	rc := *r
	rc.Backend.Kind = device.Go
	p, err := ledger.PlanFor(ledger.Request{Recipe: &rc, ModelDir: dir, DetectedVRAM: device.HostBudget(), EvalOnly: eval != nil})
	if err != nil {
		return choice, nil, nil // no plan (memory unreadable): the recipe's own sizes, no heap limit
	}
	if _, say := device.LimitHeap(p.Host.RAM); say != "" {
		fmt.Fprintln(l.Log, say)
	}
	return choice, p, nil
}

// models are what a run loads from its model folders.
type models struct {
	tok               *tokenizer.Tokenizer
	policy, reference *model.Model
	prm               *model.Model // prm.model DIR's; nil otherwise
	prmTok            *tokenizer.Tokenizer
	files             map[string][]byte // config.json and the tokenizer's files, saved with checkpoints
}

// loadModels loads the tokenizer, the policy and the reference from dir (an evaluation: the
// policy alone), and prm.model DIR's own model, in the recipe's dtype for the backend.
func loadModels(r *recipes.Recipe, choice *device.Choice, dir string, eval *EvalOnly) (m models, err error) {
	dt := dtypes.Float32
	if r.Model.DType == "bf16" || (r.Model.DType == "auto" && choice.Kind == device.CUDA) {
		dt = dtypes.BFloat16
	}
	if m.tok, err = tokenizer.Load(dir); err != nil {
		return m, err
	}
	if eval != nil {
		// An evaluation loads the model once: no reference (nothing is scored against it) and no
		// LoRA adapters (a checkpoint is exported merged, and fresh adapters would be zero).
		m.policy, err = model.Load(choice.Backend, dir, model.Options{Compute: dt})
	} else {
		m.policy, m.reference, err = residency.LoadPolicy(choice.Backend, dir, dt, r)
	}
	if err != nil {
		return m, err
	}
	// prm.model DIR: the PRM's own weights, in host memory but for its phase.
	if r.PRMPhase() && r.PRM.Model != "reference" && eval == nil { // an evaluation judges nothing
		if m.prmTok, err = tokenizer.Load(r.PRM.Model); err != nil {
			return m, fmt.Errorf("prm.model %q: %w (give a HuggingFace model folder, or reference, policy)", r.PRM.Model, err)
		}
		if m.prm, err = model.Load(choice.Backend, r.PRM.Model, model.Options{Compute: dt}); err != nil {
			return m, fmt.Errorf("prm.model %q: %w", r.PRM.Model, err)
		}
	}
	m.files = map[string][]byte{}
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			m.files[name] = data
		}
	}
	return m, nil
}

// runRecord settles the run's id in st: a new run's first free one from l.RunID, or, to resume,
// l.RunID itself and its latest checkpoint (returned).
func runRecord(l *Launch, st *store.Store) (cp *store.Checkpoint, err error) {
	if !l.Resume { // a run started in the same second as one already stored gets an id of its own
		l.RunID, err = st.FreeRunID(l.RunID)
		return nil, err
	}
	m, err := st.LatestCheckpoint(l.RunID)
	if err != nil {
		return nil, err
	}
	if cp, err = st.LoadCheckpoint(l.RunID, m.Step); err != nil {
		return nil, err
	}
	fmt.Fprintf(l.Log, "resuming run %s from step %d\n", l.RunID, m.Step)
	return cp, nil
}

// memoryPlan is the memory ledger's plan, which sizes what the recipe leaves on auto (KV slots,
// micro-batch, where the AdamW moments wait): on a GPU from the device's free memory or
// memory.vram; on the CPU, hostPlan (openBackend's, for a real model; nil for the built-in one).
// Before hostPlan sized a CPU run, a Qwen3-0.6B step ran 8-row micro-batches under a heap limit
// set for the plan's 3 and was killed for memory in its update.
func memoryPlan(l Launch, choice *device.Choice, hostPlan *ledger.Plan, mon *device.Monitor, dir string, eval *EvalOnly) (plan *ledger.Plan, err error) {
	if choice.Kind != device.CUDA {
		if hostPlan != nil {
			sayPlan(l, hostPlan, eval)
		}
		return hostPlan, nil
	}
	var free int64
	if rd, ok := mon.Read(); ok {
		free = int64(rd.TotalBytes - rd.UsedBytes)
	}
	// An evaluation-only run builds no trainer (see build.go): its plan holds the inference
	// weights, the KV cache and the sampler alone, so a model that could not train on this
	// device can still be evaluated on it.
	if plan, err = ledger.PlanFor(ledger.Request{Recipe: l.Recipe, ModelDir: dir, DetectedVRAM: free, EvalOnly: eval != nil}); err != nil {
		return nil, err
	}
	sayPlan(l, plan, eval)
	return plan, nil
}

// sayPlan logs the sizes a plan chose.
func sayPlan(l Launch, plan *ledger.Plan, eval *EvalOnly) {
	if eval != nil {
		fmt.Fprintf(l.Log, "memory plan (evaluation only): %d KV slots, peak %s of %s\n", plan.KVSlots, recipes.FormatGiB(plan.Total), recipes.FormatGiB(plan.Budget))
	} else {
		fmt.Fprintf(l.Log, "memory plan: %d KV slots, micro-batch %d, peak %s of %s\n", plan.KVSlots, plan.MicroBatch, recipes.FormatGiB(plan.Total), recipes.FormatGiB(plan.Budget))
	}
}
