// Command agentrl-tui is a terminal workbench for agentic reinforcement learning on one GPU.
//
// main.go holds flags, sub-commands and wiring only; the logic lives in engine/, envs/, store/ and ui/.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine"
	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/recipes"
	"agentrl/store"
	"agentrl/ui"
)

const usage = `agentrl-tui — agentic RL on one GPU

usage:
  agentrl-tui RECIPE.yaml [flags]          run a recipe (see recipes/)
  agentrl-tui tokenize --tokenizer DIR [--chat FILE.json] [TEXT]
                                           token ids and token strings as JSON
  agentrl-tui score --model DIR --ids 1,2,3 [--greedy N] [--backend auto|go|cuda]
                                           teacher-forced log-probs of ids, as JSON
  agentrl-tui generate --model DIR (--ids 1,2,3 | --prompt TEXT [--tokenizer DIR]) --max-new N [--temperature T --seed S] [--json]
                                           run one request through the rollout engine
  agentrl-tui bench rollout (--model DIR | --shape qwen3-0.6b) [--slots N --sequences N --prompt-len N --new N]
                                           generation throughput, step time, occupancy, memory-bandwidth share
  agentrl-tui plan RECIPE [--model DIR | --shape NAME] [--vram 24GiB] [--json]
                                           the GPU memory ledger, KV slots and micro-batch; runs nothing
  agentrl-tui tool run --executor python|starlark [--timeout D] < code
                                           run code as the environment would; JSON observation and status
  agentrl-tui runs --store PATH [--json]   runs in a store: status, steps, checkpoints, best pass@k
  agentrl-tui compare --store PATH RUN_A RUN_B [--step S] [--json]
                                           held-out pass@k of two runs, task by task, ± paired standard error
  agentrl-tui view --store PATH [RUN]      open a stored run (default: the newest) read-only in the workbench
  agentrl-tui resume --store PATH RUN      continue a run from its latest checkpoint
  agentrl-tui tokenizer train --corpus FILE --vocab N --out DIR
                                           byte-level BPE with the chat specials, as a HF tokenizer.json
  agentrl-tui sft --recipe RECIPE --out DIR [--steps N --vocab N --hidden N --layers N]
                                           train a tokenizer and a small model on tool-use demonstrations
  agentrl-tui export --store PATH --run RUN --step S OUT
                                           write a checkpoint as a HuggingFace folder
  agentrl-tui help                         this text

Run 'agentrl-tui SUBCOMMAND -h' for a sub-command's flags.
`

// errUsage marks errors that should be followed by the usage text.
var errUsage = errors.New("usage")

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "agentrl-tui:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
		}
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no recipe or sub-command given", errUsage)
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "tokenize":
		return cmdTokenize(args[1:], stdout, stderr)
	case "score":
		return cmdScore(args[1:], stdout, stderr)
	case "generate":
		return cmdGenerate(args[1:], stdout, stderr)
	case "bench":
		return cmdBench(args[1:], stdout, stderr)
	case "plan":
		return cmdPlan(args[1:], stdout, stderr)
	case "tool":
		return cmdTool(args[1:], os.Stdin, stdout, stderr)
	case "runs":
		return cmdRuns(args[1:], stdout, stderr)
	case "compare":
		return cmdCompare(args[1:], stdout, stderr)
	case "view":
		return cmdView(args[1:], stdout, stderr)
	case "export":
		return cmdExport(args[1:], stdout, stderr)
	case "resume":
		return cmdResume(args[1:], stdout, stderr)
	case "sft":
		return cmdSFT(args[1:], stdout, stderr)
	case "tokenizer":
		return cmdTokenizerTrain(args[1:], stdout, stderr)
	}
	if strings.HasSuffix(args[0], ".yaml") || strings.HasSuffix(args[0], ".yml") || strings.HasPrefix(args[0], "-") {
		return cmdRun(args, stdout, stderr)
	}
	return fmt.Errorf("%w: unknown sub-command %q", errUsage, args[0])
}

