package sft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/compute"

	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs/retool"
	"agentrl/store/safetensors"
)

// DataOptions describe supervised fine-tuning on conversations from a file (issue #33): a
// model and its tokenizer continued from Init, trained on the assistant's tokens of each
// conversation as batch.MaskAssistant lays it out in the layout (env.format), and written to Out.
type DataOptions struct {
	Data    string // JSON Lines: one {"messages": [...]} a line
	Init    string // HF folder whose model and tokenizer are continued
	Out     string // HF folder written
	Backend compute.Backend
	Format  retool.Layout // retool, tool_call or chat (default retool)
	Tools   string        // tool schemas ("" the layout's default, a JSON array, @FILE)

	Epochs int // passes over the training conversations (default 1)
	Steps  int // optimizer steps; > 0 in place of Epochs' count
	Batch  int // conversations per step (default 8)
	// MicroBatch is the conversations per forward/backward pass (their gradients summed into
	// the step's one update, exactly); 0 puts a step's whole batch in one pass.
	MicroBatch int
	MaxLen     int // conversations longer than this many tokens are dropped (0: no bound)

	LR          float64 // peak learning rate (default 1e-5)
	MinLR       float64 // the cosine schedule's floor (default 0)
	Warmup      float64 // share of the steps warming up linearly (default 0.1; < 0 none)
	WeightDecay float64
	Beta2       float64 // AdamW β2 (default 0.999)

	HeldoutShare float64 // share of the conversations held out for an evaluation loss (seeded)
	Seed         uint64
	Log          io.Writer
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
}

// RunData fine-tunes o.Init's model on o.Data's conversations and writes the folder o.Out.
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
	res := &DataResult{Conversations: len(convs), Dropped: dropped, HeldoutBefore: math.NaN(), HeldoutAfter: math.NaN()}
	if len(seqs) == 0 {
		return nil, fmt.Errorf("sft: %s: all %d conversations are longer than --max-len %d tokens", o.Data, len(convs), o.MaxLen)
	}
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
	fmt.Fprintf(o.Log, "sft: %s: %d conversations (%d dropped, longer than %d tokens), %d to train on, %d held out; %d tokens, %d trained\n",
		o.Data, len(convs), dropped, o.MaxLen, len(trainSeqs), len(held), res.Tokens, res.TrainedTokens)

	m, err := model.Load(o.Backend, o.Init, model.Options{})
	if err != nil {
		return nil, fmt.Errorf("sft: --init %s: %w", o.Init, err)
	}
	if m.Config.VocabSize < tok.VocabSize() {
		return nil, fmt.Errorf("sft: --init %s: the model has %d token ids, its tokenizer %d", o.Init, m.Config.VocabSize, tok.VocabSize())
	}
	saveAs := map[string]safetensors.DType{"bfloat16": safetensors.BF16, "float16": safetensors.F16}[m.Config.DType]
	if saveAs == "" {
		saveAs = safetensors.F32
	}
	// Each step is one Update of the RL trainer: micro-batches of fixed rows (a step's batch, or
	// MicroBatch conversations), their gradients summed into one AdamW update.
	rows := min(o.Batch, len(trainSeqs))
	if o.MicroBatch > 0 && o.MicroBatch < rows {
		rows = o.MicroBatch
	}
	cfg := train.Config{LR: o.LR, GradClip: 1, WeightDecay: o.WeightDecay, Beta2: o.Beta2, LogitsChunk: 64,
		MicroBatch: rows, GradAccumulation: (min(o.Batch, len(trainSeqs)) + rows - 1) / rows}
	tr, err := train.New(m, cfg)
	if err != nil {
		return nil, err
	}
	defer tr.Close()

	perEpoch := (len(trainSeqs) + o.Batch - 1) / o.Batch
	steps := o.Steps
	if steps <= 0 {
		steps = o.Epochs * perEpoch
	}
	res.Steps = steps
	sched := train.Schedule{Base: o.LR, Warmup: int(math.Round(max(o.Warmup, 0) * float64(steps))), Total: steps, Kind: "cosine", MinRatio: o.MinLR / o.LR}
	if res.TrainBefore, err = meanNLL(tr, trainSeqs, o.Batch); err != nil {
		return nil, err
	}
	if len(held) > 0 {
		if res.HeldoutBefore, err = meanNLL(tr, held, o.Batch); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Log, "sft: %d steps of up to %d conversations (%d an epoch); nll before: train %.4f held-out %.4f\n", steps, o.Batch, perEpoch, res.TrainBefore, res.HeldoutBefore)
	order := rng.Perm(len(trainSeqs))
	next := 0
	for step := 1; step <= steps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var b []train.Sequence
		for len(b) < o.Batch && len(b) < len(trainSeqs) {
			if next == len(order) { // a new epoch, in a new order
				order, next = rng.Perm(len(trainSeqs)), 0
				if len(b) > 0 && o.Steps <= 0 {
					break // epochs end their last step short
				}
			}
			s := trainSeqs[order[next]]
			next++
			b = append(b, train.Sequence{Tokens: s.Tokens, LossMask: s.LossMask})
		}
		lr := sched.At(step)
		nll, err := sftStep(tr, b, rows, lr)
		if err != nil {
			return nil, err
		}
		if step%10 == 0 || step == 1 || step == steps {
			fmt.Fprintf(o.Log, "sft: step %d/%d nll %.4f lr %.3g (%.0fs)\n", step, steps, nll, lr, time.Since(t0).Seconds())
		}
	}
	if res.TrainAfter, err = meanNLL(tr, trainSeqs, o.Batch); err != nil {
		return nil, err
	}
	if len(held) > 0 {
		if res.HeldoutAfter, err = meanNLL(tr, held, o.Batch); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Log, "sft: nll after: train %.4f held-out %.4f\n", res.TrainAfter, res.HeldoutAfter)
	if err := m.Params.Save(o.Out, saveAs); err != nil {
		return nil, err
	}
	if err := copyTokenizer(o.Init, o.Out); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// sftStep is a supervised step as train.Trainer's SFTStep makes one, in micro-batches of rows
