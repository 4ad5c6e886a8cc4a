package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/model"
)

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("GOMLX_BACKEND", device.GoConfig) // as the device package opens it (see engine/device)
	var out, errb bytes.Buffer
	err := Run(args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Builtin: os.DirFS(filepath.Join("..", model.BuiltinSourceDir))})
	return out.String(), err
}

type goldenModel struct {
	Cases []struct {
		InputIDs           []int32   `json:"input_ids"`
		NextTokenLogprobs  []float64 `json:"next_token_logprobs"`
		ArgmaxPerPos       []int32   `json:"argmax_per_pos"`
		GreedyContinuation []int32   `json:"greedy_continuation"`
	} `json:"cases"`
}

func fixture(name string) string { return filepath.Join("..", "testdata", "fixtures", name) }

// recipe is a shipped recipe's path from this package's folder.
func recipe(name string) string { return filepath.Join("..", "recipes", name) }

func idsArg(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// TestScoreAndGenerateMatchGolden runs the sub-commands a user checks a model with and compares
// their JSON with the HF fixture.
func TestScoreAndGenerateMatchGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixture("qwen2-tiny"), "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenModel
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	c := g.Cases[1]
	out, err := runCmd(t, "score", "--model", fixture("qwen2-tiny"), "--ids", idsArg(c.InputIDs), "--greedy", "12", "--backend", "go")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		NextTokenLogprobs []float64 `json:"next_token_logprobs"`
		Argmax            []int32   `json:"argmax"`
		Greedy            []int32   `json:"greedy"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("score printed %q: %v", out, err)
	}
	for i, want := range c.NextTokenLogprobs {
		if math.Abs(s.NextTokenLogprobs[i]-want) > 1e-4 {
			t.Errorf("next_token_logprobs[%d] = %v; want %v", i, s.NextTokenLogprobs[i], want)
		}
	}
	if !slices.Equal(s.Argmax, c.ArgmaxPerPos) || !slices.Equal(s.Greedy, c.GreedyContinuation) {
		t.Errorf("argmax %v greedy %v; want %v %v", s.Argmax, s.Greedy, c.ArgmaxPerPos, c.GreedyContinuation)
	}

	out, err = runCmd(t, "generate", "--model", fixture("qwen2-tiny"), "--ids", idsArg(c.InputIDs), "--max-new", "12", "--json", "--backend", "go")
	if err != nil {
		t.Fatal(err)
	}
	var gen struct {
		NewIDs     []int32   `json:"new_ids"`
		LogProbs   []float32 `json:"logprobs"`
		StopReason string    `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(out), &gen); err != nil {
		t.Fatalf("generate printed %q: %v", out, err)
	}
	if !slices.Equal(gen.NewIDs, c.GreedyContinuation) || gen.StopReason != "max_new" || len(gen.LogProbs) != 12 {
		t.Errorf("generate = %+v; want greedy %v stopping at max_new", gen, c.GreedyContinuation)
	}
}

func TestTokenizeMatchesGolden(t *testing.T) {
	out, err := runCmd(t, "tokenize", "--tokenizer", fixture("qwen3-tokenizer"), "The answer is \\boxed{39}.")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		IDs    []int32  `json:"ids"`
		Tokens []string `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(fixture("qwen3-tokenizer"), "golden.json"))
	var g struct {
		Encodings []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"encodings"`
	}
	json.Unmarshal(data, &g)
	for _, e := range g.Encodings {
		if e.Text == "The answer is \\boxed{39}." && !slices.Equal(e.IDs, got.IDs) {
			t.Errorf("ids %v; want %v", got.IDs, e.IDs)
		}
	}
}

func TestPlanJSON(t *testing.T) {
	out, err := runCmd(t, "plan", recipe("retool.yaml"), "--shape", "qwen3-0.6b", "--vram", "24GiB", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"fits", "kv_slots", "micro_batch", "components", "total"} {
		if _, ok := p[k]; !ok {
			t.Errorf("plan --json lacks %q: %s", k, out)
		}
	}
}