// cmdRun runs a recipe: the controller loop with the headless reporters.
func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxSteps := fs.Int("max-steps", 0, "override run.max_steps")
	modelDir := fs.String("model", "", "override model.path (a HuggingFace folder with tokenizer.json)")
	backend := fs.String("backend", "", "override backend.kind: auto, go, cuda")
	uiMode := fs.String("ui", "", "override ui.mode: auto, tui, plain, json")
	seed := fs.Int("seed", 0, "override run.seed")
	runName := fs.String("run-name", "", "override run.name")
	storePath := fs.String("store", "", "override run.store (the bbolt file)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the run to this file (go tool pprof)")
	path, err := flagsAfter(fs, args)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	over := map[string]string{}
	set := func(key, v string) {
		if v != "" && v != "0" {
			over[key] = v
		}
	}
	set("run.max_steps", strconv.Itoa(*maxSteps))
	set("model.path", *modelDir)
	set("backend.kind", *backend)
	set("ui.mode", *uiMode)
	set("run.seed", strconv.Itoa(*seed))
	set("run.name", *runName)
	set("run.store", *storePath)
	r, err := recipes.Load(path, recipes.Options{Overrides: over})
	if err != nil {
		return err
	}
	runID := fmt.Sprintf("%s-%s", r.Run.Name, time.Now().UTC().Format("20060102-150405"))
	return execute(r, path, runID, "", stdout, stderr)
}

// cmdResume continues a stored run from its latest checkpoint with the recipe it was started with.
func cmdResume(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storePath := fs.String("store", "runs/agentrl.db", "the store file")
	uiMode := fs.String("ui", "", "override ui.mode: auto, tui, plain, json")
	runID, err := flagsAfter(fs, args)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if runID == "" {
		return errors.New("resume: usage: agentrl-tui resume --store PATH RUN (agentrl-tui runs lists the runs)")
	}
	st, err := store.Open(*storePath, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	run, err := st.GetRun(runID)
	st.Close()
	if err != nil {
		return err
	}
	var r recipes.Recipe
	if err := json.Unmarshal([]byte(run.RecipeYAML), &r); err != nil {
		return fmt.Errorf("resume: the stored recipe of run %s is unreadable: %w", runID, err)
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("resume: the stored recipe of run %s: %w", runID, err)
	}
	r.Run.Store = *storePath
	if *uiMode != "" {
		r.UI.Mode = *uiMode
	}
	return execute(&r, run.Recipe, runID, "resume", stdout, stderr)
}

// execute runs a validated recipe (resume: from the run's latest checkpoint).
func execute(r *recipes.Recipe, path, runID, resume string, stdout, stderr io.Writer) error {
	mode, err := ui.Choose(r.UI.Mode, isTerminal(os.Stdin), isTerminal(os.Stdout))
	if err != nil {
		return err
	}
	dir := r.Model.Path
	if dir == "" {
		if dir, err = builtinModel(); err != nil {
			return err
		}
	}
	choice, err := device.Open(device.Request{Kind: r.Backend.Kind, PluginPath: r.Backend.Plugin})
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, choice.Reason)
	dt := dtypes.Float32
	if r.Model.DType == "bf16" || (r.Model.DType == "auto" && choice.Kind == device.CUDA) {
		dt = dtypes.BFloat16
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return err
	}
	policy, err := model.Load(choice.Backend, dir, model.Options{Compute: dt})
	if err != nil {
		return err
	}
	reference, err := model.Load(choice.Backend, dir, model.Options{Compute: dt})
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			files[name] = data
		}
	}
	if err := os.MkdirAll(filepath.Dir(r.Run.Store), 0o755); err != nil {
		return fmt.Errorf("store folder: %w", err)
	}
	st, err := store.Open(r.Run.Store, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	var cp *store.Checkpoint
	if resume != "" {
		m, err := st.LatestCheckpoint(runID)
		if err != nil {
			return err
		}
		if cp, err = st.LoadCheckpoint(runID, m.Step); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "resuming run %s from step %d\n", runID, m.Step)
	}
	mon := device.NewMonitor()
	defer mon.Close()
	// On a GPU the memory ledger sizes what the recipe leaves on auto (KV slots, micro-batch,
	// where the AdamW moments wait) from the device's free memory or memory.vram.
	var plan *ledger.Plan
	if choice.Kind == device.CUDA {
		var free int64
		if rd, ok := mon.Read(); ok {
			free = int64(rd.TotalBytes - rd.UsedBytes)
		}
		if plan, err = ledger.PlanFor(ledger.Request{Recipe: r, ModelDir: dir, DetectedVRAM: free}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "memory plan: %d KV slots, micro-batch %d, peak %s of %s\n", plan.KVSlots, plan.MicroBatch, recipes.FormatGiB(plan.Total), recipes.FormatGiB(plan.Budget))
	}
	events := make(chan event.Event, 256)
	c, err := engine.New(engine.Options{Recipe: r, RecipePath: path, RunID: runID, Policy: policy, Reference: reference,
		Tokenizer: tok, Store: st, ModelFiles: files, Events: events, Backend: choice.Kind, Resume: cp, Monitor: mon, Plan: plan})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runErr := make(chan error, 1)
	go func() {
		runErr <- c.Run(ctx)
		close(events)
	}()
	switch mode {
	case ui.ModeJSON:
		err = ui.JSONLines(stdout, events)
	case ui.ModeTUI:
		err = ui.RunTUI(ctx, ui.Options{Events: events, Store: st, RunID: runID, Control: ui.Funcs{
			PauseFn: c.Pause, ResumeFn: c.Resume, StopFn: c.StopAfterStep, MarkBestFn: c.MarkBest, ExportFn: c.Export}})
		if errors.Is(err, context.Canceled) {
			err = nil // Ctrl-C or SIGTERM: the run saves and stops below
		}
		// Quitting the workbench while the run goes on stops the run the way Ctrl-C does: it
		// saves a checkpoint and records "interrupted". Drain the stream so the engine never blocks.
		stop()
		for range events {
		}
	default:
		err = ui.Plain(stdout, events)
	}
	if rerr := <-runErr; rerr != nil {
		return rerr
	}
	if run, gerr := st.GetRun(runID); gerr == nil && mode == ui.ModeTUI {
		fmt.Fprintf(stdout, "run %s %s (best step %d); store %s\n", runID, run.Status, run.BestStep, r.Run.Store)
	}
	return err
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// backendFlags are shared by every sub-command that computes.
type backendFlags struct {
	kind, plugin string
}

