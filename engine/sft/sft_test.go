package sft

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
	"agentrl/recipes"
	"agentrl/store/safetensors"
)

// TestSFTWritesLoadableModel runs a very small SFT and checks that its folder loads as a model and
// a tokenizer, and that the demonstrations' assistant tokens are the only trained ones.
func TestSFTWritesLoadableModel(t *testing.T) {
	r := retoolRecipe(t)
	backend, _ := device.NewGo(device.GoConfig)
	out := filepath.Join(t.TempDir(), "builtin")
	if err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: out, Examples: 40, Vocab: 300, Hidden: 32, Layers: 1, Steps: 3, Batch: 2}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(backend, out, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.VocabSize != tok.VocabSize() {
		t.Errorf("model vocab %d, tokenizer %d", m.Config.VocabSize, tok.VocabSize())
	}
	conv := []envs.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "What is 2 + 2?"},
		{Role: "assistant", Content: "<code>\nprint(2 + 2)\n</code>"}, {Role: "user", Content: "<interpreter>\n4\n</interpreter>"},
		{Role: "assistant", Content: `\boxed{4}`}}
	ids, mask, _ := batch.MaskAssistant(tok, conv, nil)
	var trained []int32
	for i, id := range ids {
		if mask[i] {
			trained = append(trained, id)
		}
	}
	if got := tok.Decode(trained, false); got != "<code>\nprint(2 + 2)\n</code><|im_end|>\\boxed{4}<|im_end|>" {
		t.Errorf("trained text %q", got)
	}
	if got := tok.Decode(ids, false); got[len(got)-len(`\boxed{4}<|im_end|>`):] != `\boxed{4}<|im_end|>` {
		t.Errorf("sequence ends %q", got)
	}
}

// TestSFTHintedDemonstrations: with --hint-share 1 every demonstration's user message carries the
// rules hint for a flawed attempt, where the controller puts hints, and the log says how many.
func TestSFTHintedDemonstrations(t *testing.T) {
	r := retoolRecipe(t)
	backend, _ := device.NewGo(device.GoConfig)
	var log strings.Builder
	out := filepath.Join(t.TempDir(), "hinted")
	if err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: out, Examples: 20, Vocab: 300, Hidden: 32,
		Layers: 1, Steps: 1, Batch: 2, HintShare: 1, Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "20 demonstrations (20 with a bridge thought, 0 judging an attempt)") {
		t.Errorf("log:\n%s", log.String())
	}
	// It measures no NLL over all its conversations and holds none out: the log shows the steps'
	// NLL and claims no other (it once printed "nll before: train 0.0000" and a flag it lacks).
	if got := log.String(); strings.Contains(got, "nll before") || strings.Contains(got, "nll after") || strings.Contains(got, "--heldout-share") {
		t.Errorf("the log claims an NLL it did not measure:\n%s", got)
	}
}

// TestSFTJudgeExamples: with --judge-share 1 every example teaches the PRM's task (the log says
// so), the folder keeps the prompt they were written in, and a model continued from it keeps it
// too; a judge share without a prompt is refused before anything is built.
func TestSFTJudgeExamples(t *testing.T) {
	r, tmpl := retoolRecipe(t), builtinPRMPrompt(t)
	backend, _ := device.NewGo(device.GoConfig)
	var log strings.Builder
	out := filepath.Join(t.TempDir(), "judge")
	if err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: out, Examples: 20, Vocab: 300, Hidden: 32,
		Layers: 1, Steps: 1, Batch: 2, JudgeShare: 1, JudgeTemplate: string(tmpl), Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "20 judging an attempt") {
		t.Errorf("log:\n%s", log.String())
	}
	next := filepath.Join(t.TempDir(), "next")
	if err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: next, Examples: 4, Steps: 1, Batch: 2, Init: out, Log: io.Discard}); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{out, next} {
		if got, err := os.ReadFile(filepath.Join(dir, PRMPromptFile)); err != nil || string(got) != string(tmpl) {
			t.Errorf("%s/%s: %q, %v; want the judge examples' prompt", dir, PRMPromptFile, got, err)
		}
	}
	err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: t.TempDir(), JudgeShare: 0.5})
	if err == nil || !strings.Contains(err.Error(), "--prm-prompt") {
		t.Errorf("a judge share without a prompt: %v; want it refused naming --prm-prompt", err)
	}
}

