package ledger

import (
	"fmt"
	"strings"

	"agentrl/recipes"
)

// SettingsFor reads the ledger's settings from a validated recipe. backend is the backend the
// plan is for ("go", "cuda"; "" or "auto" plans for a GPU): it decides the compute dtype when
// model.dtype is auto (f32 on the go backend, bf16 otherwise).
func SettingsFor(r *recipes.Recipe, backend string) Settings {
	cb := 2
	switch r.Model.DType {
	case "f32":
		cb = 4
	case "auto":
		if backend == "go" {
			cb = 4
		}
	}
	batch := r.BatchSize()
	maxMicro := batch
	if ga := int(r.Train.GradAccumulation); ga > 0 {
		maxMicro = max(batch/ga, 1)
	}
	return Settings{
		ComputeBytes:          cb,
		SeqLen:                r.Rollout.MaxTotalTokens,
		KVSlots:               int(r.Memory.KVSlots),
		MaxKVSlots:            batch,
		MicroBatch:            int(r.Train.MicroBatch),
		MaxMicroBatch:         maxMicro,
		Offload:               r.Memory.OptimizerOffload,
		MasterOffload:         r.Memory.MasterOffload,
		OptimizerBits:         r.Train.OptimizerBits,
		LoRARank:              r.Train.LoRA.Rank,
		LoRATargets:           strings.Join(r.Train.LoRA.Targets, ","),
		GradientCheckpointing: r.Train.GradientCheckpointing,
		Attention:             attentionFor(r.Model.Attention, backend, cb, r.Rollout.MaxTotalTokens),
		Reference:             r.UsesReference(),
		ValueHead:             r.Algorithm.Name == "ppo",
		DeviceIsHost:          backend == "go",
		SaveOptimizer:         r.Checkpoint.SaveOptimizer,
		KeepBest:              r.Checkpoint.KeepBest,
		KeepLast:              r.Checkpoint.KeepLast,
		CheckpointsKept:       CheckpointsKept(r.Checkpoint.Every, r.Checkpoint.KeepBest, r.Checkpoint.KeepLast, r.Run.MaxSteps),
	}
}

// attentionFor is the attention path a run takes with model.attention asked: the path named, or
// for auto the one engine/model's auto takes for sequences of seqLen tokens in cb-byte compute on
// backend: fused flash attention on a GPU in bf16 (the op takes half precision only), else chunked
// beyond one block, else dense. Where auto falls back from fused to chunked at run time (the fused
// program did not compile), training saves a little more per token (a layer's K·V block rows, see
// layerBytes) than this plan counts; plan with model.attention: chunked to see that case.
func attentionFor(asked, backend string, cb, seqLen int) string {
	switch {
	case asked == AttentionDense || asked == AttentionChunked || asked == AttentionFused:
		return asked
	case backend != "go" && cb == 2:
		return AttentionFused
	case seqLen > DefaultAttentionBlock:
		return AttentionChunked
	}
	return AttentionDense
}

// Request gathers what `agentrl-tui plan RECIPE [--model DIR] [--shape NAME] [--vram SIZE]` needs.
type Request struct {
	// Recipe is the loaded, validated recipe.
	Recipe *recipes.Recipe
	// ModelDir (--model) is a model folder; only its config.json is read. It wins over the
	// recipe's model.path.
	ModelDir string
	// ShapeName (--shape) is one of KnownShapes; give it or ModelDir, not both.
	ShapeName string
	// VRAM (--vram) is the budget, e.g. "24GiB"; empty uses the recipe's memory.vram.
	VRAM string
	// BuiltinModelDir is the built-in model's folder, used when no model is named anywhere.
	BuiltinModelDir string
	// DetectedVRAM is the device memory found (e.g. NVML's free bytes), used when the budget is
	// "auto"; 0 when there is no GPU reading.
	DetectedVRAM int64
	// EvalOnly plans an evaluation-only run (see Settings.EvalOnly).
	EvalOnly bool
}