// TestPlanEvalPhase: plan of the reference recipe shows its 32,768-token evaluation as a phase of
// its own, beside rollout's 16,384-token slots.
func TestPlanEvalPhase(t *testing.T) {
	out, err := runCmd(t, "plan", recipe("retool-qwen3-4b.yaml"), "--shape", "qwen3-4b", "--vram", "96GiB")
	if err != nil {
		t.Fatal(err)
	}
	header := regexp.MustCompile(`(?m)^\s+rollout\s+eval\s+prm\s+reference\s+train\s*$`)
	if !header.MatchString(out) || !strings.Contains(out, "sequences of 16384 tokens (evaluation: 32768)") ||
		!regexp.MustCompile(`eval_kv_cache .* \d+ slots × 32768 tokens: the evaluation's context`).MatchString(out) {
		t.Errorf("plan of retool-qwen3-4b.yaml:\n%s\nwant an eval phase of 32768-token slots", out)
	}
}

// plan --set changes a recipe field for the plan only: 8-bit LoRA shows in the options line.
func TestPlanSet(t *testing.T) {
	out, err := runCmd(t, "plan", recipe("retool.yaml"), "--shape", "qwen3-4b", "--vram", "24GiB",
		"--set", "train.lora.rank=16", "--set", "train.optimizer_bits=8")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "options: LoRA rank 16 on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj") ||
		!strings.Contains(out, "8-bit AdamW moments (blocks of 256)") || !strings.Contains(out, "base_weights") {
		t.Errorf("plan --set train.lora.rank=16 --set train.optimizer_bits=8:\n%s", out)
	}
	if _, err := runCmd(t, "plan", recipe("retool.yaml"), "--shape", "qwen3-4b", "--set", "train.lora.rank"); err == nil ||
		!strings.Contains(err.Error(), `--set "train.lora.rank": want section.field=value`) {
		t.Errorf("malformed --set: %v", err)
	}
}

// TestPlanRemoteRollout: with rollout.engines the plan's rollout column holds no KV cache or
// inference copy and a line says the engines generate.
func TestPlanRemoteRollout(t *testing.T) {
	out, err := runCmd(t, "plan", recipe("retool.yaml"), "--shape", "qwen3-0.6b", "--vram", "24GiB",
		"--set", "rollout.engines=serve http://10.0.0.5:8001,sglang http://10.0.0.6:30000")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, want := range []string{"rollout: remote: the 2 engines of rollout.engines generate", "fits: no KV slots (rollout on the engines)"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan with rollout.engines:\n%s\nwant %q", out, want)
		}
	}
	if strings.Contains(out, "kv_cache") || strings.Contains(out, "inference_weights") {
		t.Errorf("plan with rollout.engines:\n%s\nwant no KV cache or inference copy", out)
	}
}

