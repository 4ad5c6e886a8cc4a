package sft

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"agentrl/engine/batch"
	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs/retool"
	"agentrl/store"
)

var (
	builtinDir    = filepath.Join("..", "..", "testdata", "builtin")
	retoolSFT     = filepath.Join("..", "..", "testdata", "data", "retool-sft.jsonl")
	toolCallsSFT  = filepath.Join("..", "..", "testdata", "data", "retool-sft-toolcalls.jsonl")
	sampleMaxLen  = 1024 // the built-in model's positions
	sampleBackend = func(t *testing.T) *DataOptions {
		t.Helper()
		backend, err := device.NewGo(device.GoConfig)
		if err != nil {
			t.Fatal(err)
		}
		return &DataOptions{Backend: backend, Init: builtinDir, MaxLen: sampleMaxLen, Seed: 1}
	}
)

// TestReadConversationsLayouts: the sample files read in their layouts; a conversation without
// a system message gets the layout's system prompt; OpenAI tool calls (arguments an object)
// become the template's calls, and the default tool takes the calls' name.
func TestReadConversationsLayouts(t *testing.T) {
	convs, err := ReadConversations(retoolSFT, retool.LayoutReTool)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 3 || convs[0][0].Role != "system" || convs[0][0].Content != retool.DefaultSystem || convs[0][2].Role != "assistant" {
		t.Fatalf("retool conversations: %d, first %+v", len(convs), convs[0])
	}
	calls, err := ReadConversations(toolCallsSFT, retool.LayoutToolCall)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls[1][0].Content; got != retool.SystemForLayout(retool.LayoutToolCall, "") {
		t.Errorf("tool_call system %q", got)
	}
	c := calls[1][2].ToolCalls
	if len(c) != 1 || c[0].Name != "code_interpreter" || c[0].Text() != `{"code": "print(pow(7, 2024, 1000))"}` {
		t.Errorf("tool calls %+v (%s)", c, c[0].Text())
	}
	tools, err := Tools("", retool.LayoutToolCall, calls)
	if err != nil || len(tools) != 1 || !strings.Contains(string(tools[0]), `"name": "code_interpreter"`) {
		t.Errorf("default tools %s, %v", tools, err)
	}
	if tools, err := Tools("", retool.LayoutReTool, convs); err != nil || tools != nil {
		t.Errorf("retool tools %s, %v", tools, err)
	}
	if _, err := Tools(`[{"type": "function"}]`, retool.LayoutToolCall, calls); err == nil || !strings.Contains(err.Error(), "--tools") {
		t.Errorf("bad --tools: %v", err)
	}
	// The retool file read as tool_call is refused nowhere (its code is plain text there), the
	// tool-call file as retool is: its calls name the flag to give.
	if _, err := ReadConversations(toolCallsSFT, retool.LayoutReTool); err == nil || !strings.Contains(err.Error(), "retool-sft-toolcalls.jsonl:1: field messages[1].tool_calls") || !strings.Contains(err.Error(), "--format tool_call") {
		t.Errorf("tool calls as retool: %v", err)
	}
}

type pqMessage struct {
	Role    string `parquet:"role"`
	Content string `parquet:"content"`
}

type pqConversation struct {
	Messages []pqMessage `parquet:"messages,list"`
}

// TestReadConversationsParquetFolder: a downloaded dataset folder (the ReTool-SFT sample as a
// Parquet file under data/, a hidden cache folder beside it) reads as the JSON Lines file does;
// a bad row is named by file, row and field.
func TestReadConversationsParquetFolder(t *testing.T) {
	want, err := ReadConversations(retoolSFT, retool.LayoutReTool)
	if err != nil {
		t.Fatal(err)
	}
	var rows []pqConversation
	for _, conv := range want {
		var r pqConversation
		for _, m := range conv[1:] { // the file's own messages, without the system prompt added
			r.Messages = append(r.Messages, pqMessage{m.Role, m.Content})
		}
		rows = append(rows, r)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.MkdirAll(filepath.Join(dir, ".cache"), 0o755)
	os.WriteFile(filepath.Join(dir, ".cache", "junk.jsonl"), []byte("not json\n"), 0o644)
	var b bytes.Buffer
	if err := parquet.Write(&b, rows); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "data", "train-00000-of-00001.parquet")
	os.WriteFile(file, b.Bytes(), 0o644)
	got, err := ReadConversations(dir, retool.LayoutReTool)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parquet folder:\n%+v\nwant\n%+v", got, want)
	}
	rows[1].Messages[0].Role = ""
	b.Reset()
	parquet.Write(&b, rows)
	os.WriteFile(file, b.Bytes(), 0o644)
	if _, err := ReadConversations(dir, retool.LayoutReTool); err == nil || !strings.Contains(err.Error(), file+": row 2: field messages[0].role: missing") {
		t.Errorf("bad row: %v", err)
	}
}