func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.kind, "backend", "auto", "compute backend: auto (CUDA when a GPU and the PJRT plugin are found, else go), go, cuda")
	fs.StringVar(&b.plugin, "plugin", "", "path to the PJRT CUDA plugin (xla_cuda_plugin.so); default: searched")
}

func (b *backendFlags) open(stderr io.Writer) (*device.Choice, error) {
	c, err := device.Open(device.Request{Kind: b.kind, PluginPath: b.plugin})
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(stderr, c.Reason)
	return c, nil
}

// loadModel opens the backend and loads a HuggingFace folder onto it.
func (b *backendFlags) loadModel(stderr io.Writer, dir string, dt dtypes.DType) (*model.Model, error) {
	choice, err := b.open(stderr)
	if err != nil {
		return nil, err
	}
	return model.Load(choice.Backend, dir, model.Options{Compute: dt})
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--ids: %q is not a token id (want comma-separated integers like 1,2,3)", f)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, errors.New("--ids is empty: give comma-separated token ids like 1,2,3")
	}
	return ids, nil
}

func cmdScore(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("score", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf backendFlags
	bf.register(fs)
	dir := fs.String("model", "", "HuggingFace model folder (config.json + safetensors)")
	idsFlag := fs.String("ids", "", "comma-separated token ids")
	greedy := fs.Int("greedy", 0, "also return the N-token greedy continuation")
	dtype := fs.String("dtype", "float32", "compute dtype: float32 or bfloat16")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("score: --model DIR is required")
	}
	ids, err := parseIDs(*idsFlag)
	if err != nil {
		return fmt.Errorf("score: %w", err)
	}
	dt, err := parseDType(*dtype)
	if err != nil {
		return fmt.Errorf("score: %w", err)
	}
	m, err := bf.loadModel(stderr, *dir, dt)
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := m.Score([][]int32{ids})
	if err != nil {
		return err
	}
	out := struct {
		NextTokenLogprobs []float32 `json:"next_token_logprobs"`
		Argmax            []int32   `json:"argmax"`
		Greedy            []int32   `json:"greedy"`
	}{s.NextLogProbs[0], s.Argmax[0], []int32{}}
	if *greedy > 0 {
		if out.Greedy, err = m.Greedy(ids, *greedy); err != nil {
			return err
		}
	}
	return writeJSON(stdout, out)
}