// TestPlanDoesNotFitExitsOne: a recipe that does not fit its budget prints the plan and the
// reason, and exits 1 (with --json too, after the JSON), so scripts can test it; one that fits
// exits 0.
func TestPlanDoesNotFitExitsOne(t *testing.T) {
	t.Setenv("GOMLX_BACKEND", device.GoConfig)
	plan := func(extra ...string) (int, string, string) {
		var out, errb bytes.Buffer
		args := append([]string{"plan", recipe("retool.yaml"), "--shape", "qwen3-4b"}, extra...)
		code := Main(args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
		return code, out.String(), errb.String()
	}
	code, out, errs := plan("--vram", "1GiB")
	if code != 1 || !strings.Contains(out, "does not fit: ") || !strings.Contains(out, "qwen3-4b") {
		t.Errorf("plan --vram 1GiB: exit %d; want 1 after the plan and its reason:\n%s%s", code, out, errs)
	}
	code, out, errs = plan("--vram", "1GiB", "--json")
	var p struct {
		Fits   bool   `json:"fits"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 1 || p.Fits || p.Reason == "" {
		t.Errorf("plan --vram 1GiB --json: exit %d, %v; want 1 after the JSON with fits false and a reason:\n%s%s", code, err, out, errs)
	}
	if code, out, errs = plan("--vram", "96GiB"); code != 0 || !strings.Contains(out, "fits: ") {
		t.Errorf("plan --vram 96GiB: exit %d; want 0:\n%s%s", code, out, errs)
	}
	// An evaluation-only run of the 4B fits in 24 GiB, where training does not.
	if code, out, errs = plan("--vram", "24GiB"); code != 1 {
		t.Errorf("plan --vram 24GiB: exit %d; want 1 (training does not fit):\n%s%s", code, out, errs)
	}
	if code, out, errs = plan("--vram", "24GiB", "--eval"); code != 0 || !strings.Contains(out, "evaluation only: no trainer") {
		t.Errorf("plan --vram 24GiB --eval: exit %d; want 0 with the evaluation-only verdict:\n%s%s", code, out, errs)
	}
}

// TestBadInputErrors: each bad invocation fails with a message naming what is wrong.
func TestBadInputErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no recipe or sub-command"},
		{[]string{"frobnicate"}, `unknown sub-command "frobnicate"`},
		{[]string{"score", "--ids", "1,2"}, "--model DIR is required"},
		{[]string{"score", "--model", fixture("qwen3-tiny"), "--ids", "1,x"}, `"x" is not a token id`},
		{[]string{"score", "--model", fixture("qwen3-tiny"), "--ids", "1,9999", "--backend", "go"}, "outside the vocabulary"},
		{[]string{"score", "--model", "/no/such/model", "--ids", "1", "--backend", "go"}, "/no/such/model"},
		{[]string{"score", "--model", fixture("qwen3-tiny"), "--ids", "1", "--dtype", "int8"}, `--dtype "int8"`},
		{[]string{"generate", "--model", fixture("qwen3-tiny")}, "exactly one of --ids"},
		{[]string{"tokenize", "--tokenizer", fixture("qwen3-tokenizer")}, "give TEXT or --chat"},
		{[]string{"plan", "recipes/none.yaml", "--shape", "qwen3-4b"}, "recipes/none.yaml not found"},
		{[]string{"plan", recipe("retool.yaml"), "--shape", "qwen9"}, `unknown shape "qwen9"`},
		{[]string{"bench"}, "bench needs a target"},
		{[]string{"tool"}, "tool needs a verb"},
		{[]string{"runs", "--store", "/no/such.db"}, "/no/such.db"},
		{[]string{"export", "--store", "x.db"}, "usage: agentrl-tui export"},
		{[]string{"resume"}, "usage: agentrl-tui resume"},
		{[]string{"tokenizer"}, "tokenizer needs a verb"},
		{[]string{"tokenizer", "train", "--out", "x"}, "--corpus FILE and --out DIR are required"},
		{[]string{"sft"}, "--out DIR is required"},
		{[]string{recipe("retool.yaml"), "--backend", "go", "--model", "/nonexistent/model"}, "/nonexistent/model"},
		{[]string{recipe("retool.yaml"), "--backend", "tpu"}, "tpu"},
		{[]string{recipe("retool.yaml"), "--set", "train.nosuch=1"}, "train.nosuch"},
		{[]string{recipe("retool.yaml"), "--set", "train.lr"}, `--set "train.lr": want section.field=value`},
		{[]string{"run"}, "run: give a recipe"},
		{[]string{"runz"}, `unknown sub-command "runz" (did you mean run or runs?)`},
		{[]string{"bench", "nosuch"}, `unknown bench "nosuch"; bench needs a target`},
		{[]string{"plan", recipe("retool.yaml"), "extra"}, `plan: unexpected arguments ["extra"]`},
		{[]string{"runs", "--max-steps", "3"}, "unknown flag: --max-steps"},
	} {
		_, err := runCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestPlanGoBackendOneRAM: with backend.kind go, plan needs no --vram (the budget is this
// machine's memory) and says that its phases share the one RAM with what the host holds.
func TestPlanGoBackendOneRAM(t *testing.T) {
	out, err := runCmd(t, "plan", recipe("retool.yaml"), "--shape", "qwen3-0.6b", "--set", "backend.kind=go",
		"--set", "rollout.max_total_tokens=256", "--set", "rollout.group_size=2")
	if err != nil && !strings.Contains(err.Error(), "exit status 1") {
		t.Fatal(err)
	}
	if !strings.Contains(out, "gradient_workspace") || !strings.Contains(out, "one RAM (the go backend): the phases are sized to") {
		t.Errorf("plan with backend.kind go:\n%s", out)
	}
}
