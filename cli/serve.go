package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/cobra"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/residency"
	"agentrl/engine/rollout"
	"agentrl/engine/serve"
	"agentrl/engine/tokenizer"
	"agentrl/envs/retool"
	"agentrl/store"
)

// serveFlags are serve's flags: which model, where to listen, how the generator is sized.
type serveFlags struct {
	bf                                     backendFlags
	dir, storePath, run, addr, name, dtype string
	codeTool, system, apiKey, uploadDir    string
	step, slots, maxTotal, maxNew, topKMax int
	temperature                            float64
}

// serveCommand serves a model, a checkpoint or the built-in model on an OpenAI-compatible
// endpoint until Ctrl-C or SIGTERM.
func serveCommand(env Env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--model DIR | --store PATH --run RUN [--step S]] [--addr 127.0.0.1:8000] [--slots N] [--max-total-tokens N]",
		Short: "serve a model or a checkpoint on an OpenAI-compatible endpoint, to try an agent against it before training it",
		Long: `Serves the model through POST /v1/chat/completions, POST /v1/completions and GET /v1/models
(see engine/serve) on the rollout engine, until Ctrl-C or SIGTERM. Without --model or --store it
serves the built-in model. Any API key (or none) is accepted: each distinct key is one trajectory,
whose conversation keeps its KV cache from request to request while its messages extend the
previous ones; when every slot is held, a new request takes the slot of the least recently used
idle key. The server listens on loopback unless --addr names another host; the banner prints the
address it listens on, and a non-loopback one without --api-key gets a warning on stderr.

The built-in model, and a model trained from it (a checkpoint of a run on it, or an export of
one: its tokenizer.json is the built-in model's), was trained with ReTool's system prompt
(--system-prompt, auto: that prompt for them, none for others): a chat request with no system
message gets it first, since a plain chat is outside its training; none sends requests as they
are, and any other text is the system prompt such requests get.

--code-tool: the built-in model writes code between <code> and </code> instead of <tool_call>
JSON; with a request that offers a function tool of this name (auto: python for the built-in
model and models trained from it, none for others), those blocks come back as calls of that
tool with {"code": …}.`,
		Example: "  agentrl-tui serve\n  agentrl-tui serve --model ~/models/Qwen3-0.6B --addr 127.0.0.1:8000\n  agentrl-tui serve --store runs/agentrl.db --run retool-20261125-101500 --step 30",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return f.serve(ctx, env)
		},
	}
	fl := cmd.Flags()
	f.bf.register(fl)
	fl.StringVar(&f.dir, "model", "", "HuggingFace model folder (default: the built-in model)")
	fl.StringVar(&f.storePath, "store", "", "serve a checkpoint from this store instead (with --run and --step)")
	fl.StringVar(&f.run, "run", "", "the checkpoint's run (agentrl-tui runs lists them)")
	fl.StringVar(&f.uploadDir, "upload-dir", "", "where weights a trainer uploads are kept (rollout.remote.push: http); default: a private temporary folder, removed at exit")
	fl.IntVar(&f.step, "step", -1, "the checkpoint's step (default: the run's latest)")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8000", "address to listen on (port 0: a free one)")
	fl.StringVar(&f.name, "name", "", "the model name clients send (default: the folder's name, RUN-stepS for a checkpoint, agentrl-builtin)")
	fl.IntVar(&f.slots, "slots", 8, "KV-cache slots: conversations decoded at once")
	fl.IntVar(&f.maxTotal, "max-total-tokens", 0, "longest context of a conversation, prompt and replies (default: the model's, at most 4096)")
	fl.IntVar(&f.maxNew, "max-new-tokens", 0, "reply length when a request gives no max_tokens (0: up to the context)")
	fl.Float64Var(&f.temperature, "temperature", 1, "sampling temperature when a request gives none")
	fl.IntVar(&f.topKMax, "top-k-max", 64, "the largest top_k (and the candidates top_p draws from) the sampler is compiled for")
	fl.StringVar(&f.codeTool, "code-tool", "auto", "function tool whose calls the model writes as <code> blocks: auto, none, or a name")
	fl.StringVar(&f.system, "system-prompt", "auto", "system message a chat request without one gets: auto (the built-in model's ReTool prompt for it and models trained from it, none for others), none, or the text")
	fl.StringVar(&f.dtype, "dtype", "", "compute dtype (default: bfloat16 on cuda, float32 on go)")
	fl.StringVar(&f.apiKey, "api-key", "", "the one API key every request must send (default: $AGENTRL_SERVE_API_KEY; none: any key, one conversation per key)")
	return cmd
}