// PlanFor resolves the shape and budget of a request and computes its plan. With it the plan
// sub-command is a few lines:
//
//	r, err := recipes.Load(path, recipes.Options{})
//	p, err := ledger.PlanFor(ledger.Request{Recipe: r, ModelDir: *model, ShapeName: *shape, VRAM: *vram,
//		BuiltinModelDir: builtin, DetectedVRAM: nvmlFree})
//	if *asJSON { return p.WriteJSON(stdout) }; return p.WriteTable(stdout)
func PlanFor(req Request) (*Plan, error) {
	r := req.Recipe
	if r == nil {
		return nil, fmt.Errorf("plan: no recipe given")
	}
	shape, err := req.shape()
	if err != nil {
		return nil, err
	}
	budget, err := req.budget()
	if err != nil {
		return nil, err
	}
	st := SettingsFor(r, r.Backend.Kind)
	st.PRM = prmSettings(r, shape)
	st.Eval = EvalSettingsFor(r)
	if st.EvalOnly = req.EvalOnly; st.EvalOnly {
		// An evaluation-only run's one generator is sized for the evaluation's context.
		st.SeqLen = r.EvalTotalTokens()
	}
	// rollout.engines generate remotely: no inference copy or KV cache here, unless something
	// else decodes the policy on the local engine (LocalEngineFor), as the run builds it.
	if n := len(r.Rollout.Engines); n > 0 && !req.EvalOnly {
		st.Engines, st.LocalEngine = n, LocalEngineFor(r)
		st.RemoteRollout = st.LocalEngine == ""
	}
	return Compute(shape, st, budget)
}

// LocalEngineFor says what still generates on the local engine of a run with rollout.engines,
// which then keeps its inference copy and KV cache: "" when nothing does.
func LocalEngineFor(r *recipes.Recipe) string {
	var why []string
	if r.PRMModel() && r.PRM.Endpoint == "" && r.PRM.Model == "policy" {
		why = append(why, "prm.model: policy (the PRM's verdicts)")
	}
	if r.Hinter.Kind == "self" {
		why = append(why, "hinter.kind: self (the hints)")
	}
	return strings.Join(why, " and ")
}

// EvalSettingsFor is the eval phase's settings of r: nil when evaluation decodes in rollout's
// slots (eval.max_total_tokens 0 or no longer than rollout's); else slots of its length, at most
// the trajectories of one evaluation or of one validation, whichever is more.
func EvalSettingsFor(r *recipes.Recipe) *EvalSettings {
	if !r.EvalSlotsOwn() {
		return nil
	}
	return &EvalSettings{SeqLen: r.EvalTotalTokens(),
		MaxKVSlots: max(r.Eval.HeldoutTasks*r.Eval.NSamples, r.Eval.ValidationTasks*r.Eval.ValidationSamples, 1)}
}

// prmSettings are the PRM phase's settings of r (nil without one on this device): a folder's
// shape when the folder is there, else the policy's (said in the note).
func prmSettings(r *recipes.Recipe, policy Shape) *PRMSettings {
	if !r.PRMPhase() {
		return nil
	}
	ps := &PRMSettings{Shape: policy, SeqLen: r.PRMInputTokens() + r.PRM.MaxNewTokens, KVSlots: int(r.PRM.KVSlots),
		MaxKVSlots: r.BatchSize() * r.PRM.Samples, Own: r.PRM.Model != "reference"}
	if ps.Own {
		if sh, err := ReadShape(r.PRM.Model); err == nil {
			ps.Shape = sh
		} else {
			ps.Note = "its folder " + r.PRM.Model + " is not here: sized as the policy's shape"
		}
	}
	return ps
}

func (req Request) shape() (Shape, error) {
	switch {
	case req.ShapeName != "" && req.ModelDir != "":
		return Shape{}, fmt.Errorf("give --shape %s or --model %s, not both", req.ShapeName, req.ModelDir)
	case req.ShapeName != "":
		return KnownShape(req.ShapeName)
	case req.ModelDir != "":
		return ReadShape(req.ModelDir)
	case req.Recipe.Model.Path != "":
		return ReadShape(req.Recipe.Model.Path)
	case req.BuiltinModelDir != "":
		return ReadShape(req.BuiltinModelDir)
	}
	return Shape{}, fmt.Errorf("no model to plan for: give --model DIR or --shape NAME")
}

func (req Request) budget() (int64, error) {
	vram, flag := req.VRAM, "--vram"
	if vram == "" {
		vram, flag = req.Recipe.Memory.VRAM, "memory.vram"
	}
	if vram == "auto" {
		if req.DetectedVRAM > 0 {
			return req.DetectedVRAM, nil
		}
		return 0, fmt.Errorf("%s is auto but no GPU memory reading is available; give a budget such as --vram 24GiB, or plan for this machine's CPU and memory with --set backend.kind=go", flag)
	}
	b, err := recipes.ParseBytes(vram)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", flag, err)
	}
	if b <= 0 {
		return 0, fmt.Errorf("%s %q is not a usable budget; give a positive size such as 24GiB", flag, vram)
	}
	return b, nil
}