func parseDType(s string) (dtypes.DType, error) {
	switch s {
	case "float32", "f32":
		return dtypes.Float32, nil
	case "bfloat16", "bf16":
		return dtypes.BFloat16, nil
	}
	return dtypes.InvalidDType, fmt.Errorf("--dtype %q is not float32 or bfloat16", s)
}

func cmdGenerate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf backendFlags
	bf.register(fs)
	dir := fs.String("model", "", "HuggingFace model folder")
	idsFlag := fs.String("ids", "", "comma-separated prompt token ids")
	prompt := fs.String("prompt", "", "prompt text, tokenized with --tokenizer (default: the model folder's tokenizer.json)")
	tokDir := fs.String("tokenizer", "", "tokenizer folder or file for --prompt and for decoding (default: --model)")
	maxNew := fs.Int("max-new", 32, "tokens to generate at most")
	temp := fs.Float64("temperature", 0, "sampling temperature; 0 = greedy")
	topP := fs.Float64("top-p", 1, "nucleus sampling mass (1 = off)")
	topK := fs.Int("top-k", 0, "top-k sampling (0 = off)")
	seed := fs.Uint64("seed", 1, "random seed of the request")
	asJSON := fs.Bool("json", false, "print {new_ids, logprobs, stop_reason} as JSON")
	dtype := fs.String("dtype", "float32", "compute dtype: float32 or bfloat16")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("generate: --model DIR is required")
	}
	if (*idsFlag == "") == (*prompt == "") {
		return errors.New("generate: give exactly one of --ids 1,2,3 or --prompt TEXT")
	}
	var tok *tokenizer.Tokenizer
	if *prompt != "" || *tokDir != "" {
		if *tokDir == "" {
			*tokDir = *dir
		}
		var err error
		if tok, err = tokenizer.Load(*tokDir); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
	}
	var ids []int32
	var err error
	if *prompt != "" {
		ids = tok.Encode(*prompt)
	} else if ids, err = parseIDs(*idsFlag); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	dt, err := parseDType(*dtype)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	m, err := bf.loadModel(stderr, *dir, dt)
	if err != nil {
		return err
	}
	defer m.Close()
	truncate := *topK > 0 || *topP < 1
	gcfg := rollout.Config{Slots: 1, MaxLen: model.Bucket(len(ids) + *maxNew + 1), Truncation: truncate, TopKMax: max(64, *topK)}
	stops := m.Config.EOSTokenIDs
	if tok != nil {
		gcfg.Decode = func(ids []int32) string { return tok.Decode(ids, false) }
		for _, s := range []string{"<|im_end|>", "<|endoftext|>"} {
			if id, ok := tok.TokenID(s); ok && int(id) < m.Config.VocabSize {
				stops = append(stops, id)
			}
		}
	}
	g, err := rollout.New(m, gcfg)
	if err != nil {
		return err
	}
	defer g.Close()
	res, err := g.Generate(context.Background(), rollout.Request{
		Append: ids, MaxNew: *maxNew, StopIDs: stops,
		Sampling: rollout.Sampling{Temperature: float32(*temp), TopP: float32(*topP), TopK: *topK, Seed: *seed},
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			NewIDs     []int32   `json:"new_ids"`
			LogProbs   []float32 `json:"logprobs"`
			StopReason string    `json:"stop_reason"`
		}{res.IDs, res.LogProbs, string(res.Stop)})
	}
	if tok != nil {
		fmt.Fprintf(stdout, "%s\n", tok.Decode(res.IDs, false))
	}
	fmt.Fprintf(stdout, "new ids: %v\nlog-probs: %v\nstop: %s\n", res.IDs, res.LogProbs, res.Stop)
	return nil
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "rollout" {
		return fmt.Errorf("%w: bench needs a target: bench rollout", errUsage)
	}
	fs := flag.NewFlagSet("bench rollout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf backendFlags
	bf.register(fs)
	dir := fs.String("model", "", "HuggingFace model folder")
	shape := fs.String("shape", "", "a known shape with random weights instead of --model: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b")
	slots := fs.Int("slots", 8, "KV-cache slots (concurrent sequences)")
	seqs := fs.Int("sequences", 32, "requests in total")
	promptLen := fs.Int("prompt-len", 64, "prompt tokens per request")
	newTok := fs.Int("new", 128, "tokens generated per request")
	dtype := fs.String("dtype", "", "compute dtype (default: bfloat16 on cuda, float32 on go)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	python := fs.String("torch-python", "python3", "python with torch+transformers for the GPU reference run; empty skips it")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if (*dir == "") == (*shape == "") {
		return errors.New("bench rollout: give exactly one of --model DIR or --shape NAME")
	}
	choice, err := bf.open(stderr)
	if err != nil {
		return err
	}
	dt := dtypes.Float32
	if choice.Kind == device.CUDA {
		dt = dtypes.BFloat16
	}
	if *dtype != "" {
		if dt, err = parseDType(*dtype); err != nil {
			return fmt.Errorf("bench rollout: %w", err)
		}
	}
	var m *model.Model
	if *dir != "" {
		m, err = model.Load(choice.Backend, *dir, model.Options{Compute: dt})
	} else {
		var sh ledger.Shape
		if sh, err = ledger.KnownShape(*shape); err != nil {
			return err
		}
		cfg := configFromShape(sh)
		m, err = model.New(choice.Backend, model.RandomParams(cfg, 1, 0.02), model.Options{Compute: dt})
	}
	if err != nil {
		return err
	}
	defer m.Close()
	bc := rollout.BenchConfig{Sequences: *seqs, PromptLen: *promptLen, NewTokens: *newTok, Seed: 1, Gen: rollout.Config{Slots: *slots}}
	res, err := rollout.Bench(context.Background(), m, bc)
	if err != nil {
		return err
	}
	bw, src := 0.0, ""
	var torch *rollout.TorchResult
	if choice.Kind == device.Go {
		bw, src = rollout.HostBandwidth(), "host memcpy measured in this run"
	} else {
		mon := device.NewMonitor()
		if b, ok := mon.PeakBandwidth(); ok {
			bw, src = b, "NVML memory clock × bus width"
		}
		mon.Close()
		if *python != "" {
			dt := "bfloat16"
			if m.Options().Compute == dtypes.Float32 {
				dt = "float32"
			}
			if torch, err = rollout.TorchReference(context.Background(), *python, m.Config, dt, bc); err != nil {
				fmt.Fprintln(stderr, err)
			}
		}
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			*rollout.BenchResult
			Bandwidth float64              `json:"reference_bytes_per_s,omitempty"`
			Torch     *rollout.TorchResult `json:"torch,omitempty"`
		}{res, bw, torch})
	}
	res.Write(stdout, bw, src)
	if torch != nil {
		fmt.Fprintf(stdout, "PyTorch %s generate on %s: %.1f tokens/s; this engine / PyTorch = %.2f\n",
			torch.Torch, torch.Device, torch.TokensPerSec, res.TokensPerSec/torch.TokensPerSec)
	}
	return nil
}