// TestReadConversationsErrors: each malformed line is named by file, line and field.
func TestReadConversationsErrors(t *testing.T) {
	good := `{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}`
	for _, c := range []struct {
		line, want string
		layout     retool.Layout
	}{
		{`{"prompt": "q"}`, ":2: field messages: missing", retool.LayoutReTool},
		{`{"messages": []}`, ":2: field messages: empty", retool.LayoutReTool},
		{`not json`, ":2: not a JSON object", retool.LayoutReTool},
		{`{"messages": [{"content": "q"}]}`, ":2: field messages[0].role: missing", retool.LayoutReTool},
		{`{"messages": [{"role": "robot", "content": "q"}]}`, `:2: field messages[0].role: "robot"`, retool.LayoutReTool},
		{`{"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "a"}]}`, ":2: field messages[0].content: not a string", retool.LayoutReTool},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x <code>print(1)"}]}`, ":2: field messages[1].content: an assistant turn with an unclosed <code> (at byte 2)", retool.LayoutReTool},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<code>a</code><code>b<code>c</code>"}]}`, ":2: field messages[1].content: an assistant turn with an unclosed <code> (at byte 14)", retool.LayoutReTool},
		{`{"messages": [{"role": "user", "content": "q"}]}`, ":2: field messages: no assistant message", retool.LayoutChat},
		{`{"messages": [{"role": "assistant", "content": "a"}]}`, ":2: field messages: the first message after the system prompt must be the user's", retool.LayoutChat},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]}`, ":2: field messages[1].role: a system message after the first", retool.LayoutChat},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": [{"type": "function", "function": {"arguments": {}}}]}]}`, ":2: field messages[1].tool_calls[0].function.name: missing", retool.LayoutToolCall},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "4"}, {"role": "assistant", "content": "a"}]}`, ":2: field messages[1].role: a tool message that answers no tool call", retool.LayoutToolCall},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "tool", "content": "4"}]}`, ":2: field messages[2].role: a tool message in format retool", retool.LayoutReTool},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  "}]}`, ":2: field messages[1].content: empty, with no tool_calls", retool.LayoutReTool},
		{`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null}]}`, ":2: field messages[1].content: empty, with no tool_calls", retool.LayoutChat},
	} {
		path := filepath.Join(t.TempDir(), "bad.jsonl")
		if err := os.WriteFile(path, []byte(good+"\n"+c.line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadConversations(path, c.layout)
		if err == nil || !strings.Contains(err.Error(), path+c.want) {
			t.Errorf("%s: got %v, want %q", c.line, err, c.want)
		}
	}
	// The unclosed <code> is format retool's: plain chat reads it as text.
	path := filepath.Join(t.TempDir(), "chat.jsonl")
	os.WriteFile(path, []byte(`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x <code>print(1)"}]}`+"\n"), 0o644)
	if _, err := ReadConversations(path, retool.LayoutChat); err != nil {
		t.Error(err)
	}
}

