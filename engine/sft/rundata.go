package sft

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/record"
	"agentrl/engine/residency"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs/retool"
	"agentrl/store"
	"agentrl/store/safetensors"
)

// DataOptions describe supervised fine-tuning on conversations from a file (issue #33): a
// model and its tokenizer continued from Init, trained on the assistant's tokens of each
// conversation as batch.MaskAssistant lays it out in the layout (env.format), and written to Out.
// As JSON they are what a stored SFT run keeps of how it started (store.Run.RecipeYAML), which
// resume continues with; the fields marked "-" are the process's, not the run's.
type DataOptions struct {
	Data    string          // JSON Lines: one {"messages": [...]} a line
	Init    string          // HF folder whose model and tokenizer are continued
	Out     string          // HF folder written
	Backend compute.Backend `json:"-"`
	Format  retool.Layout   // retool, tool_call or chat (default retool)
	Tools   string          // tool schemas ("" the layout's default, a JSON array, @FILE)

	Epochs int // passes over the training conversations (default 1)
	Steps  int // optimizer steps; > 0 in place of Epochs' count
	Batch  int // conversations per step (default 8)
	// MicroBatch is the conversations per forward/backward pass (their gradients summed into
	// the step's one update, exactly); 0 puts a step's whole batch in one pass.
	MicroBatch int
	MaxLen     int // conversations longer than this many tokens are dropped (0: no bound)
	// TokensPerStep, when > 0, makes each step's batch by tokens instead of by Batch's count: a
	// step takes conversations (in the epoch's order) until their tokens reach it, at least one.
	TokensPerStep int
	// LoRA, when > 0, trains rank-LoRA adapters on all seven projections of a frozen base
	// (engine/model WithLoRA, as train.lora does for RL) instead of every weight; LoRAAlpha is
	// their alpha (default 2 × rank). Out is written merged; the stored checkpoints carry the
	// adapters and PEFT's adapter_config.json, so export --peft writes them alone.
	LoRA      int
	LoRAAlpha float64
	// GradientCheckpointing keeps each decoder layer's input only and recomputes the rest in the
	// backward pass (train.Config's): what a 16K-token conversation of a 4B model needs to fit
	// (plan --sft). OptimizerBits 8 keeps the AdamW moments in 8 bits (0 or 32: float32).
	GradientCheckpointing bool
	OptimizerBits         int
	// Compute is the dtype of matmuls and activations (default float32; bf16 on a GPU).
	Compute dtypes.DType `json:"-"`

	LR          float64 // peak learning rate (default 1e-5)
	MinLR       float64 // the cosine schedule's floor (default 0)
	Warmup      float64 // share of the steps warming up linearly (default 0.1; < 0 none)
	WeightDecay float64
	Beta2       float64 // AdamW β2 (default 0.999)

	HeldoutShare float64 // share of the conversations held out for an evaluation loss (seeded)
	Seed         uint64
	Log          io.Writer `json:"-"`

	// Store, when set, keeps the run as a run of kind sft (store.KindSFT) under RunID: each
	// step's metrics, a checkpoint (weights and AdamW moments) every SaveEvery steps and at the
	// end or a stop, which Resume continues from.
	Store     *store.Store `json:"-"`
	RunID     string       `json:"-"`
	Name      string
	SaveEvery int // steps between checkpoints (default: a tenth of the steps)
	EvalEvery int // steps between held-out losses (default SaveEvery)
	// Resume continues RunID from its latest checkpoint (the options are the stored run's:
	// StoredOptions reads them); the data must lay out as it did (DataHash).
	Resume bool `json:"-"`
	// DataHash fingerprints the laid-out conversations (tokens and masks, in order): a resumed run
	// refuses data that changed under it.
	DataHash string
	// Emit, when set, receives the run's events: RunStart, each step's StepMetrics (loss, lr,
	// tokens/s, ETA; eval_loss when measured), Checkpoint, Stopping and RunEnd.
	Emit func(event.Event) `json:"-"`

	skipTrainNLL bool // the demonstrations' SFT measures no loss over all its conversations
}