// configFromShape turns a ledger shape into a model config (random-weight benchmarks).
func configFromShape(s ledger.Shape) *model.Config {
	fam := model.Qwen3
	if s.Family == "qwen2" {
		fam = model.Qwen2
	}
	return &model.Config{
		Family: fam, VocabSize: s.Vocab, HiddenSize: s.Hidden, IntermediateSize: s.Intermediate,
		NumLayers: s.Layers, NumHeads: s.Heads, NumKVHeads: s.KVHeads, HeadDim: s.HeadDim,
		RMSNormEps: 1e-6, RopeTheta: 1e6, MaxPositions: 40960, TieWordEmbeddings: s.Tied,
		AttentionBias: fam == model.Qwen2, DType: "bfloat16",
	}
}

// flagsAfter lets flags follow positional arguments (agentrl-tui plan RECIPE --vram 24GiB): it
// parses, takes the first positional argument, and parses the rest again.
func flagsAfter(fs *flag.FlagSet, args []string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", nil
	}
	first := fs.Arg(0)
	rest := fs.Args()[1:]
	if err := fs.Parse(rest); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return first, nil
}

func cmdPlan(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("model", "", "model folder (only config.json is read)")
	shape := fs.String("shape", "", "a known shape instead of --model: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b")
	vram := fs.String("vram", "", "device memory budget, e.g. 24GiB (default: the recipe's memory.vram, auto = free GPU memory)")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	path, err := flagsAfter(fs, args)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if path == "" {
		return errors.New("plan: give a recipe, e.g. agentrl-tui plan recipes/retool.yaml --shape qwen3-4b --vram 96GiB")
	}
	r, err := recipes.Load(path, recipes.Options{})
	if err != nil {
		return err
	}
	var detected int64
	mon := device.NewMonitor()
	if rd, ok := mon.Read(); ok {
		detected = int64(rd.TotalBytes - rd.UsedBytes)
	}
	mon.Close()
	var builtin string // only a plan that names no model reads the built-in one
	if *dir == "" && *shape == "" && r.Model.Path == "" {
		if builtin, err = builtinModel(); err != nil {
			return err
		}
	}
	p, err := ledger.PlanFor(ledger.Request{Recipe: r, ModelDir: *dir, ShapeName: *shape, VRAM: *vram,
		BuiltinModelDir: builtin, DetectedVRAM: detected})
	if err != nil {
		return err
	}
	if *asJSON {
		return p.WriteJSON(stdout)
	}
	return p.WriteTable(stdout)
}