// sequences: each sequence's log-probs as its old ones and advantage 1 (the clipped surrogate at
// ratio 1 has the log-likelihood's gradient), then one Update summing the micro-batches'
// gradients. It returns the mean NLL of the trained tokens before the update.
func sftStep(tr *train.Trainer, seqs []train.Sequence, rows int, lr float64) (float64, error) {
	nll, err := logProbs(tr, seqs, rows, func(i int, lp []float32) {
		// lp[p] is position p's log-prob of token p+1; a sequence's log-probs are by token.
		seqs[i].OldLogProbs = make([]float32, len(seqs[i].Tokens))
		copy(seqs[i].OldLogProbs[1:], lp[:len(seqs[i].Tokens)-1])
		seqs[i].Advantages = make([]float32, len(seqs[i].Tokens))
		for j := range seqs[i].Advantages {
			seqs[i].Advantages[j] = 1
		}
	})
	if err != nil {
		return 0, err
	}
	if _, err := tr.Update(seqs, lr); err != nil {
		return 0, err
	}
	return nll, nil
}

// meanNLL is the mean negative log-likelihood per trained token of seqs under tr's model, in
// passes of batch sequences.
func meanNLL(tr *train.Trainer, seqs []train.Sequence, batch int) (float64, error) {
	return logProbs(tr, seqs, batch, nil)
}

// logProbs runs seqs through tr's model in passes of batch sequences, hands each sequence's
// per-token log-probs to fn (when not nil) and returns the mean NLL of the trained tokens.
func logProbs(tr *train.Trainer, seqs []train.Sequence, batch int, fn func(i int, lp []float32)) (float64, error) {
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
			if fn != nil {
				fn(i+r, lp[r])
			}
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