// TestSFTRejectsHintShare: a share outside [0, 1] is refused with the flag's name and range,
// before any demonstration is built.
func TestSFTRejectsHintShare(t *testing.T) {
	r := retoolRecipe(t)
	backend, _ := device.NewGo(device.GoConfig)
	for _, share := range []float64{-0.5, 1.5, math.NaN()} {
		err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: t.TempDir(), HintShare: share})
		if err == nil || !strings.Contains(err.Error(), "--hint-share") || !strings.Contains(err.Error(), "want 0 (none) to 1 (all)") {
			t.Errorf("hint share %v: %v", share, err)
		}
	}
}

// TestSFTContinuesFromInit: with Init the run keeps that folder's tokenizer files byte for byte and
// its model's shape (the vocabulary, width and depth asked for are ignored), and starts from its
// weights: three steps at a small learning rate move the weights by a few times the rate and no more
// (a model drawn afresh would be 0.02-scale noise away); a folder without a model is refused.
func TestSFTContinuesFromInit(t *testing.T) {
	r := retoolRecipe(t)
	backend, _ := device.NewGo(device.GoConfig)
	base := filepath.Join(t.TempDir(), "base")
	if err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: base, Examples: 30, Vocab: 300, Hidden: 32, Layers: 1, Steps: 1, Batch: 2}); err != nil {
		t.Fatal(err)
	}
	weights := func(dir string) map[string][]float32 {
		t.Helper()
		m, err := model.Load(backend, dir, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.NumLayers != 1 || m.Config.HiddenSize != 32 {
			t.Fatalf("%s: %d layers of width %d; want the init's 1 × 32", dir, m.Config.NumLayers, m.Config.HiddenSize)
		}
		ts, err := m.Params.Tensors(safetensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]float32{}
		for _, x := range ts {
			if out[x.Name], err = x.Float32(); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	before := weights(base)
	out := filepath.Join(t.TempDir(), "continued")
	const lr = 1e-4
	if err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: out, Examples: 30, Vocab: 500, Hidden: 64, Layers: 2,
		Steps: 3, Batch: 2, LR: lr, HintShare: 0.5, Init: base}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		a, _ := os.ReadFile(filepath.Join(base, name))
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from the init's (%v)", name, err)
		}
	}
	var moved float64
	for name, w := range weights(out) {
		for i, v := range w {
			moved = max(moved, math.Abs(float64(v-before[name][i])))
		}
	}
	if moved == 0 || moved > 20*lr {
		t.Errorf("three steps at lr %g moved the weights by at most %g; want above 0 and within 20 × lr", lr, moved)
	}
	err := Run(context.Background(), Options{Recipe: r, Backend: backend, Out: t.TempDir(), Examples: 10, Steps: 1, Batch: 2, Init: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--init") {
		t.Errorf("an init folder without a model: %v; want an error naming --init and the folder", err)
	}
}