// TestRunDataLowersLossAndLoads: a short SFT of the built-in model on the ReTool-SFT sample
// lowers the loss of its conversations; the trained tokens are exactly batch.MaskAssistant's;
// the folder written loads back with the same log-probs as the model in memory had.
func TestRunDataLowersLossAndLoads(t *testing.T) {
	o := sampleBackend(t)
	o.Data, o.Out, o.Format = retoolSFT, filepath.Join(t.TempDir(), "out"), retool.LayoutReTool
	o.Steps, o.Batch, o.LR = 6, 3, 2e-3
	var log strings.Builder
	o.Log = &log
	res, err := RunData(context.Background(), *o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v\n%s", *res, log.String())
	if res.Conversations != 3 || res.Train != 3 || res.Dropped != 0 || res.Steps != 6 {
		t.Errorf("result %+v", *res)
	}
	if !(res.TrainAfter < res.TrainBefore-1) {
		t.Errorf("nll %.4f before, %.4f after", res.TrainBefore, res.TrainAfter)
	}
	// The mask is batch.MaskAssistant's, on the conversations with the layout's system prompt.
	tok, err := tokenizer.Load(builtinDir)
	if err != nil {
		t.Fatal(err)
	}
	convs, _ := ReadConversations(retoolSFT, retool.LayoutReTool)
	var seqs []train.Sequence
	tokens, trained := 0, 0
	for _, conv := range convs {
		ids, mask, err := batch.MaskAssistant(tok, conv, nil)
		if err != nil {
			t.Fatalf("not renderable: %v", err)
		}
		seqs = append(seqs, train.Sequence{Tokens: ids, LossMask: mask})
		tokens += len(ids)
		for _, m := range mask {
			if m {
				trained++
			}
		}
	}
	if res.Tokens != tokens || res.TrainedTokens != trained || trained == 0 || trained == tokens {
		t.Errorf("tokens %d trained %d; MaskAssistant's %d and %d", res.Tokens, res.TrainedTokens, tokens, trained)
	}
	// The folder loads back: its log-probs are the in-memory model's after the last step.
	m, err := model.Load(o.Backend, o.Out, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokenizer.Load(o.Out); err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(m, train.Config{LogitsChunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	got, err := meanNLL(tr, seqs, 3)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-res.TrainAfter) > 1e-6 {
		t.Errorf("loaded model's nll %.7f, in memory %.7f", got, res.TrainAfter)
	}
	s, err := m.Score([][]int32{seqs[0].Tokens[:64]})
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range s.NextLogProbs[0] {
		if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) || lp > 0 {
			t.Fatalf("score log-probs %v", s.NextLogProbs[0])
		}
	}
}

// TestRunDataToolCallsHeldout: the tool-call sample trains in its layout with a held-out share,
// which gets an evaluation loss before and after; a conversation longer than --max-len (one of
// the three, over the built-in model's 1024 positions) is dropped and counted, and dropping all
// is an error.
func TestRunDataToolCallsHeldout(t *testing.T) {
	o := sampleBackend(t)
	o.Data, o.Out, o.Format = toolCallsSFT, filepath.Join(t.TempDir(), "out"), retool.LayoutToolCall
	o.Epochs, o.Batch, o.LR, o.HeldoutShare = 2, 2, 1e-3, 0.3
	res, err := RunData(context.Background(), *o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *res)
	if res.Dropped != 1 || res.Train != 1 || res.Heldout != 1 || res.Steps != 2 || math.IsNaN(res.HeldoutBefore) || math.IsNaN(res.HeldoutAfter) {
		t.Errorf("result %+v", *res)
	}
	if !(res.TrainAfter < res.TrainBefore) {
		t.Errorf("nll %.4f before, %.4f after", res.TrainBefore, res.TrainAfter)
	}
	tok, _ := tokenizer.Load(builtinDir)
	convs, _ := ReadConversations(toolCallsSFT, retool.LayoutToolCall)
	tools, _ := Tools("", retool.LayoutToolCall, convs)
	seqs, _, _, _ := Sequences(tok, convs, tools, 0)
	lens := []int{len(seqs[0].Tokens), len(seqs[1].Tokens), len(seqs[2].Tokens)}
	short := min(lens[0], lens[1], lens[2])
	if _, kept, dropped, err := Sequences(tok, convs, tools, short); err != nil || len(kept) == 0 || dropped == 0 || len(kept)+dropped != 3 {
		t.Errorf("max-len %d of %v: kept %d, dropped %d, %v", short, lens, len(kept), dropped, err)
	}
	o.MaxLen = short - 1
	if _, err := RunData(context.Background(), *o); err == nil || !strings.Contains(err.Error(), "all 3 conversations are longer than --max-len") {
		t.Errorf("all dropped: %v", err)
	}
}

// TestRunDataMicroBatches: a step's batch in micro-batches of one conversation, their gradients
// summed into one update, trains as the whole batch in one pass does.
func TestRunDataMicroBatches(t *testing.T) {
	run := func(micro int) *DataResult {
		o := sampleBackend(t)
		o.Data, o.Out, o.Format = retoolSFT, filepath.Join(t.TempDir(), "out"), retool.LayoutReTool
		o.Steps, o.Batch, o.MicroBatch, o.LR = 3, 3, micro, 2e-3
		res, err := RunData(context.Background(), *o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	whole, micro := run(0), run(1)
	t.Logf("nll after 3 steps: %.6f in one pass, %.6f in micro-batches of one", whole.TrainAfter, micro.TrainAfter)
	if !(micro.TrainAfter < micro.TrainBefore-1) || math.Abs(whole.TrainAfter-micro.TrainAfter) > 1e-4 {
		t.Errorf("nll after: %.6f whole, %.6f micro-batched (from %.6f)", whole.TrainAfter, micro.TrainAfter, micro.TrainBefore)
	}
}

// TestSFTStepAsTrainer: a step in micro-batches through Update, with the ratio's old log-probs
// taken in the graph (train.Config.OnPolicy), moves the model as the trainer's own SFTStep does
// with the whole batch in one pass after a log-probs pass.
func TestSFTStepAsTrainer(t *testing.T) {
	o := sampleBackend(t)
	tok, err := tokenizer.Load(builtinDir)
	if err != nil {
		t.Fatal(err)
	}
	convs, _ := ReadConversations(retoolSFT, retool.LayoutReTool)
	seqs, _, _, err := Sequences(tok, convs, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() []train.Sequence {
		var b []train.Sequence
		for _, s := range seqs {
			b = append(b, train.Sequence{Tokens: s.Tokens, LossMask: s.LossMask})
		}
		return b
	}
	after := func(micro bool) (before, after float64) {
		m, err := model.Load(o.Backend, builtinDir, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := train.Config{LR: 1e-3, GradClip: 1, LogitsChunk: 64}
		if micro { // and the old log-probs in the graph, as sft --data trains
			cfg.MicroBatch, cfg.GradAccumulation, cfg.OnPolicy = 1, 3, true
		}
		tr, err := train.New(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if micro {
			before, err = sftStep(tr, fresh(), 1e-3)
		} else {
			before, err = tr.SFTStep(fresh(), 1e-3)
		}
		if err != nil {
			t.Fatal(err)
		}
		after, err = meanNLL(tr, seqs, 3)
		if err != nil {
			t.Fatal(err)
		}
		return before, after
	}
	b1, a1 := after(false)
	b2, a2 := after(true)
	t.Logf("nll %.6f -> %.6f by SFTStep, %.6f -> %.6f in micro-batches of one", b1, a1, b2, a2)
	if math.Abs(b1-b2) > 1e-5 || math.Abs(a1-a2) > 1e-4 || !(a2 < b2) {
		t.Errorf("nll %.6f -> %.6f by SFTStep, %.6f -> %.6f in micro-batches", b1, a1, b2, a2)
	}
}

// TestRunDataStoredHeldoutExport: a stored SFT run on testdata/data/sft-tiny.jsonl with a
// quarter held out (seed 1) lowers the held-out loss; its last checkpoint, exported from the
// store as export does, loads back with logits identical to the folder the run wrote, whose
// held-out loss is the one the run measured in memory, to the bit.
func TestRunDataStoredHeldoutExport(t *testing.T) {
	o := sampleBackend(t)
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o.Data, o.Out, o.Format = filepath.Join("..", "..", "testdata", "data", "sft-tiny.jsonl"), filepath.Join(dir, "out"), retool.LayoutReTool
	o.Steps, o.Batch, o.LR, o.HeldoutShare, o.Store, o.RunID = 6, 2, 2e-3, 0.25, st, "tiny"
	res, err := RunData(context.Background(), *o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held-out nll %.4f -> %.4f, train %.4f -> %.4f", res.HeldoutBefore, res.HeldoutAfter, res.TrainBefore, res.TrainAfter)
	if res.Heldout != 2 || !(res.HeldoutAfter < res.HeldoutBefore-1) {
		t.Errorf("held out %d, nll %.4f -> %.4f", res.Heldout, res.HeldoutBefore, res.HeldoutAfter)
	}
	run, err := st.GetRun("tiny")
	if err != nil || run.Kind != store.KindSFT || run.Status != "finished" {
		t.Fatalf("stored run %+v, %v", run, err)
	}
	metrics, _ := st.Metrics("tiny")
	if got := metrics[6]["eval_loss"]; got != res.HeldoutAfter {
		t.Errorf("stored eval_loss at step 6 %v; the run's %v", got, res.HeldoutAfter)
	}
	exported := filepath.Join(dir, "exported")
	if err := st.Export("tiny", 6, exported); err != nil {
		t.Fatal(err)
	}
	a, err := model.Load(o.Backend, o.Out, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := model.Load(o.Backend, exported, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(exported)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("<|im_start|>user\nWhat is 9*19?<|im_end|>\n<|im_start|>assistant\n<code>\nprint(9*19)\n</code>")
	la, err := a.Logits(ids)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Logits(ids)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(la, lb) {
		t.Errorf("the exported checkpoint's logits differ from the written folder's")
	}
	// The written folder is the model in memory: its held-out loss is the run's, to the bit.
	convs, _ := ReadConversations(o.Data, o.Format)
	seqs, _, _, _ := Sequences(tok, convs, nil, 0)
	tr, err := train.New(b, train.Config{LogitsChunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// The held-out pair is the first two after the seeded shuffle RunData does.
	rng := rand.New(rand.NewPCG(o.Seed, 33))
	rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	got, err := meanNLL(tr, seqs[:2], o.Batch)
	if err != nil {
		t.Fatal(err)
	}
	if got != res.HeldoutAfter {
		t.Errorf("the exported model's held-out nll %v; the run measured %v", got, res.HeldoutAfter)
	}
}

// TestPlan: steps by count run on across epochs (each epoch a new order of every conversation);
// by epochs their last step is short; by tokens a step takes conversations until their tokens
// reach the budget; the same seed plans the same steps.
func TestPlan(t *testing.T) {
	lens := []int{100, 50, 300, 20, 80}
	p := plan(rand.New(rand.NewPCG(1, 33)), lens, 2, 0, 0, 2)
	if len(p) != 6 || len(p[2]) != 1 || len(p[5]) != 1 {
		t.Errorf("2 epochs of 5 in steps of 2: %v", p)
	}
	seen := map[int]int{}
	for _, b := range p {
		for _, i := range b {
			seen[i]++
		}
	}
	for i := range lens {
		if seen[i] != 2 {
			t.Errorf("conversation %d in %d steps of 2 epochs: %v", i, seen[i], p)
		}
	}
	if p := plan(rand.New(rand.NewPCG(1, 33)), lens, 2, 0, 7, 1); len(p) != 7 || len(p[2]) != 2 {
		t.Errorf("7 steps of 2: %v", p)
	}
	p = plan(rand.New(rand.NewPCG(1, 33)), lens, 2, 150, 0, 1)
	total := 0
	for k, b := range p {
		sum := 0
		for j, i := range b {
			if j == len(b)-1 && sum >= 150 {
				t.Errorf("step %d %v takes a conversation past the budget", k, b)
			}
			sum += lens[i]
		}
		if sum < 150 && k != len(p)-1 {
			t.Errorf("step %d %v: %d tokens, under the budget", k, b, sum)
		}
		total += len(b)
	}
	if total != len(lens) || !reflect.DeepEqual(p, plan(rand.New(rand.NewPCG(1, 33)), lens, 2, 150, 0, 1)) {
		t.Errorf("one epoch by 150 tokens: %v", p)
	}
}

// TestRunDataLoRAResume: --lora 8 with 4 steps of at least 200 tokens in micro-batches of one
// conversation trains the adapters only and lowers the held-out loss; a run stopped after step 2
// (its context cancelled, as a signal does) and resumed stores the uninterrupted run's loss at
// every step and writes the same merged folder, whose held-out loss is the run's (merged weights:
// to float tolerance); export --peft writes the adapters.
func TestRunDataLoRAResume(t *testing.T) {
	dir := t.TempDir()
	run := func(name string, stopAt int) (*DataResult, *store.Store) {
		o := sampleBackend(t)
		st, err := store.Open(filepath.Join(dir, name+".db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		o.Data, o.Out, o.Format = filepath.Join("..", "..", "testdata", "data", "sft-tiny.jsonl"), filepath.Join(dir, name), retool.LayoutReTool
		o.Steps, o.TokensPerStep, o.MicroBatch, o.LR, o.HeldoutShare, o.LoRA, o.SaveEvery = 4, 200, 1, 5e-3, 0.25, 8, 2
		o.Store, o.RunID = st, name
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o.Emit = func(e event.Event) {
			if m, ok := e.(event.StepMetrics); ok && stopAt > 0 && m.Step == stopAt {
				cancel()
			}
		}
		res, err := RunData(ctx, *o)
		if err != nil {
			t.Fatal(err)
		}
		if stopAt > 0 {
			if res.Stopped == "" || res.Step != stopAt {
				t.Fatalf("stopped %q at step %d; want a stop at %d", res.Stopped, res.Step, stopAt)
			}
			r, err := StoredOptions(st, name)
			if err != nil {
				t.Fatal(err)
			}
			r.Backend = o.Backend
			if res, err = RunData(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		return res, st
	}
	whole, st := run("whole", 0)
	t.Logf("held-out nll %.4f -> %.4f, train %.4f -> %.4f", whole.HeldoutBefore, whole.HeldoutAfter, whole.TrainBefore, whole.TrainAfter)
	if !(whole.HeldoutAfter < whole.HeldoutBefore-0.5) || whole.Steps != 4 {
		t.Errorf("%+v", *whole)
	}
	resumed, st2 := run("resumed", 2)
	ma, _ := st.Metrics("whole")
	mb, _ := st2.Metrics("resumed")
	for step := 0; step <= 4; step++ {
		if ma[step]["loss"] != mb[step]["loss"] || ma[step]["eval_loss"] != mb[step]["eval_loss"] {
			t.Errorf("step %d: loss %v / %v resumed, uninterrupted %v / %v", step, mb[step]["loss"], mb[step]["eval_loss"], ma[step]["loss"], ma[step]["eval_loss"])
		}
	}
	if resumed.HeldoutAfter != whole.HeldoutAfter {
		t.Errorf("held-out after %v resumed, %v uninterrupted", resumed.HeldoutAfter, whole.HeldoutAfter)
	}
	wa, _ := os.ReadFile(filepath.Join(dir, "whole", "model.safetensors"))
	wb, _ := os.ReadFile(filepath.Join(dir, "resumed", "model.safetensors"))
	if len(wa) == 0 || !bytes.Equal(wa, wb) {
		t.Errorf("the merged folders differ")
	}
	// The merged folder: a plain model whose held-out loss is the adapters' (to float tolerance).
	m, err := model.Load(sampleBackend(t).Backend, filepath.Join(dir, "whole"), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.LoRA.Enabled() {
		t.Errorf("the merged folder has adapters")
	}
	tok, _ := tokenizer.Load(builtinDir)
	convs, _ := ReadConversations(filepath.Join("..", "..", "testdata", "data", "sft-tiny.jsonl"), retool.LayoutReTool)
	seqs, _, _, _ := Sequences(tok, convs, nil, 0)
	rng := rand.New(rand.NewPCG(1, 33))
	rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
	tr, err := train.New(m, train.Config{LogitsChunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	got, err := meanNLL(tr, seqs[:2], 8)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-whole.HeldoutAfter) > 1e-4 {
		t.Errorf("merged folder's held-out nll %.6f; the run's %.6f", got, whole.HeldoutAfter)
	}
	if err := st.ExportPEFT("whole", 4, filepath.Join(dir, "peft")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "peft", "adapter_model.safetensors")); err != nil {
		t.Error(err)
	}
}

// TestBench: bench sft's step runs on the built-in model and counts what it trained.
func TestBench(t *testing.T) {
	m, err := model.Load(sampleBackend(t).Backend, builtinDir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Bench(m, BenchConfig{BenchConfig: train.BenchConfig{Sequences: 2, Length: 32, Prompt: 8, MicroBatch: 1, Updates: 1, Seed: 1}, GradientCheckpointing: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.TrainedTokens != 2*24 || !(res.TokensPerSec > 0) || !(res.StepSeconds > 0) {
		t.Errorf("%+v", *res)
	}
}

// TestRunDataLogWithoutHeldout: without a held-out share and a length bound the log says so,
// rather than "held-out NaN" and "0 dropped, longer than 0 tokens".
func TestRunDataLogWithoutHeldout(t *testing.T) {
	o := sampleBackend(t)
	var log strings.Builder
	o.Data, o.Format, o.Log = retoolSFT, retool.LayoutReTool, &log
	o.Steps, o.Batch, o.LR, o.MaxLen = 1, 2, 1e-3, 0
	if _, err := RunData(context.Background(), *o); err != nil {
		t.Fatal(err)
	}
	got := log.String()
	for _, bad := range []string{"NaN", "longer than 0 tokens"} {
		if strings.Contains(got, bad) {
			t.Errorf("the log says %q:\n%s", bad, got)
		}
	}
	for _, want := range []string{"no length bound (--max-len 0)", "no held-out set (--heldout-share above 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log does not say %q:\n%s", want, got)
		}
	}
}