// DataResult is what a run on conversations did.
type DataResult struct {
	Conversations, Dropped, Train, Heldout int
	// Tokens and TrainedTokens are the kept conversations' tokens and those under the loss mask.
	Tokens, TrainedTokens int
	Steps                 int
	// Mean per-token NLL of the assistant tokens on the training and held-out conversations,
	// before the first and after the last step (the held-out ones NaN when none is held out).
	TrainBefore, TrainAfter, HeldoutBefore, HeldoutAfter float64
	Seconds                                              float64
	// Losses are the steps' losses (the mean NLL of their trained tokens before their update),
	// by step, of the steps this call trained.
	Losses map[int]float64
	// Stopped is why the run stopped before its last step (ctx's cause), "" when it finished;
	// Step is then the last step trained and saved.
	Stopped string
	Step    int
}

// StoredOptions are the options a stored SFT run started with, for Resume.
func StoredOptions(st *store.Store, runID string) (DataOptions, error) {
	run, err := st.GetRun(runID)
	if err != nil {
		return DataOptions{}, err
	}
	if run.Kind != store.KindSFT {
		return DataOptions{}, fmt.Errorf("run %s is not an SFT run", runID)
	}
	var o DataOptions
	if err := json.Unmarshal([]byte(run.RecipeYAML), &o); err != nil {
		return DataOptions{}, fmt.Errorf("resume: the stored options of SFT run %s are unreadable: %w", runID, err)
	}
	o.Store, o.RunID, o.Resume = st, runID, true
	return o, nil
}

