package hint

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
)

// TestProbeKinds: one row per flaw over every task, each with its hint; the plain prompt's
// demonstration log-probs compared with themselves give a lift of exactly 0, so a row's lift is
// the hint's alone.
func TestProbeKinds(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", model.BuiltinSourceDir))
	if err != nil {
		t.Fatal(err)
	}
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(backend, model.RandomParams(&model.Config{Family: model.Qwen3, VocabSize: tok.VocabSize(), HiddenSize: 16, IntermediateSize: 32,
		NumLayers: 1, NumHeads: 2, NumKVHeads: 1, HeadDim: 8, RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true}, 3, 0.02), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tasks, _, err := synthetic.Tasks{Levels: []int{0, 1}, Seed: 7}.Split(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ProbeKinds(context.Background(), m, tok, tasks, &sandbox.Starlark{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(retool.Flaws) {
		t.Fatalf("%d rows for %d flaws", len(rows), len(retool.Flaws))
	}
	for i, r := range rows {
		if r.Flaw != retool.Flaws[i] || r.Tasks != len(tasks) || r.Example == "" || math.IsNaN(r.Lift) || math.IsInf(r.Lift, 0) {
			t.Errorf("row %d: %+v; want flaw %s over %d tasks with a hint and a finite lift", i, r, retool.Flaws[i], len(tasks))
		}
	}
	if !strings.Contains(rows[0].Example, "copy the printed number") {
		t.Errorf("the wrong_copy hint %q is not the copying-slip hint", rows[0].Example)
	}
	sess, err := (&sandbox.Starlark{}).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	demo, err := retool.Demonstration(context.Background(), tasks[0], retool.DemoTool, sess, retool.FormatInterpreter)
	if err != nil {
		t.Fatal(err)
	}
	a, err := demoLogProbs(m, tok, retool.DefaultSystem, tasks[0], demo, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := demoLogProbs(m, tok, retool.DefaultSystem, tasks[0], demo, "")
	if err != nil {
		t.Fatal(err)
	}
	// The demonstration's own tokens: "<code>\nprint(…)\n</code><|im_end|>" and "\boxed{…}<|im_end|>".
	if own := len(tok.Encode("<code>\n"+tasks[0].Meta["code"]+"\n</code><|im_end|>")) + len(tok.Encode(`\boxed{`+tasks[0].Answer+"}<|im_end|>")); len(a) != own {
		t.Errorf("%d own tokens scored, want %d", len(a), own)
	}
	for j := range a {
		if a[j] != b[j] {
			t.Fatalf("token %d: %v then %v for the same prompt", j, a[j], b[j])
		}
	}
}