func cmdTokenize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("tokenizer", "", "folder with tokenizer.json (or the file itself)")
	chat := fs.String("chat", "", `a JSON file {"messages": [...], "tools": [...], "add_generation_prompt": bool} rendered with the Qwen chat template first`)
	text, err := flagsAfter(fs, args)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	if *dir == "" {
		return errors.New("tokenize: --tokenizer DIR is required")
	}
	if (text == "") == (*chat == "") {
		return errors.New("tokenize: give TEXT or --chat FILE.json (one of them)")
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return err
	}
	if *chat != "" {
		if text, err = tokenizer.ReadChatFile(*chat); err != nil {
			return err
		}
	}
	ids := tok.Encode(text)
	return writeJSON(stdout, struct {
		IDs    []int32  `json:"ids"`
		Tokens []string `json:"tokens"`
	}{ids, tok.Tokens(ids)})
}

// writeJSON prints v as one line of JSON, leaving <, > and & readable (token strings contain them).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func cmdTool(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "run" {
		return fmt.Errorf("%w: tool needs a verb: tool run --executor python|starlark < code", errUsage)
	}
	fs := flag.NewFlagSet("tool run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	executor := fs.String("executor", "starlark", "starlark (embedded) or python (python3 sandbox)")
	timeout := fs.Duration("timeout", 5*time.Second, "wall-clock limit of the call")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	code, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("tool run: reading code from stdin: %w", err)
	}
	res, err := retool.RunTool(context.Background(), *executor, *timeout, string(code))
	if err != nil {
		return fmt.Errorf("tool run: %w", err)
	}
	return writeJSON(stdout, res)
}