// TestSFTIsReproducible: `make builtin` ships what its commands write, so a stage must be a
// function of its seed and the stage before. The same options write the same files byte for byte
// (tokenizer trained afresh, then a continuation with hinted and judging examples), on one thread
// as on GOMAXPROCS (the products split their outputs among workers, never a sum), and
// another seed writes other weights.
func TestSFTIsReproducible(t *testing.T) {
	r, tmpl := retoolRecipe(t), builtinPRMPrompt(t)
	backend, _ := device.NewGo(device.GoConfig)
	read := func(dir, name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sequential, _ := device.NewGo(device.GoSequentialConfig)
	stage := func(seed uint64, init string, oneThread bool) string {
		t.Helper()
		b := backend
		if oneThread { // the ops one at a time, each product on one worker
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			b = sequential
		}
		out := filepath.Join(t.TempDir(), "stage")
		o := Options{Recipe: r, Backend: b, Out: out, Examples: 24, Vocab: 300, Hidden: 32, Layers: 1, Steps: 3, Batch: 2, Seed: seed, Log: io.Discard}
		if init != "" {
			o.Init, o.HintShare, o.JudgeShare, o.JudgeTemplate = init, 0.5, 0.5, string(tmpl)
		}
		if err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		return out
	}
	base1, base2 := stage(7, "", false), stage(7, "", true)
	next1, next2 := stage(9, base1, true), stage(9, base2, false)
	for _, pair := range [][2]string{{base1, base2}, {next1, next2}} {
		for _, name := range []string{"model.safetensors", "tokenizer.json", "config.json"} {
			if !bytes.Equal(read(pair[0], name), read(pair[1], name)) {
				t.Errorf("%s: the same stage run twice wrote different files", name)
			}
		}
	}
	if bytes.Equal(read(stage(8, base1, false), "model.safetensors"), read(next1, "model.safetensors")) {
		t.Error("seeds 8 and 9 wrote the same weights; want the seed to choose the examples and their order")
	}
}

// TestSFTConversationsNamedOps: what SFT shows of named-operation problems, in the conversations
// themselves: no user turn names an operation left for RL; an unhinted one names a taught word; a
// made-up word comes only with a hint that names the program the demonstration then runs, and
// hinted ones are about half made-up, half taught words; numbers, answer and program stay the
// task's.
func TestSFTConversationsNamedOps(t *testing.T) {
	tasks, _, err := synthetic.Tasks{Levels: []int{0, synthetic.NamedOpLevel}, Seed: 5}.Split(300, 0)
	if err != nil {
		t.Fatal(err)
	}
	sess, _ := (&sandbox.Starlark{}).NewSession()
	convs, hinted, err := conversations(context.Background(), tasks, 0.5, sess, rand.New(rand.NewPCG(1, 17)))
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) < 290 || hinted < 100 || hinted > 200 {
		t.Fatalf("%d conversations of 300 tasks, %d hinted; want about 300 and 150", len(convs), hinted)
	}
	var named, namedHinted, made int
	for _, conv := range convs {
		user := conv[1].Content
		problem := user[strings.LastIndex(user, "\n")+1:]
		var word string
		var a, b int
		if n, _ := fmt.Sscanf(problem, "What is the %s of %d and %d?", &word, &a, &b); n != 3 {
			continue
		}
		named++
		var op *synthetic.NamedOp
		for i := range synthetic.NamedOps {
			if synthetic.NamedOps[i].Word == word {
				op = &synthetic.NamedOps[i]
			}
		}
		hint := strings.HasPrefix(user, "Hint: ")
		code := conv[2].Content
		switch {
		case op != nil && !op.Taught:
			t.Fatalf("SFT shows %q, an operation left for RL", user)
		case !hint && op == nil:
			t.Errorf("unhinted %q: a made-up word; want a taught one", user)
		case hint && op == nil && !strings.Contains(user, strings.TrimSuffix(strings.TrimPrefix(code, "<code>\n"), "\n</code>")):
			t.Errorf("hinted %q: the hint does not name the program %q", user, code)
		}
		if hint {
			namedHinted++
			if op == nil {
				made++
			}
		}
	}
	if made < namedHinted/4 || made > 3*namedHinted/4 {
		t.Errorf("%d of %d hinted named-operation conversations under a made-up word; want about half", made, namedHinted)
	}
	if named < 100 || namedHinted < 30 || named-namedHinted < 30 {
		t.Errorf("%d named-operation conversations, %d hinted", named, namedHinted)
	}
}