// serve loads the model, starts the server, prints its URL and serves until ctx ends.
func (f *serveFlags) serve(ctx context.Context, env Env) error {
	dir, name, builtin, cleanup, err := f.modelDir(env)
	if err != nil {
		return err
	}
	defer cleanup()
	choice, err := f.bf.open(env.Stderr)
	if err != nil {
		return err
	}
	dt := dtypes.Float32
	if choice.Kind == device.CUDA {
		dt = dtypes.BFloat16
	}
	if f.dtype != "" {
		if dt, err = parseDType(f.dtype); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	note, _, err := serve.CheckTemplate(dir)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	loaded, err := model.Load(choice.Backend, dir, model.Options{Compute: dt})
	if err != nil {
		return err
	}
	defer loaded.Close()
	// The weights cast once to the compute dtype (bfloat16 on a GPU), as a run's rollout holds
	// them: each decode step reads half the bytes, and the float32 copy is freed.
	m, done, err := residency.InferenceModel(loaded, false)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer done()
	maxTotal := f.maxTotal
	if maxTotal <= 0 {
		maxTotal = min(4096, m.Config.MaxPositions)
	}
	if f.slots <= 0 {
		return fmt.Errorf("serve: --slots %d: want at least 1", f.slots)
	}
	// The slot is the power-of-two bucket that covers the context; a context fills it but for the
	// one row the generator keeps free.
	slot := model.Bucket(maxTotal)
	maxTotal = min(maxTotal, slot-1)
	gen, err := rollout.New(m, rollout.Config{Slots: f.slots, MaxLen: slot, Truncation: true, TopKMax: f.topKMax,
		Decode: func(ids []int32) string { return tok.Decode(ids, false) }})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer gen.Close()
	kin := builtin || sameTokenizer(dir, env.Builtin)
	code, system := f.codeTool, f.system
	switch code {
	case "auto":
		code = ""
		if kin {
			code = "python"
		}
	case "none":
		code = ""
	}
	switch system {
	case "auto":
		system = ""
		if kin {
			system = retool.DefaultSystem
		}
	case "none":
		system = ""
	}
	apiKey := f.apiKey
	if apiKey == "" {
		apiKey = os.Getenv("AGENTRL_SERVE_API_KEY")
	}
	modelPath := "" // absolute: /v1/models names it as vLLM names the folder it was started on
	if f.dir != "" {
		if modelPath, err = filepath.Abs(f.dir); err != nil {
			return err
		}
	}
	srv, err := serve.New(gen, tok, serve.Options{ModelName: name, MaxTotalTokens: maxTotal, MaxNewTokens: f.maxNew,
		Sampling: serve.Sampling{Temperature: float32(f.temperature)}, Open: true, Preempt: true, CodeTool: code, DefaultSystem: system,
		APIKey: apiKey, ModelPath: modelPath, UploadDir: f.uploadDir,
		// The engine endpoints (engine/serve/engine.go): prompt log-probs and weight reloads on the
		// served inference weights.
		Score:  m.NextLogProbs,
		Reload: m.Params.ReloadFrom})
	if err != nil {
		return err
	}
	base, err := srv.Start(f.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "serving %s (%s) at %s\n", name, dir, base)
	listening, warning := listenBanner(srv.Addr(), apiKey != "")
	fmt.Fprintln(env.Stdout, listening)
	if warning != "" {
		fmt.Fprintln(env.Stdout, warning)
		fmt.Fprintln(env.Stderr, warning)
	}
	keys := "any API key, one conversation per key"
	if apiKey != "" {
		keys = "one API key (--api-key), one conversation"
	}
	fmt.Fprintf(env.Stdout, "%d KV slots, contexts up to %d tokens; %s", f.slots, maxTotal, keys)
	if code != "" {
		fmt.Fprintf(env.Stdout, "; <code> blocks are calls of the tool %q", code)
	}
	fmt.Fprintln(env.Stdout)
	for _, line := range systemBanner(builtin, kin, system) {
		fmt.Fprintln(env.Stdout, line)
	}
	fmt.Fprintf(env.Stdout, "%s\ntry: OPENAI_BASE_URL=%s OPENAI_API_KEY=any YOUR_AGENT (Ctrl-C stops)\n", note, base)
	<-ctx.Done()
	err = srv.Close()
	fmt.Fprintln(env.Stdout, "stopped")
	return err
}

// listenBanner is the banner's line on the address the server really listens on (the port
// picked for :0; [::] for every interface when --addr 0.0.0.0 gets a dual-stack socket, as on
// Linux) and who reaches it; keyed says whether requests
// must send --api-key. warning, for a non-loopback address without a key, says that anyone who
// reaches it may generate and load other weights into it, and how to close it; "" otherwise.
func listenBanner(addr net.Addr, keyed bool) (line, warning string) {
	if addr == nil {
		return "listening on an unknown address", ""
	}
	a := addr.String()
	host, _, _ := net.SplitHostPort(a)
	ip := net.ParseIP(host)
	switch {
	case ip != nil && ip.IsLoopback():
		return fmt.Sprintf("listening on %s (loopback: only this machine reaches it)", a), ""
	case ip != nil && ip.IsUnspecified() && ip.To4() == nil: // Go's dual-stack socket for 0.0.0.0 and [::] alike
		line = fmt.Sprintf("listening on %s (every interface, IPv4 and IPv6: other machines reach it)", a)
	case ip == nil || ip.IsUnspecified():
		line = fmt.Sprintf("listening on %s (every interface: other machines reach it)", a)
	default:
		line = fmt.Sprintf("listening on %s (not loopback: other machines on its network reach it)", a)
	}
	if keyed {
		return line + "; every request must send the API key", ""
	}
	return line, fmt.Sprintf("WARNING: no API key on %s, which other machines reach: anyone who can connect may generate on this machine "+
		"and load other weights into the served model (POST /update_weights_from_disk). Set --api-key KEY or $AGENTRL_SERVE_API_KEY "+
		"(a trainer's rollout.remote.api_key_env names where it reads the same key), or listen on loopback (--addr 127.0.0.1:PORT)", a)
}

// systemBanner says what system prompt the served model was trained with (builtin: it is the
// built-in model; kin: it or a model trained from it) and what a chat request without a system
// message gets (system, "" for nothing).
func systemBanner(builtin, kin bool, system string) []string {
	var lines []string
	if kin {
		what := "the built-in model"
		if !builtin {
			what = "this model is the built-in model's (its tokenizer: a checkpoint or an export of it) and"
		}
		lines = append(lines, fmt.Sprintf("%s was trained with ReTool's system prompt %q; a plain chat without it is outside its training", what, retool.DefaultSystem))
	}
	switch {
	case system == "" && kin:
		lines = append(lines, "a chat request without a system message is sent as it is (--system-prompt none)")
	case system == retool.DefaultSystem && kin:
		lines = append(lines, "a chat request without a system message gets that prompt first (--system-prompt none: sent as it is)")
	case system != "":
		lines = append(lines, fmt.Sprintf("a chat request without a system message gets the system prompt %q first", system))
	}
	return lines
}

// sameTokenizer says whether dir's tokenizer.json is the built-in model's (in embedded): the
// vocabulary this project trained for it, which only it and models trained from it (checkpoints
// of runs on it, their exports, sft --init of it) have, as checkpoints carry the file as it is.
func sameTokenizer(dir string, embedded fs.FS) bool {
	if embedded == nil {
		return false
	}
	own, err := fs.ReadFile(embedded, "tokenizer.json")
	if err != nil {
		return false
	}
	if st, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil || st.Size() != int64(len(own)) {
		return false // another size: not worth reading (a Qwen tokenizer is 11 MiB)
	}
	theirs, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	return err == nil && bytes.Equal(own, theirs)
}

// modelDir is the folder to serve, the model's name and whether it is the built-in one; a
// checkpoint is exported into a temporary folder, which cleanup removes.
func (f *serveFlags) modelDir(env Env) (dir, name string, builtin bool, cleanup func(), err error) {
	cleanup = func() {}
	switch {
	case f.dir != "" && (f.storePath != "" || f.run != ""):
		return "", "", false, cleanup, errors.New("serve: give --model DIR or --store PATH --run RUN, not both")
	case f.dir != "":
		name = filepath.Base(filepath.Clean(f.dir))
		dir = f.dir
	case f.storePath != "" || f.run != "":
		if f.storePath == "" || f.run == "" {
			return "", "", false, cleanup, errors.New("serve: a checkpoint needs both --store PATH and --run RUN (agentrl-tui runs --store PATH lists the runs)")
		}
		if dir, err = exportCheckpoint(f.storePath, f.run, &f.step); err != nil {
			return "", "", false, cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		name = fmt.Sprintf("%s-step%d", f.run, f.step)
	default:
		if dir, err = model.BuiltinDir(env.Builtin); err != nil {
			return "", "", false, cleanup, err
		}
		name, builtin = "agentrl-builtin", true
	}
	if f.name != "" {
		name = f.name
	}
	return dir, name, builtin, cleanup, nil
}

// exportCheckpoint writes a stored checkpoint (the run's latest when *step < 0, which it then
// sets) as a HuggingFace folder in a temporary directory, as `export` does.
func exportCheckpoint(path, run string, step *int) (string, error) {
	s, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return "", err
	}
	defer s.Close()
	if *step < 0 {
		m, err := s.LatestCheckpoint(run)
		if err != nil {
			return "", err
		}
		*step = m.Step
	}
	dir, err := os.MkdirTemp("", "agentrl-serve-")
	if err != nil {
		return "", err
	}
	if err := s.Export(run, *step, dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
