// Package sft is supervised fine-tuning: the built-in model's warm start from executed tool-use
// demonstrations (a byte-level BPE and a small Qwen3-shaped model trained on them, or a
// continuation of an existing folder), laid out and masked as the RL trainer lays out a
// trajectory (batch.MaskAssistant).
package sft

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/compute"

	"agentrl/engine/batch"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
	"agentrl/recipes"
	"agentrl/store/safetensors"
)

// Options describe a supervised warm-start: demonstrations from the recipe's synthetic task
// set, a byte-level BPE trained on them, and a small Qwen3-shaped model trained on them.
type Options struct {
	Recipe   *recipes.Recipe
	Backend  compute.Backend
	Out      string // HF folder written: config.json, model.safetensors, tokenizer.json
	Examples int    // demonstrations (default 2000)
	Vocab    int    // tokenizer size (default 512)
	Hidden   int    // default 128
	Layers   int    // default 4
	Steps    int    // optimizer steps (default 300)
	Batch    int    // sequences per step (default 16)
	LR       float64
	Seed     uint64
	// HintShare is the share of demonstrations conditioned on a bridge thought (default 0, none):
	// the hint the rules hinter writes for a flawed first attempt, in the user message where the
	// controller puts it, followed by the corrected trajectory, so that a reference model reads
	// [prompt + hint] as familiar text that points to the fix (docs/experiments.md: what 0.25 did).
	HintShare float64
	// JudgeShare is the share of the examples that teach the model PRM's task instead of solving
	// (default 0, none): the PRM prompt (JudgeTemplate) for an attempt of one of
	// retool.JudgeKinds played through the environment, answered with the verdict per step the
	// environment checked and the rules hinter's bridge thought or \boxed{-1}
	// (retool.JudgeDemonstration), so that the reference model can judge and hint.
	JudgeShare float64
	// JudgeTemplate is the PRM prompt judge examples are written in (the recipe's prm.prompt
	// for the built-in model, testdata/builtin/prm_prompt.txt).
	JudgeTemplate string
	// Init, when set, continues from that HF folder's model and tokenizer instead of training a
	// tokenizer and a model from scratch: the vocabulary (and so everything the model already
	// reads) stays, and only the demonstrations' mixture changes. Vocab, Hidden and Layers are
	// then the folder's.
	Init string
	Log  io.Writer // progress lines
}