func cmdRuns(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("store", "runs/agentrl.db", "the store file")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := store.Open(*path, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	sums, err := s.Summaries()
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, sums)
	}
	return store.WriteTable(stdout, sums)
}

// cmdCompare sets two stored runs' evaluations of the same held-out tasks side by side: pass@k
// of each and A − B with its paired standard error (per task, A's pass@k minus B's; their standard
// deviation over √tasks), at the last step both evaluated or at --step.
func cmdCompare(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("store", "runs/agentrl.db", "the store file")
	step := fs.Int("step", -1, "the evaluation step to compare (default: the last one both runs have)")
	asJSON := fs.Bool("json", false, "print JSON")
	var ids []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		ids, rest = append(ids, fs.Arg(0)), fs.Args()[1:]
	}
	if len(ids) != 2 {
		return fmt.Errorf("%w: compare takes two run ids (agentrl-tui runs --store %s lists them); got %d", errUsage, *path, len(ids))
	}
	st, err := store.Open(*path, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	evals := [2]map[int]store.Eval{}
	for i, id := range ids {
		if _, err := st.GetRun(id); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		es, err := st.Evals(id)
		if err != nil {
			return err
		}
		evals[i] = map[int]store.Eval{}
		for _, e := range es {
			if e.Counts != nil {
				evals[i][e.Step] = e
			}
		}
	}
	if *step < 0 {
		for s := range evals[0] {
			if _, ok := evals[1][s]; ok && s > *step {
				*step = s
			}
		}
		if *step < 0 {
			return fmt.Errorf("compare: runs %s and %s have no evaluation step in common with per-task counts (runs made before this version store none)", ids[0], ids[1])
		}
	}
	for i, id := range ids {
		if _, ok := evals[i][*step]; !ok {
			return fmt.Errorf("compare: run %s has no evaluation with per-task counts at step %d; leave out --step for the last step both have", id, *step)
		}
	}
	a, b := evals[0][*step], evals[1][*step]
	if a.Tasks != b.Tasks || len(a.Counts) != len(b.Counts) {
		return fmt.Errorf("compare: runs %s and %s evaluated different held-out tasks (%d and %d of them); compare runs with the same env.tasks and eval.heldout_tasks", ids[0], ids[1], len(a.Counts), len(b.Counts))
	}
	type row struct {
		K    int     `json:"k"`
		A    float64 `json:"a"`
		B    float64 `json:"b"`
		Diff float64 `json:"a_minus_b"`
		SE   float64 `json:"se"`
	}
	var rows []row
	for k, pa := range a.PassAtK {
		pb, ok := b.PassAtK[k]
		if !ok {
			continue
		}
		d, se, err := envs.PassAtKChange(b.Counts, a.Counts, k)
		if err != nil {
			return fmt.Errorf("compare: pass@%d: %w", k, err)
		}
		rows = append(rows, row{k, pa, pb, d, se})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].K < rows[j].K })
	if *asJSON {
		return writeJSON(stdout, map[string]any{"a": ids[0], "b": ids[1], "step": *step, "tasks": len(a.Counts), "pass_at_k": rows})
	}
	fmt.Fprintf(stdout, "A %s\nB %s\nstep %d, %d held-out tasks; A − B task by task, ± paired standard error\n\n", ids[0], ids[1], *step, len(a.Counts))
	fmt.Fprintf(stdout, "%-8s %7s %7s  %s\n", "", "A", "B", "A − B")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-8s %7.3f %7.3f  %+.3f ± %.3f\n", fmt.Sprintf("pass@%d", r.K), r.A, r.B, r.Diff, r.SE)
	}
	return nil
}