// dataHash fingerprints laid-out conversations: their tokens and loss masks, in order.
func dataHash(seqs []train.Sequence) string {
	h := sha256.New()
	for _, s := range seqs {
		binary.Write(h, binary.LittleEndian, int64(len(s.Tokens))) //nolint:errcheck // a hash does not fail
		binary.Write(h, binary.LittleEndian, s.Tokens)             //nolint:errcheck
		for _, m := range s.LossMask {
			if m {
				h.Write([]byte{1})
			} else {
				h.Write([]byte{0})
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// plan is every step's batch, as indices into the training conversations: the epochs' orders
// drawn from rng up front, so that a resumed run trains step k on the batch an uninterrupted one
// does. A step takes up to batch conversations, or with tokens > 0 conversations until their
// tokens (lens) reach it; with steps ≤ 0 the plan covers epochs passes, each epoch's last step
// short, else exactly steps steps, running on across epochs.
func plan(rng *rand.Rand, lens []int, batch, tokens, steps, epochs int) [][]int {
	n := len(lens)
	full := func(b []int, t int) bool {
		if tokens > 0 {
			return t >= tokens
		}
		return len(b) >= batch || len(b) >= n
	}
	var out [][]int
	order, next, epoch := rng.Perm(n), 0, 1
	for steps <= 0 || len(out) < steps {
		var b []int
		t := 0
		for !full(b, t) {
			if next == len(order) { // a new epoch, in a new order
				if steps <= 0 && epoch == epochs {
					break
				}
				order, next, epoch = rng.Perm(n), 0, epoch+1
				if len(b) > 0 && steps <= 0 {
					break // epochs end their last step short
				}
			}
			b = append(b, order[next])
			t += lens[order[next]]
			next++
		}
		if len(b) == 0 {
			break
		}
		out = append(out, b)
	}
	return out
}

// RunData fine-tunes o.Init's model on o.Data's conversations and writes the folder o.Out. With
// o.Store it is a stored run that checkpoints and can be resumed; when ctx ends (a stop, a
// signal) it finishes the step in progress, saves it and returns with Stopped set.
func RunData(ctx context.Context, o DataOptions) (*DataResult, error) {
	if o.Init == "" {
		return nil, errors.New("sft: --data needs --init MODEL_DIR, the model and tokenizer to continue")
	}
	if o.Format == "" {
		o.Format = retool.LayoutReTool
	}
	if err := retool.CheckLayout(string(o.Format)); err != nil {
		return nil, fmt.Errorf("sft: --%w", err)
	}
	if !(o.HeldoutShare >= 0 && o.HeldoutShare < 1) {
		return nil, fmt.Errorf("sft: --heldout-share %v: want 0 (none) up to below 1", o.HeldoutShare)
	}
	if o.Resume && (o.Store == nil || o.RunID == "") {
		return nil, errors.New("sft: resume needs the store and the run")
	}
	if o.Epochs <= 0 {
		o.Epochs = 1
	}
	if o.Batch <= 0 {
		o.Batch = 8
	}
	if o.LR == 0 {
		o.LR = 1e-5
	}
	if o.Warmup == 0 {
		o.Warmup = 0.1
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	t0 := time.Now()
	convs, err := ReadConversations(o.Data, o.Format)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	tools, err := Tools(o.Tools, o.Format, convs)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	tok, err := tokenizer.Load(o.Init)
	if err != nil {
		return nil, fmt.Errorf("sft: --init %s: %w", o.Init, err)
	}
	seqs, _, dropped, err := Sequences(tok, convs, tools, o.MaxLen)
	if err != nil {
		return nil, fmt.Errorf("sft: %s: %w", o.Data, err)
	}
	res := &DataResult{Conversations: len(convs), Dropped: dropped, HeldoutBefore: math.NaN(), HeldoutAfter: math.NaN(), Losses: map[int]float64{}}
	if len(seqs) == 0 {
		return nil, fmt.Errorf("sft: %s: all %d conversations are longer than --max-len %d tokens", o.Data, len(convs), o.MaxLen)
	}
	hash := dataHash(seqs)
	if o.Resume && o.DataHash != "" && hash != o.DataHash {
		return nil, fmt.Errorf("sft: resume %s: %s no longer lays out as it did when the run started (other conversations, --init tokenizer or --max-len); a resumed run must train on the same data", o.RunID, o.Data)
	}
	o.DataHash = hash
	for _, s := range seqs {
		res.Tokens += len(s.Tokens)
		for _, m := range s.LossMask {
			if m {
				res.TrainedTokens++
			}
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, 33))
	rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	nHeld := int(math.Round(o.HeldoutShare * float64(len(seqs))))
	if o.HeldoutShare > 0 && nHeld == 0 {
		nHeld = 1
	}
	if nHeld >= len(seqs) {
		return nil, fmt.Errorf("sft: --heldout-share %v holds out all %d conversations; none is left to train on", o.HeldoutShare, len(seqs))
	}
	held, trainSeqs := seqs[:nHeld], seqs[nHeld:]
	res.Train, res.Heldout = len(trainSeqs), len(held)
	bound := "no length bound (--max-len 0)"
	if o.MaxLen > 0 {
		bound = fmt.Sprintf("%d dropped, longer than %d tokens", dropped, o.MaxLen)
	}
	fmt.Fprintf(o.Log, "sft: %s: %d conversations (%s), %d to train on, %d held out; %d tokens, %d trained\n",
		o.Data, len(convs), bound, len(trainSeqs), len(held), res.Tokens, res.TrainedTokens)

	m, err := loadModel(o)
	if err != nil {
		return nil, err
	}
	if m.Config.VocabSize < tok.VocabSize() {
		return nil, fmt.Errorf("sft: --init %s: the model has %d token ids, its tokenizer %d", o.Init, m.Config.VocabSize, tok.VocabSize())
	}
	saveAs := map[string]safetensors.DType{"bfloat16": safetensors.BF16, "float16": safetensors.F16}[m.Config.DType]
	if saveAs == "" {
		saveAs = safetensors.F32
	}
	lens := make([]int, len(trainSeqs))
	for i, q := range trainSeqs {
		lens[i] = len(q.Tokens)
	}
	return fitSeqs(ctx, o, m, trainSeqs, held, plan(rng, lens, o.Batch, o.TokensPerStep, o.Steps, o.Epochs), saveAs, res, t0)
}

// fitSeqs trains m on trainSeqs, step s on the conversations batches[s-1] names, with o's
// schedule and optimizer, measuring held's loss as it goes: the training loop of sft --data, and
// of the demonstrations' SFT (Run). It stores, checkpoints and resumes as o says, and writes
// o.Out in saveAs at the end.
func fitSeqs(ctx context.Context, o DataOptions, m *model.Model, trainSeqs, held []train.Sequence, batches [][]int, saveAs safetensors.DType, res *DataResult, t0 time.Time) (*DataResult, error) {
	emit := o.Emit
	if emit == nil {
		emit = func(event.Event) {}
	}
	steps := len(batches)
	res.Steps = steps
	drawn := 0
	for _, b := range batches {
		drawn += len(b)
	}
	perEpoch := (steps*len(trainSeqs) + drawn - 1) / max(drawn, 1) // steps an epoch
	// Each step is one Update of the RL trainer: micro-batches of fixed rows (a step's batch, or
	// MicroBatch conversations), their gradients summed into one AdamW update. The trainer sorts
	// a step's conversations by length before cutting them into micro-batches, and pads each to
	// its own longest (a power-of-two bucket), not to the step's.
	most := 0
	for _, b := range batches {
		most = max(most, len(b))
	}
	rows := most
	if o.MicroBatch > 0 && o.MicroBatch < rows {
		rows = o.MicroBatch
	}
	cfg := train.Config{LR: o.LR, GradClip: 1, WeightDecay: o.WeightDecay, Beta2: o.Beta2, LogitsChunk: 64, OnPolicy: true,
		MicroBatch: rows, GradAccumulation: (most + rows - 1) / rows, GradientCheckpointing: o.GradientCheckpointing, OptimizerBits: o.OptimizerBits}
	tr, err := train.New(m, cfg)
	if err != nil {
		return nil, err
	}
	defer tr.Close()

	if o.SaveEvery <= 0 {
		o.SaveEvery = max(1, steps/10)
	}
	if o.EvalEvery <= 0 {
		o.EvalEvery = o.SaveEvery
	}
	sched := train.Schedule{Base: o.LR, Warmup: int(math.Round(max(o.Warmup, 0) * float64(steps))), Total: steps, Kind: "cosine", MinRatio: o.MinLR / o.LR}
	ck := checkpointer{o: &o, m: m, tr: tr}
	if err := ck.files(); err != nil {
		return nil, err
	}
	rec := record.New(o.Store, o.RunID, 1)
	first := 1
	if o.Resume {
		if first, err = ck.restore(); err != nil {
			return nil, err
		}
		before, err := o.Store.Metrics(o.RunID)
		if err != nil {
			return nil, err
		}
		res.TrainBefore = before[0][string(event.MetricLoss)]
		if v, ok := before[0][string(event.MetricEvalLoss)]; ok {
			res.HeldoutBefore = v
		}
		run, err := o.Store.GetRun(o.RunID)
		if err != nil {
			return nil, err
		}
		run.Status, run.StopReason, run.StopDetail, run.Ended = "running", "", "", time.Time{}
		if err := o.Store.PutRun(run); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Log, "sft: resuming %s at step %d of %d\n", o.RunID, first, steps)
	} else {
		if o.Store != nil {
			kept := o // the paths absolute, so that resume finds them from any folder
			for _, p := range []*string{&kept.Data, &kept.Init, &kept.Out} {
				if *p != "" {
					if abs, err := filepath.Abs(*p); err == nil {
						*p = abs
					}
				}
			}
			spec, _ := json.Marshal(kept)
			if err := o.Store.PutRun(store.Run{ID: o.RunID, Name: o.Name, Recipe: "sft --data " + o.Data, RecipeYAML: string(spec),
				Created: time.Now(), Status: "running", TotalSteps: steps, Kind: store.KindSFT}); err != nil {
				return nil, err
			}
		}
		if !o.skipTrainNLL {
			if res.TrainBefore, err = meanNLL(tr, trainSeqs, o.Batch); err != nil {
				return nil, err
			}
		}
		if len(held) > 0 {
			if res.HeldoutBefore, err = meanNLL(tr, held, o.Batch); err != nil {
				return nil, err
			}
		}
		m0 := map[event.Metric]float64{event.MetricLoss: res.TrainBefore}
		if len(held) > 0 {
			m0[event.MetricEvalLoss] = res.HeldoutBefore
		}
		if err := rec.Record(event.StepMetrics{Step: 0, Metrics: m0}); err != nil {
			return nil, err
		}
	}
	emit(event.RunStart{RunID: o.RunID, Name: o.Name, Recipe: "sft --data " + o.Data, TotalSteps: steps, Backend: o.Backend.Name(), Model: o.Init, Kind: store.KindSFT})
	fmt.Fprintf(o.Log, "sft: %d steps of up to %d conversations (%d an epoch)%s\n", steps, most, perEpoch, nllText("; nll before:", o.skipTrainNLL, len(held), res.TrainBefore, res.HeldoutBefore))
	m0 := map[event.Metric]float64{}
	if !o.skipTrainNLL {
		m0[event.MetricLoss] = res.TrainBefore
	}
	if len(held) > 0 {
		m0[event.MetricEvalLoss] = res.HeldoutBefore
	}
	if len(m0) > 0 { // nothing measured before the first step: no step-0 point
		emit(event.StepMetrics{Step: 0, Metrics: m0})
	}
	loopStart := time.Now()
	last := first - 1 // the last step trained
	end := func(status, reason string) error {
		if o.Store != nil {
			run, err := o.Store.GetRun(o.RunID)
			if err != nil {
				return err
			}
			run.Status, run.StopReason, run.Ended = status, reason, time.Now()
			if err := o.Store.PutRun(run); err != nil {
				return err
			}
		}
		emit(event.RunEnd{Status: status, Reason: reason, Step: last, Checkpoint: ck.saved, SFT: true})
		return nil
	}
	for step := first; step <= steps; step++ {
		if ctx.Err() != nil {
			break
		}
		ts := time.Now()
		var b []train.Sequence
		tokens := 0
		for _, i := range batches[step-1] {
			s := trainSeqs[i]
			b = append(b, train.Sequence{Tokens: s.Tokens, LossMask: s.LossMask})
			tokens += len(s.Tokens)
		}
		lr := sched.At(step)
		nll, err := sftStep(tr, b, lr)
		if err != nil {
			_ = end("failed", err.Error())
			return nil, err
		}
		emit(event.Phase{Step: step, Phase: event.PhaseTrain, Seconds: time.Since(ts).Seconds()})
		last = step
		res.Losses[step] = nll
		trained := 0
		for _, s := range b {
			for _, m := range s.LossMask {
				if m {
					trained++
				}
			}
		}
		secs := time.Since(ts).Seconds()
		eta := time.Since(loopStart).Seconds() / float64(step-first+1) * float64(steps-step)
		mt := map[event.Metric]float64{event.MetricLoss: nll, event.MetricLR: lr, event.MetricTokensPerSecond: float64(tokens) / secs,
			event.MetricTrainedTokens: float64(trained), event.MetricETASeconds: eta}
		tc := time.Now() // the step's end: the held-out loss when due, the record, a checkpoint
		if len(held) > 0 && (step%o.EvalEvery == 0 || step == steps) {
			te := time.Now()
			emit(event.Progress{Step: step, Phase: event.PhaseEval, Total: len(held)})
			if mt[event.MetricEvalLoss], err = meanNLL(tr, held, o.Batch); err != nil {
				return nil, err
			}
			emit(event.Phase{Step: step, Phase: event.PhaseEval, Seconds: time.Since(te).Seconds()})
		}
		if err := rec.Record(event.StepMetrics{Step: step, Metrics: mt}); err != nil {
			return nil, err
		}
		emit(event.StepMetrics{Step: step, Metrics: mt})
		if step%10 == 0 || step == 1 || step == steps {
			fmt.Fprintf(o.Log, "sft: step %d/%d nll %.4f lr %.3g (%.0fs)\n", step, steps, nll, lr, time.Since(t0).Seconds())
		}
		if step%o.SaveEvery == 0 || step == steps {
			if err := ck.save(step, emit); err != nil {
				return nil, err
			}
		}
		// Every step ends with its save phase (as the RL loop's): the workbench counts finished
		// steps by it.
		emit(event.Phase{Step: step, Phase: event.PhaseSave, Seconds: time.Since(tc).Seconds()})
	}
	res.Step = last
	if last < steps { // stopped
		reason := "stopped"
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			reason = c.Error()
		}
		res.Stopped = reason
		emit(event.Stopping{Step: last + 1, Reason: reason, Save: last,
			Message: fmt.Sprintf("stopping between steps: step %d is saved, step %d is not started", last, last+1)})
		if last >= first {
			if err := ck.save(last, emit); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(o.Log, "sft: %s at step %d of %d\n", reason, last, steps)
		res.Seconds = time.Since(t0).Seconds()
		return res, end("stopped", reason)
	}
	if !o.skipTrainNLL {
		if res.TrainAfter, err = meanNLL(tr, trainSeqs, o.Batch); err != nil {
			return nil, err
		}
	}
	if len(held) > 0 {
		if res.HeldoutAfter, err = meanNLL(tr, held, o.Batch); err != nil {
			return nil, err
		}
	}
	if text := nllText("sft: nll after:", o.skipTrainNLL, len(held), res.TrainAfter, res.HeldoutAfter); text != "" {
		fmt.Fprintln(o.Log, text)
	}
	if o.Out != "" {
		if err := writeOut(&o, m, &ck, steps, saveAs, emit); err != nil {
			return nil, err
		}
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, end("finished", "")
}

// loadModel is --init's model, with fresh LoRA adapters on a frozen base when o.LoRA > 0 (A
// drawn from the seed, B zero: the base's function until trained).
func loadModel(o DataOptions) (*model.Model, error) {
	if o.LoRA <= 0 {
		m, err := model.Load(o.Backend, o.Init, model.Options{Compute: o.Compute})
		if err != nil {
			return nil, fmt.Errorf("sft: --init %s: %w", o.Init, err)
		}
		return m, nil
	}
	cfg, err := model.ReadConfig(o.Init)
	if err != nil {
		return nil, fmt.Errorf("sft: --init %s: %w", o.Init, err)
	}
	base, err := model.LoadParams(o.Init, cfg)
	if err != nil {
		return nil, fmt.Errorf("sft: --init %s: %w", o.Init, err)
	}
	dt := o.Compute
	if dt == dtypes.InvalidDType {
		dt = dtypes.Float32
	}
	p, err := model.WithLoRA(base, loraOf(o), o.Seed, dt)
	if err != nil {
		return nil, fmt.Errorf("sft: --lora %d: %w", o.LoRA, err)
	}
	return model.New(o.Backend, p, model.Options{Compute: dt})
}

// loraOf is the adapters --lora asks for: all seven projections, alpha 2 × rank by default.
func loraOf(o DataOptions) model.LoRA {
	alpha := o.LoRAAlpha
	if alpha <= 0 {
		alpha = 2 * float64(o.LoRA)
	}
	return model.LoRA{Rank: o.LoRA, Alpha: alpha, Targets: model.LoRATargets()}
}

// writeOut writes the trained model to o.Out as a HuggingFace folder in --init's dtype, with
// --init's tokenizer. A LoRA model is written merged, by export's own merge: from the run's
// last checkpoint (a checkpoint in a scratch store when the run keeps none).
func writeOut(o *DataOptions, m *model.Model, ck *checkpointer, step int, saveAs safetensors.DType, emit func(event.Event)) error {
	if o.LoRA <= 0 {
		if err := m.Params.Save(o.Out, saveAs); err != nil {
			return err
		}
		return copyTokenizer(o.Init, o.Out)
	}
	if o.Store == nil {
		dir, err := os.MkdirTemp("", "agentrl-sft-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		st, err := store.Open(filepath.Join(dir, "scratch.db"), store.Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		scratch := *o
		scratch.Store, scratch.RunID = st, "sft"
		c := checkpointer{o: &scratch, m: ck.m, tr: ck.tr}
		if err := c.files(); err != nil {
			return err
		}
		if err := c.save(step, func(event.Event) {}); err != nil {
			return err
		}
		return st.ExportWith("sft", step, o.Out, store.ExportOptions{DType: saveAs})
	}
	if err := ck.save(step, emit); err != nil {
		return err
	}
	return o.Store.ExportWith(o.RunID, step, o.Out, store.ExportOptions{DType: saveAs})
}

// checkpointer saves an SFT run's checkpoints in its store (the model's weights in float32,
// the AdamW moments and update count, --init's config and tokenizer files, so that export
// writes a loadable folder) and restores the latest.
type checkpointer struct {
	o     *DataOptions
	m     *model.Model
	tr    *train.Trainer
	fdata map[string][]byte
	saved int // the step of the latest checkpoint (0: none)
}

// checkpointFiles are the files of --init a checkpoint carries.
var checkpointFiles = []string{"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
	"added_tokens.json", "chat_template.jinja", "generation_config.json"}

func (c *checkpointer) files() error {
	c.fdata = map[string][]byte{}
	for _, name := range checkpointFiles {
		data, err := os.ReadFile(filepath.Join(c.o.Init, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sft: --init %s: %w", c.o.Init, err)
		}
		c.fdata[name] = data
	}
	if c.o.LoRA > 0 {
		js, err := residency.AdapterConfig(loraOf(*c.o), c.o.Init)
		if err != nil {
			return err
		}
		c.fdata[store.AdapterConfigFile] = js
	}
	return nil
}

func (c *checkpointer) save(step int, emit func(event.Event)) error {
	if c.o.Store == nil || step == c.saved {
		return nil
	}
	_, _, adamStep := c.tr.Moments()
	man := store.Manifest{Run: c.o.RunID, Step: step, DataPosition: int64(step), Metrics: map[string]float64{"adam_step": float64(adamStep)}}
	var all int64
	weightSrc, weightBytes := c.m.Params.Stream(safetensors.F32)
	specs := c.tr.TrainedSpecs()
	mom, vel, _ := c.tr.Moments()
	j := 0
	momentSrc := func() (*safetensors.Tensor, error) {
		if j == 2*len(specs) {
			return nil, nil
		}
		spec, t, prefix := specs[j/2], mom[j/2], "m."
		if j%2 == 1 {
			t, prefix = vel[j/2], "v."
		}
		j++
		st, err := residency.MomentTensor(prefix+spec.Name, spec.Dims, t)
		if st != nil {
			all += int64(len(st.Data))
		}
		return st, err
	}
	if err := c.o.Store.SaveCheckpointFrom(man, weightSrc, momentSrc, c.fdata); err != nil {
		return err
	}
	c.saved = step
	emit(event.Checkpoint{Step: step, ID: fmt.Sprintf("%s/%d", c.o.RunID, step), Bytes: all + *weightBytes, WeightBytes: *weightBytes})
	// The latest two are kept: the one a resume starts from, and the one before in case the
	// latest's step must be looked at again.
	_, err := c.o.Store.Retain(c.o.RunID, "", 0, 2)
	return err
}

// restore loads the run's latest checkpoint into the model and the trainer and returns the step
// to continue at.
func (c *checkpointer) restore() (int, error) {
	man, err := c.o.Store.LatestCheckpoint(c.o.RunID)
	if err != nil {
		return 0, fmt.Errorf("sft: resume %s: %w", c.o.RunID, err)
	}
	cp, err := c.o.Store.LoadCheckpoint(c.o.RunID, man.Step)
	if err != nil {
		return 0, err
	}
	src := fmt.Sprintf("checkpoint %s/%d", cp.Run, cp.Step)
	if err := residency.SetWeights(c.m, cp.Weights, src); err != nil {
		return 0, err
	}
	byName := map[string]*safetensors.Tensor{}
	for _, t := range cp.Moments {
		byName[t.Name] = t
	}
	var m, v []*tensors.Tensor
	for _, spec := range c.tr.TrainedSpecs() {
		for _, pre := range []string{"m.", "v."} {
			t, ok := byName[pre+spec.Name]
			if !ok {
				return 0, fmt.Errorf("%s: optimizer moment %s%s is missing", src, pre, spec.Name)
			}
			tt, err := residency.MomentFrom(t, spec.Dims, src)
			if err != nil {
				return 0, err
			}
			if pre == "m." {
				m = append(m, tt)
			} else {
				v = append(v, tt)
			}
		}
	}
	if err := c.tr.SetMoments(m, v, int(cp.Metrics["adam_step"])); err != nil {
		return 0, err
	}
	c.saved = cp.Step
	return cp.Step + 1, nil
}

// sftStep is a supervised step as train.Trainer's SFTStep makes one with Config.OnPolicy (the
// ratio's old log-probs are the graph's own, so no log-probs pass comes first): advantage 1 on
// every trained token and one Update summing the micro-batches' gradients (the clipped surrogate
// at ratio 1 has the log-likelihood's gradient). It returns the mean NLL of the trained tokens
// before the update.
func sftStep(tr *train.Trainer, seqs []train.Sequence, lr float64) (float64, error) {
	if !tr.OnPolicy() {
		return 0, errors.New("sft: the trainer needs train.Config.OnPolicy")
	}
	for i := range seqs {
		seqs[i].OldLogProbs = make([]float32, len(seqs[i].Tokens)) // not read
		seqs[i].Advantages = slices.Repeat([]float32{1}, len(seqs[i].Tokens))
	}
	met, err := tr.Update(seqs, lr)
	return met.NLL, err
}

// meanNLL is the mean negative log-likelihood per trained token of seqs under tr's model, in
// passes of batch sequences.
func meanNLL(tr *train.Trainer, seqs []train.Sequence, batch int) (float64, error) {
	var nll, n float64
	for i := 0; i < len(seqs); i += batch {
		var part []train.Sequence
		for _, s := range seqs[i:min(i+batch, len(seqs))] {
			k := len(s.Tokens)
			part = append(part, train.Sequence{Tokens: s.Tokens, LossMask: s.LossMask, OldLogProbs: make([]float32, k), Advantages: make([]float32, k)})
		}
		b, err := train.Pack(part, 0)
		if err != nil {
			return 0, err
		}
		lp, err := tr.LogProbs(b)
		if err != nil {
			return 0, err
		}
		for r := 0; r < len(part); r++ {
			for p := 0; p < b.T; p++ {
				if b.Mask[r*b.T+p] > 0 {
					nll -= float64(lp[r][p])
					n++
				}
			}
		}
	}
	return nll / max(n, 1), nil
}

// copyTokenizer copies the tokenizer's and the generation's files of an HF folder that are there.
func copyTokenizer(from, to string) error {
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
		"added_tokens.json", "chat_template.jinja", "generation_config.json"} {
		data, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sft: --init %s: %w", from, err)
		}
		if err := os.WriteFile(filepath.Join(to, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// nllText is the log's mean NLL over the training conversations and the held-out ones after
// prefix, or "" where neither was measured (the demonstrations' SFT, which holds none out and skips
// the pass over all its conversations: its steps' own NLL is what it shows). Without a held-out set
// it says how to get one, which the Curves pane's eval_loss needs.
func nllText(prefix string, skipTrain bool, held int, train, heldout float64) string {
	switch {
	case skipTrain && held == 0:
		return ""
	case skipTrain:
		return fmt.Sprintf("%s held-out %.4f", prefix, heldout)
	case held == 0:
		return fmt.Sprintf("%s train %.4f, no held-out set (--heldout-share above 0 gives one, and the eval_loss curve)", prefix, train)
	}
	return fmt.Sprintf("%s train %.4f held-out %.4f", prefix, train, heldout)
}