// TestBuiltinStageThroughDataLoop: make builtin's first stage (levels 0-1, a tokenizer and a
// model from scratch), cut down to 24 steps of a tiny model, trains through the loop of sft
// --data (fitDemos → fitSeqs: the step in passes through the RL trainer's Update) with the loss
// curve of the loop it replaced (SFTStep on the whole batch in one pass, the same batches drawn
// from the same stream, the same schedule), step for step within float tolerance.
func TestBuiltinStageThroughDataLoop(t *testing.T) {
	r := retoolRecipe(t)
	r.Env.Tasks.Synthetic.Levels = []int{0, 1}
	backend, _ := device.NewGo(device.GoConfig)
	o := Options{Recipe: r, Backend: backend, Examples: 32, Vocab: 300, Hidden: 32, Layers: 1, Steps: 24, Batch: 4, Seed: 1}
	// The loop before: SFTStep on each step's batch (engine/sft before #33's make-builtin slice).
	d, err := prepare(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := d.pcg.MarshalBinary() // the batches' stream, to draw them again below
	if err != nil {
		t.Fatal(err)
	}
	m, err := newModel(o, d.tok)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(m, train.Config{LR: o.LR, GradClip: 1, WeightDecay: 0.01, LogitsChunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var before []float64
	for step := 1; step <= o.Steps; step++ {
		b := make([]train.Sequence, o.Batch)
		for i := range b {
			s := d.seqs[d.rng.IntN(len(d.seqs))]
			b[i] = train.Sequence{Tokens: s.Tokens, LossMask: s.LossMask}
		}
		nll, err := tr.SFTStep(b, train.LR(o.LR, step, o.Steps/10, o.Steps, "cosine"))
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, nll)
	}
	// The loop now, from the same model and stream.
	if err := d.pcg.UnmarshalBinary(stream); err != nil {
		t.Fatal(err)
	}
	m2, err := newModel(o, d.tok)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fitDemos(context.Background(), o, m2, d.seqs, d.rng)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for step := 1; step <= o.Steps; step++ {
		a, b := before[step-1], res.Losses[step]
		worst = max(worst, math.Abs(a-b))
		if math.Abs(a-b) > 1e-3*max(1, math.Abs(a)) {
			t.Errorf("step %d: loss %.6f through the data loop, %.6f through the loop before", step, b, a)
		}
	}
	t.Logf("loss %.4f -> %.4f over %d steps; largest difference %.2g", before[0], before[len(before)-1], o.Steps, worst)
	if !(before[len(before)-1] < before[0]-1) {
		t.Errorf("the loss did not fall: %v", before)
	}
}

// TestJudgeExamplesTrainTheReply: a judge example is laid out as the PRM phase renders its
// prompt (the user turn alone, then the generation prompt) and trains exactly its reply: the
// tokens of "Step 1: …" through <|im_end|>, nothing of the prompt.
func TestJudgeExamplesTrainTheReply(t *testing.T) {
	r, tmpl := retoolRecipe(t), builtinPRMPrompt(t)
	o := Options{Recipe: r, Out: t.TempDir(), Examples: 8, Vocab: 300, JudgeShare: 1, JudgeTemplate: string(tmpl), Log: io.Discard}
	d, err := prepare(context.Background(), &o)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range d.seqs {
		var prompt, reply []int32
		for k, id := range s.Tokens {
			if s.LossMask[k] {
				reply = append(reply, id)
			} else if len(reply) == 0 {
				prompt = append(prompt, id)
			} else {
				t.Fatalf("sequence %d: a prompt token after the reply began", i)
			}
		}
		p, rep := d.tok.Decode(prompt, false), d.tok.Decode(reply, false)
		if !strings.HasPrefix(p, "<|im_start|>user\n") || !strings.HasSuffix(p, "<|im_end|>\n<|im_start|>assistant\n") || strings.Contains(p, "system") {
			t.Errorf("sequence %d: the prompt is not the PRM's user turn and generation prompt:\n%s", i, p)
		}
		if !strings.HasPrefix(rep, "Step 1: ") || !strings.HasSuffix(rep, "}<|im_end|>") {
			t.Errorf("sequence %d: trains %q; want the reply, Step 1 … \\boxed{…}<|im_end|>", i, rep)
		}
	}
}

// retoolRecipe is recipes/retool.yaml as the tests read it (the environment ignored).
func retoolRecipe(t *testing.T) *recipes.Recipe {
	t.Helper()
	r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// builtinPRMPrompt is the PRM prompt the built-in model's judge examples are written in.
func builtinPRMPrompt(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "recipes", "prm-builtin.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