// Run builds the demonstrations, trains the tokenizer and the model, and writes the folder.
func Run(ctx context.Context, o Options) error {
	d, err := prepare(ctx, &o)
	if err != nil {
		return err
	}
	m, err := newModel(o, d.tok)
	if err != nil {
		return err
	}
	if _, err := fitDemos(ctx, o, m, d.seqs, d.rng); err != nil {
		return err
	}
	if err := m.Params.Save(o.Out, safetensors.F32); err != nil {
		return err
	}
	if err := writePRMPrompt(o); err != nil {
		return err
	}
	if o.Init == "" {
		return tokenizer.WriteTrained(o.Out, d.doc)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(o.Init, name))
		if err != nil {
			return fmt.Errorf("sft: --init %s: %w", o.Init, err)
		}
		if err := os.WriteFile(filepath.Join(o.Out, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// PRMPromptFile is model.PRMPromptFile, the file a model folder keeps its PRM prompt in.
const PRMPromptFile = model.PRMPromptFile

// writePRMPrompt writes the PRM prompt the model was taught to judge in beside it: the judge
// examples' template, else --init's, so that the folder judges as typed.
func writePRMPrompt(o Options) error {
	text := o.JudgeTemplate
	if o.JudgeShare == 0 || text == "" {
		if o.Init == "" {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(o.Init, PRMPromptFile))
		if err != nil {
			return nil // the folder it continues from was never taught to judge
		}
		text = string(b)
	}
	return os.WriteFile(filepath.Join(o.Out, PRMPromptFile), []byte(text), 0o644)
}

// demos are the demonstrations as the trainer takes them: the tokenizer (trained on them, doc
// its tokenizer.json, or --init's), the laid-out and masked conversations, and the random
// stream the steps' batches are drawn from.
type demos struct {
	tok  *tokenizer.Tokenizer
	doc  []byte
	seqs []train.Sequence
	rng  *rand.Rand
	pcg  *rand.PCG // rng's source
}

// prepare sets o's defaults and builds the demonstrations, their tokenizer and sequences.
func prepare(ctx context.Context, o *Options) (*demos, error) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Examples, 2000)
	def(&o.Vocab, 512)
	def(&o.Hidden, 128)
	def(&o.Layers, 4)
	def(&o.Steps, 300)
	def(&o.Batch, 16)
	if !(o.HintShare >= 0 && o.HintShare <= 1) { // NaN too
		return nil, fmt.Errorf("sft: --hint-share %v is not a share of the demonstrations; want 0 (none) to 1 (all)", o.HintShare)
	}
	if !(o.JudgeShare >= 0 && o.JudgeShare <= 1) {
		return nil, fmt.Errorf("sft: --judge-share %v is not a share of the examples; want 0 (none) to 1 (all)", o.JudgeShare)
	}
	if o.JudgeShare > 0 && strings.TrimSpace(o.JudgeTemplate) == "" {
		return nil, fmt.Errorf("sft: --judge-share %v needs the PRM prompt its examples are written in (--prm-prompt FILE)", o.JudgeShare)
	}
	if o.LR == 0 {
		o.LR = 3e-3
	}

	if o.Log == nil {
		o.Log = io.Discard
	}
	r := o.Recipe
	t0 := time.Now()
	tasks, _, err := synthetic.Tasks{Levels: r.Env.Tasks.Synthetic.Levels, Seed: uint64(r.Env.Tasks.Synthetic.Seed)}.Split(o.Examples, 0)
	if err != nil {
		return nil, err
	}
	sess, err := (&sandbox.Starlark{}).NewSession()
	if err != nil {
		return nil, err
	}
	pcg := rand.NewPCG(o.Seed, 17)
	rng := rand.New(pcg)
	convs, hinted, err := conversations(ctx, tasks, o.HintShare, sess, rng)
	if err != nil {
		return nil, err
	}
	judged := 0
	if o.JudgeShare > 0 { // no draw when off: the shipped model's stream
		if convs, judged, err = withJudging(ctx, convs, tasks, o.JudgeShare, o.JudgeTemplate, rng); err != nil {
			return nil, err
		}
	}
	texts := make([]string, len(convs))
	for i, conv := range convs {
		pieces, err := batch.TurnPieces(conv, nil)
		if err != nil {
			return nil, err
		}
		var text strings.Builder
		for _, p := range pieces {
			text.WriteString(p.Text)
		}
		texts[i] = text.String()
	}
	fmt.Fprintf(o.Log, "sft: %d demonstrations (%d with a bridge thought, %d judging an attempt) in %.1fs\n", len(texts), hinted, judged, time.Since(t0).Seconds())
	var doc []byte
	var tok *tokenizer.Tokenizer
	if o.Init != "" {
		if tok, err = tokenizer.Load(o.Init); err != nil {
			return nil, fmt.Errorf("sft: --init %s: %w", o.Init, err)
		}
	} else {
		if doc, err = tokenizer.Train(texts, o.Vocab, tokenizer.ChatSpecials()); err != nil {
			return nil, err
		}
		if tok, err = tokenizer.Parse(doc); err != nil {
			return nil, err
		}
	}
	var seqs []train.Sequence
	for _, conv := range convs {
		ids, mask, err := batch.MaskAssistant(tok, conv, nil)
		if err == nil && len(ids) <= r.Rollout.MaxTotalTokens {
			seqs = append(seqs, train.Sequence{Tokens: ids, LossMask: mask})
		}
	}
	if len(seqs) == 0 {
		return nil, fmt.Errorf("sft: no demonstration fits rollout.max_total_tokens %d", r.Rollout.MaxTotalTokens)
	}
	fmt.Fprintf(o.Log, "sft: tokenizer of %d ids; %d sequences\n", tok.VocabSize(), len(seqs))
	return &demos{tok: tok, doc: doc, seqs: seqs, rng: rng, pcg: pcg}, nil
}

// fitDemos trains m on the demonstrations' sequences through the loop of sft --data (fitSeqs):
// each step o.Batch of them drawn with replacement from rng, one AdamW update (weight decay 0.01,
// gradients clipped to 1), linear warm-up over a tenth of the steps then cosine to 0.
func fitDemos(ctx context.Context, o Options, m *model.Model, seqs []train.Sequence, rng *rand.Rand) (*DataResult, error) {
	batches := make([][]int, o.Steps)
	for s := range batches {
		for range o.Batch {
			batches[s] = append(batches[s], rng.IntN(len(seqs)))
		}
	}
	warmup := -1.0 // none
	if o.Steps/10 > 0 {
		warmup = float64(o.Steps/10) / float64(o.Steps)
	}
	d := DataOptions{Backend: o.Backend, Batch: o.Batch, LR: o.LR, Warmup: warmup, WeightDecay: 0.01, Log: o.Log, skipTrainNLL: true}
	res := &DataResult{Train: len(seqs), HeldoutBefore: math.NaN(), HeldoutAfter: math.NaN(), Losses: map[int]float64{}}
	return fitSeqs(ctx, d, m, seqs, nil, batches, safetensors.F32, res, time.Now())
}

// conversations are the SFT demonstrations of tasks, as chat conversations: each task's executed
// demonstration (mostly through the tool; some recover from an error, some answer directly),
// a hintShare of them with the rules hint for a flawed first attempt before the problem (then
// always through the tool); hinted counts those. A named-operation problem is shown as
// namedOpDemoTask words it, or left out when it finds no wording.
func conversations(ctx context.Context, tasks []envs.Task, hintShare float64, sess sandbox.Session, rng *rand.Rand) (convs [][]envs.Message, hinted int, err error) {
	for _, t := range tasks {
		kind := retool.DemoTool
		switch x := rng.Float64(); {
		case x < 0.2:
			kind = retool.DemoRecover
		case x < 0.3:
			kind = retool.DemoDirect
		}
		hint := hintShare > 0 && rng.Float64() < hintShare // no draw when off: the shipped model's stream
		made := false                                      // a named operation under a made-up word
		if _, named := t.Meta["op_word"]; named {
			var ok bool
			if t, made, ok = namedOpDemoTask(t, hint, rng); !ok {
				continue
			}
		}
		user := t.Prompt
		if hint { // a bridge thought for a flawed attempt, then the fix
			flaw := retool.Flaws[rng.IntN(len(retool.Flaws))]
			if made {
				// A first attempt at an operation one does not know computes another one, or guesses.
				flaw = [...]string{"computed_else", "guessed"}[rng.IntN(2)]
			}
			h, err := retool.FlawedAttemptHint(ctx, t, flaw, sess, rng)
			if err != nil {
				return nil, 0, err
			}
			kind, user = retool.DemoTool, retool.WithHint(t.Prompt, h)
			hinted++
		}
		demo, err := retool.Demonstration(ctx, t, kind, sess, retool.FormatInterpreter)
		if err != nil {
			return nil, 0, err
		}
		conv := []envs.Message{{Role: "system", Content: retool.DefaultSystem}, {Role: "user", Content: user}}
		for _, m := range demo {
			conv = append(conv, envs.Message{Role: m.Role, Content: m.Content})
		}
		convs = append(convs, conv)
	}
	return convs, hinted, nil
}

// withJudging replaces a share of the demonstrations by judge examples (Options.JudgeShare): for
// each, an attempt of a kind drawn from retool.JudgeKinds at one of tasks, played through a
// Starlark environment, and the PRM's user turn (no system turn, as the PRM phase renders it)
// answered by the reply the environment's knowledge gives. An attempt whose bridge thought a PRM
// reply cannot carry is drawn again. judged counts them.
func withJudging(ctx context.Context, convs [][]envs.Message, tasks []envs.Task, share float64, template string, rng *rand.Rand) (_ [][]envs.Message, judged int, err error) {
	exec := &sandbox.Starlark{}
	out := make([][]envs.Message, 0, len(convs))
	for _, c := range convs {
		if rng.Float64() >= share {
			out = append(out, c)
			continue
		}
		var d retool.JudgeDemo
		for try := 0; ; try++ {
			t := tasks[rng.IntN(len(tasks))]
			kind := retool.JudgeKinds[rng.IntN(len(retool.JudgeKinds))]
			if d, err = retool.JudgeDemonstration(ctx, t, kind, exec, rng, template); err == nil {
				break
			}
			if try == 16 {
				return nil, 0, fmt.Errorf("sft: no judge example after 16 tries: %w", err)
			}
		}
		out = append(out, []envs.Message{{Role: "user", Content: d.Prompt}, {Role: "assistant", Content: d.Reply}})
		judged++
	}
	return out, judged, nil
}

// namedOpDemoTask is the named-operation problem t as SFT demonstrates it, never under a word
// left for RL: without a bridge thought under a word SFT teaches (NamedOps' Taught); with one,
// half the time under a taught word and half under a made-up one (made), whose meaning only the
// hint (naming the program) gives, so that the model learns to read it there. ok is false when
// no rewording outside the held-out problems was found.
func namedOpDemoTask(t envs.Task, hinted bool, rng *rand.Rand) (_ envs.Task, made, ok bool) {
	made = hinted && rng.IntN(2) == 0
	taught := slices.DeleteFunc(slices.Clone(synthetic.NamedOps), func(o synthetic.NamedOp) bool { return !o.Taught })
	for range 8 {
		word := taught[rng.IntN(len(taught))].Word // drawn even when made: the shipped model's stream
		if made {
			word = synthetic.NonceWord(rng)
		}
		if r, ok := synthetic.Reword(t, word); ok {
			return r, made, true
		}
	}
	return t, made, false
}

// newModel is the model SFT trains: o.Init's, or a new small Qwen3-shaped one with random
// weights over tok's vocabulary.
func newModel(o Options, tok *tokenizer.Tokenizer) (*model.Model, error) {
	if o.Init != "" {
		m, err := model.Load(o.Backend, o.Init, model.Options{})
		if err != nil {
			return nil, fmt.Errorf("sft: --init %s: %w", o.Init, err)
		}
		if m.Config.VocabSize < tok.VocabSize() {
			return nil, fmt.Errorf("sft: --init %s: the model has %d token ids, its tokenizer %d", o.Init, m.Config.VocabSize, tok.VocabSize())
		}
		return m, nil
	}
	heads := max(2, o.Hidden/32)
	cfg := &model.Config{Family: model.Qwen3, VocabSize: tok.VocabSize(), HiddenSize: o.Hidden, IntermediateSize: 2 * o.Hidden,
		NumLayers: o.Layers, NumHeads: heads, NumKVHeads: max(1, heads/2), HeadDim: 32, RMSNormEps: 1e-6, RopeTheta: 10000,
		MaxPositions: 1024, TieWordEmbeddings: true, DType: "float32"}
	imEnd, _ := tok.TokenID("<|im_end|>")
	cfg.EOSTokenIDs = []int32{imEnd}
	return model.New(o.Backend, model.RandomParams(cfg, o.Seed, 0.02), model.Options{})
}