// cmdView opens a stored run read-only in the workbench.
func cmdView(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("view", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("store", "runs/agentrl.db", "the store file")
	runID, err := flagsAfter(fs, args)
	if err != nil {
		return err
	}
	if !isTerminal(os.Stdin) || !isTerminal(os.Stdout) {
		return errors.New("view: the workbench needs a terminal on stdin and stdout; for a listing without one use: agentrl-tui runs --store " + *path)
	}
	st, err := store.Open(*path, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	if runID == "" {
		runs, err := st.Runs()
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			return fmt.Errorf("view: the store %s holds no runs", *path)
		}
		newest := runs[0]
		for _, r := range runs[1:] {
			if r.Created.After(newest.Created) {
				newest = r
			}
		}
		runID = newest.ID
	}
	initial, err := ui.StoredEvents(st, runID)
	if err != nil {
		return fmt.Errorf("view: %w (agentrl-tui runs --store %s lists the runs)", err, *path)
	}
	return ui.RunTUI(context.Background(), ui.Options{Initial: initial, Store: st, RunID: runID})
}

func cmdExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("store", "runs/agentrl.db", "the store file")
	run := fs.String("run", "", "run id (agentrl-tui runs lists them)")
	step := fs.Int("step", -1, "checkpoint step (default: the latest)")
	out, err := flagsAfter(fs, args)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if *run == "" || out == "" {
		return errors.New("export: usage: agentrl-tui export --store PATH --run RUN [--step S] OUT_DIR")
	}
	s, err := store.Open(*path, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	if *step < 0 {
		m, err := s.LatestCheckpoint(*run)
		if err != nil {
			return err
		}
		*step = m.Step
	}
	if err := s.Export(*run, *step, out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported %s step %d to %s\n", *run, *step, out)
	return nil
}

func cmdSFT(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sft", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bf backendFlags
	bf.register(fs)
	recipe := fs.String("recipe", "recipes/retool.yaml", "recipe whose task set and lengths the demonstrations follow")
	out := fs.String("out", "", "output folder (a HuggingFace model folder)")
	o := engine.SFTOptions{}
	fs.IntVar(&o.Examples, "examples", 2000, "demonstrations")
	fs.IntVar(&o.Vocab, "vocab", 512, "tokenizer vocabulary size")
	fs.IntVar(&o.Hidden, "hidden", 128, "hidden size")
	fs.IntVar(&o.Layers, "layers", 4, "decoder layers")
	fs.IntVar(&o.Steps, "steps", 300, "optimizer steps")
	fs.IntVar(&o.Batch, "batch", 16, "sequences per step")
	fs.Float64Var(&o.LR, "lr", 3e-3, "peak learning rate (warm-up then cosine)")
	seed := fs.Uint64("seed", 1, "seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("sft: --out DIR is required")
	}
	r, err := recipes.Load(*recipe, recipes.Options{})
	if err != nil {
		return err
	}
	choice, err := bf.open(stderr)
	if err != nil {
		return err
	}
	o.Recipe, o.Backend, o.Out, o.Seed, o.Log = r, choice.Backend, *out, *seed, stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := engine.SFT(ctx, o); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

func cmdTokenizerTrain(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "train" {
		return fmt.Errorf("%w: tokenizer needs a verb: tokenizer train --corpus FILE --vocab N --out DIR", errUsage)
	}
	fs := flag.NewFlagSet("tokenizer train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	corpus := fs.String("corpus", "", "text file; each paragraph (blank-line separated) is one document")
	vocab := fs.Int("vocab", 512, "vocabulary size including the 256 byte tokens and the chat specials")
	out := fs.String("out", "", "output folder")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *corpus == "" || *out == "" {
		return errors.New("tokenizer train: --corpus FILE and --out DIR are required")
	}
	data, err := os.ReadFile(*corpus)
	if err != nil {
		return fmt.Errorf("tokenizer train: %w", err)
	}
	doc, err := tokenizer.Train(strings.Split(string(data), "\n\n"), *vocab, tokenizer.ChatSpecials())
	if err != nil {
		return err
	}
	if err := tokenizer.WriteTrained(*out, doc); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s/tokenizer.json\n", *out)
	return nil
}

// startCPUProfile profiles the process into path until the returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
