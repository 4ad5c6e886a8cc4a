// Package doctor says what this machine can do for agentrl-tui and what to fix: the CPU and its
// matrix kernels, memory, the GPU through NVML, the PJRT CUDA plugin and the CUDA libraries it
// loads, bf16 on the backend a run opens, a python with torch for the reference benchmarks, the
// code sandbox, and whether a recipe fits. Every probe comes through Env, so that tests reach each
// branch on a machine without a GPU. It also holds the pieces of the GPU self-check
// (scripts/gpu-check.sh): HF parity on the fixtures, a random-weight model folder, an NVML peak
// sampler and the report.
package doctor

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/remote"
	"agentrl/recipes"
)

// Status is a check's verdict.
type Status string

// The verdicts: Fail means the recipe cannot run (or, with Options.RequireGPU, that the GPU path
// is not ready); Warn that it runs, but slower, without a reference or less isolated; Info is a
// fact with nothing to do now.
const (
	OK   Status = "ok"
	Info Status = "info"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Sections, in the order a report lists them.
const (
	SecCPU     = "cpu"
	SecMemory  = "memory"
	SecGPU     = "gpu"
	SecBackend = "backend"
	SecPython  = "python"
	SecSandbox = "sandbox"
	SecRecipe  = "recipe"
	SecEngines = "engines"
)

// Check is one line of the report: what was looked at, the verdict, what was seen and, unless
// the verdict is OK, what to do.
type Check struct {
	Section string `json:"section"`
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`
}

// Report is the whole answer. CanRun is false when any check failed; GPUReady when the GPU, the
// plugin, its CUDA libraries and bf16 on the CUDA backend all checked out.
type Report struct {
	Recipe   string `json:"recipe"`
	Backend  string `json:"backend"` // what a run opens: go | cuda; "" when it cannot open one
	CanRun   bool   `json:"can_run"`
	GPUReady bool   `json:"gpu_ready"`
	// RequireGPU is Options.RequireGPU: the question was whether the GPU path is ready.
	RequireGPU bool           `json:"require_gpu"`
	Checks     []Check        `json:"checks"`
	CPU        CPUInfo        `json:"cpu"`
	Memory     MemInfo        `json:"memory"`
	GPU        device.GPUInfo `json:"gpu"`
	Plugin     *PluginInfo    `json:"plugin,omitempty"`
	Plan       *PlanRow       `json:"plan,omitempty"`
}

// Failed lists the names of the failed checks.
func (r *Report) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == Fail {
			out = append(out, c.Name)
		}
	}
	return out
}

// Find returns the check called name, if there is one.
func (r *Report) Find(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// PluginInfo is where the PJRT CUDA plugin was found (device.Plugin).
type PluginInfo struct {
	Path     string `json:"path"`
	CUDADir  string `json:"cuda_dir"`
	FoundVia string `json:"found_via"`
	Layout   string `json:"layout"` // device.LayoutJAX | LayoutGoXLA | LayoutOther
}

// CPUInfo names the CPU and the cores the Go backend can use.
type CPUInfo struct {
	Model      string `json:"model"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// MemInfo is the host's memory (/proc/meminfo).
type MemInfo struct {
	TotalBytes     int64 `json:"total_bytes"`
	AvailableBytes int64 `json:"available_bytes"`
}

// BackendProbe is what opening the backend a run would open showed: its kind and why, or the
// error; and whether bf16 computes right on it (nil BF16 error).
type BackendProbe struct {
	Kind, Reason string
	Err          error
	BF16         error
}

// SandboxInfo is what the python executor would run with: the interpreter (or why there is none),
// the isolation it gets on this machine (envs/sandbox's description), whether the process runs as
// root (then every execution gets its own uid) and whether user namespaces are available.
type SandboxInfo struct {
	Python    string
	PythonErr error
	Isolation string
	Root      bool
	UserNS    string // "" when unavailable, else what was seen
	// Modules are the allowed third-party modules that import in the interpreter; Missing, the
	// ones that do not, with why.
	Modules []string
	Missing map[string]string
}

// Env holds every probe the checks use. SystemEnv fills it with the real ones.
type Env struct {
	Device  device.Env // the plugin search: variables, files, site-packages
	CPU     func() CPUInfo
	Kernels func() device.KernelChoice // the CPU kernel set a run would use; nil skips the line
	Memory  func() (MemInfo, error)
	GPU     func() device.GPUInfo
	Backend func(req device.Request) BackendProbe
	// Python finds a python (flag: a path, torchref.Auto, or "" to skip) that has torch and every
	// one of modules: its path, or "" and why not (torchref.Find).
	Python func(ctx context.Context, flag string, modules ...string) (string, string)
	// Torch imports torch with python and says its version and whether it sees a GPU.
	Torch   func(ctx context.Context, python string) (string, bool, error)
	Sandbox func() SandboxInfo
	Builtin func() (string, error) // the built-in model's folder
	// Engine checks one engine of rollout.engines (remote.Diagnose); nil skips the engines.
	Engine func(ctx context.Context, ep remote.Endpoint, ids []int32) remote.Diagnosis
	// Disk says the free bytes of the file system holding dir (or, when dir does not exist yet, its
	// nearest existing parent: at names the folder measured); nil skips the disk check.
	Disk func(dir string) (free int64, at string, err error)
}

// Options say what to check.
type Options struct {
	// Recipe is the recipe to check (recipes.Load("") gives the defaults); RecipeErr, when the
	// recipe did not load, is reported in its place.
	Recipe     *recipes.Recipe
	RecipePath string
	RecipeErr  error
	// RequireGPU fails the GPU checks that a GPU run needs (what make gpu-check needs), whatever
	// the recipe's backend.
	RequireGPU bool
	// TorchPython is the python for the reference benchmarks: torchref.Auto, a path, or "" to skip.
	TorchPython string
}

// Run checks everything and returns the report.
func Run(ctx context.Context, o Options, env Env) *Report {
	d := &doc{o: o, env: env, rep: &Report{Recipe: cmp.Or(o.RecipePath, "the default recipe"), RequireGPU: o.RequireGPU}}
	d.cpu()
	d.memory()
	d.gpu()
	d.backend()
	d.python(ctx)
	d.sandbox()
	d.recipe()
	d.engines(ctx)
	d.rep.CanRun = len(d.rep.Failed()) == 0
	return d.rep
}

type doc struct {
	o   Options
	env Env
	rep *Report
	// what the GPU checks found, for the later ones
	pluginOK, libsOK bool
	// policyDir is the policy's model folder once the recipe checks found it
	policyDir string
}

func (d *doc) add(section, name string, st Status, detail, fix string) {
	d.rep.Checks = append(d.rep.Checks, Check{Section: section, Name: name, Status: st, Detail: detail, Fix: fix})
}

// kind is the backend the recipe asks for (auto when there is no recipe).
func (d *doc) kind() string {
	if d.o.Recipe == nil {
		return device.Auto
	}
	return cmp.Or(d.o.Recipe.Backend.Kind, device.Auto)
}

// needGPU is whether a missing piece of the GPU path fails the recipe: the GPU is asked for
// (RequireGPU, backend cuda). With backend auto a run without a GPU or the plugin falls back to
// the CPU.
func (d *doc) needGPU() bool {
	return d.o.RequireGPU || d.kind() == device.CUDA
}

// usesGPU is whether a run opens the CUDA backend: needGPU, or backend auto with a GPU and the
// plugin found (then missing CUDA libraries make the run fail, not fall back).
func (d *doc) usesGPU() bool {
	return d.needGPU() || (d.kind() == device.Auto && d.rep.GPU.Seen && d.pluginOK)
}

func (d *doc) pluginPath() string {
	if d.o.Recipe == nil {
		return ""
	}
	return d.o.Recipe.Backend.Plugin
}

func (d *doc) cpu() {
	c := d.env.CPU()
	d.rep.CPU = c
	d.add(SecCPU, "cpu", OK, fmt.Sprintf("%s, %d cores (GOMAXPROCS %d)", c.Model, c.Cores, c.GOMAXPROCS), "")
	if d.env.Kernels == nil {
		return
	}
	k := d.env.Kernels()
	switch {
	case len(k.Timings) == 0 && strings.Contains(k.Reason, "not measured"):
		d.add(SecCPU, "kernels", Info, k.Reason,
			"nothing to do: the first run on the CPU measures the three sets (about a minute) and caches the choice; agentrl-tui doctor --measure-kernels or agentrl-tui kernels measures now")
	case strings.Contains(k.Reason, "measuring failed"):
		d.add(SecCPU, "kernels", Warn, k.Reason, "agentrl-tui kernels --fresh shows each set's error")
	default:
		d.add(SecCPU, "kernels", OK, k.Reason, "")
	}
}

func (d *doc) memory() {
	m, err := d.env.Memory()
	if err != nil {
		d.add(SecMemory, "memory", Warn, "host memory unknown: "+err.Error(), "nothing to do on Linux; elsewhere the plan's host figures go unchecked")
		return
	}
	d.rep.Memory = m
	d.add(SecMemory, "memory", OK, fmt.Sprintf("%s total, %s available", gib(m.TotalBytes), gib(m.AvailableBytes)), "")
}

func gib(b int64) string { return recipes.FormatGiB(b) }

func (d *doc) gpu() {
	g := d.env.GPU()
	d.rep.GPU = g
	if g.Seen {
		st, fix := OK, ""
		detail := fmt.Sprintf("%s: driver %s (CUDA %s), %s total, %s free, compute capability %s", g.Name, g.Driver, g.CUDA,
			gib(int64(g.TotalBytes)), gib(int64(g.FreeBytes)), g.ComputeCapability)
		if g.Count > 1 {
			detail += fmt.Sprintf("; %d GPUs, the engine uses the first", g.Count)
		}
		var major, minor int
		if _, err := fmt.Sscanf(g.ComputeCapability, "%d.%d", &major, &minor); err == nil && major < 8 {
			st, fix = Warn, "bf16 and cuDNN flash attention need compute capability 8.0 (Ampere) or newer: set model.dtype: f32 on this GPU"
		}
		d.add(SecGPU, "gpu", st, detail, fix)
	} else {
		st := Info
		fix := "to train on a GPU: install the NVIDIA driver (nvidia-smi must list the GPU); without one every run uses the go (CPU) backend"
		if d.needGPU() {
			st = Fail
			fix = "install the NVIDIA driver so that nvidia-smi lists the GPU; or run on the CPU with backend.kind: go"
		}
		d.add(SecGPU, "gpu", st, "no GPU seen: "+g.Reason, fix)
	}
	d.plugin()
}

func (d *doc) plugin() {
	p, searched, err := device.FindPlugin(d.pluginPath(), d.env.Device)
	if err != nil {
		st := Info
		if d.needGPU() {
			st = Fail
		} else if d.rep.GPU.Seen {
			st = Warn
		}
		where := "nowhere (no --plugin, no PJRT_PLUGIN_LIBRARY_PATH, no Python site-packages found)"
		if len(searched) > 0 {
			where = strings.Join(searched, "; ")
		}
		detail := fmt.Sprintf("%v; searched %s", err, where)
		if st == Warn {
			detail = "a GPU is here but runs use the go (CPU) backend: " + detail
		}
		d.add(SecGPU, "plugin", st, detail, device.InstallFix())
		d.add(SecGPU, "cuda_libs", Info, "not checked: no plugin", "")
		return
	}
	d.rep.Plugin, d.pluginOK = &PluginInfo{Path: p.Path, CUDADir: p.CUDADir, FoundVia: p.FoundVia, Layout: p.Layout}, true
	d.add(SecGPU, "plugin", OK, fmt.Sprintf("%s (%s layout, found via %s)", p.Path, p.Layout, p.FoundVia), "")
	d.cudaLibs(p)
	d.compileCache()
}

// compileCache says where a run on XLA keeps the programs it compiles (backend.compile_cache) and
// how many are there already, without creating the folder.
func (d *doc) compileCache() {
	dir := ""
	if d.o.Recipe != nil {
		dir = d.o.Recipe.Backend.CompileCache
	}
	if dir == device.CompileCacheOff {
		d.add(SecGPU, "compile_cache", Info, "off (backend.compile_cache: off): every run compiles all its programs", "")
		return
	}
	dir = cmp.Or(dir, device.DefaultCompileCacheDir())
	n, b := (&device.CompileCache{Dir: dir}).Size()
	d.add(SecGPU, "compile_cache", Info, fmt.Sprintf("%s: %d programs stored (%.1f MiB); a run on this GPU and plugin loads the ones it needs instead of compiling them",
		dir, n, float64(b)/(1<<20)), "")
}

func (d *doc) backend() {
	req := device.Request{Kind: d.kind(), PluginPath: d.pluginPath()}
	if d.o.RequireGPU {
		req.Kind = device.CUDA
	}
	pr := d.env.Backend(req)
	if pr.Err != nil {
		msg := pr.Err.Error()
		if len(d.rep.Failed()) > 0 { // the GPU lines above said why at length
			msg, _, _ = strings.Cut(msg, ". ")
		}
		d.add(SecBackend, "backend", Fail, msg, "see the lines above; or run on the CPU with backend.kind: go")
		d.add(SecBackend, "bf16", Info, "not checked: no backend", "")
		return
	}
	d.rep.Backend = pr.Kind
	d.add(SecBackend, "backend", OK, pr.Reason, "")
	computesBF16 := d.o.Recipe != nil && (d.o.Recipe.Model.DType == "bf16" || (d.o.Recipe.Model.DType == "auto" && pr.Kind == device.CUDA))
	switch {
	case pr.BF16 == nil:
		d.add(SecBackend, "bf16", OK, fmt.Sprintf("a small decoder's bf16 logits match its f32 ones on the %s backend", pr.Kind), "")
	case computesBF16 || (d.o.RequireGPU && pr.Kind == device.CUDA):
		d.add(SecBackend, "bf16", Fail, pr.BF16.Error(), "set model.dtype: f32 (slower, twice the memory), or on the CPU build without GOEXPERIMENT=simd")
	default:
		d.add(SecBackend, "bf16", Warn, pr.BF16.Error(), "nothing to do while model.dtype is auto or f32 on this backend (it computes in f32); model.dtype: bf16 would fail here")
	}
	d.rep.GPUReady = d.rep.GPU.Seen && d.pluginOK && d.libsOK && pr.Kind == device.CUDA && pr.BF16 == nil
}

func (d *doc) python(ctx context.Context) {
	if d.o.TorchPython == "" {
		d.add(SecPython, "torch", Info, "not checked: --torch-python is empty", "")
		return
	}
	fix := "for the PyTorch reference of bench and make gpu-check: apt-get install python3-torch (CPU), or pip install torch transformers, then --torch-python /path/to/python"
	py, why := d.env.Python(ctx, d.o.TorchPython, "transformers")
	if py == "" {
		if py, _ = d.env.Python(ctx, d.o.TorchPython); py == "" {
			d.add(SecPython, "torch", Warn, why+": bench runs without its PyTorch reference", fix)
			return
		}
		d.add(SecPython, "torch", Warn, py+" has torch but not transformers: the CPU reference runs, the GPU one (HF generate) does not",
			"pip install transformers for "+py)
	} else {
		d.add(SecPython, "torch", OK, py+" has torch and transformers: the CPU and GPU references run", "")
	}
	if !d.rep.GPU.Seen || d.env.Torch == nil {
		return
	}
	ver, cuda, err := d.env.Torch(ctx, py)
	switch {
	case err != nil:
		d.add(SecPython, "torch_cuda", Warn, fmt.Sprintf("importing torch with %s failed: %v", py, err), "reinstall torch for this python")
	case !cuda:
		d.add(SecPython, "torch_cuda", Warn, fmt.Sprintf("torch %s (%s) does not see the GPU: the GPU references cannot run", ver, py),
			"install a CUDA build of torch (pip install torch) that supports this driver")
	default:
		d.add(SecPython, "torch_cuda", OK, fmt.Sprintf("torch %s sees the GPU", ver), "")
	}
}

func (d *doc) sandbox() {
	exe := "starlark"
	if d.o.Recipe != nil {
		exe = d.o.Recipe.Env.Executor
	}
	s := d.env.Sandbox()
	usesPython := exe == "python"
	if !usesPython {
		d.add(SecSandbox, "executor", OK, "starlark: an in-process interpreter without file or network access; nothing to install", "")
	}
	switch {
	case s.PythonErr != nil && usesPython:
		d.add(SecSandbox, "python", Fail, s.PythonErr.Error(),
			"install python3 (apt-get install python3) or enable what the line above names; or set env.executor: starlark")
		return
	case s.PythonErr != nil:
		d.add(SecSandbox, "python", Info, "the python executor is unavailable: "+s.PythonErr.Error(),
			"only for env.executor: python: install python3 or enable what the line above names")
		return
	}
	if usesPython {
		d.add(SecSandbox, "executor", OK, "python: "+s.Python, "")
	} else {
		d.add(SecSandbox, "python", Info, "the python executor would run "+s.Python, "")
	}
	d.modules(s, usesPython)
	if d.o.Recipe != nil && usesPython && d.o.Recipe.Env.Sandbox.Isolation == "none" {
		d.add(SecSandbox, "isolation", Warn, "the recipe says env.sandbox.isolation: none: model-written code runs with your files and the network in reach",
			"remove isolation: none (strict is the default) where this machine gives user namespaces")
		return
	}
	userns := "user namespaces unavailable"
	if s.UserNS != "" {
		userns = "user namespaces available (" + s.UserNS + ")"
	}
	detail := fmt.Sprintf("%s; %s", s.Isolation, userns)
	// envs/sandbox's own words: "strict: …" (its own namespaces), or without them, as root, a
	// uid of its own per execution and an empty network namespace
	isolated := strings.HasPrefix(s.Isolation, "strict") ||
		(s.Root && strings.Contains(s.Isolation, "per-sandbox uid") && !strings.Contains(s.Isolation, "NOT isolated") && !strings.HasPrefix(s.Isolation, "NONE"))
	switch {
	case isolated:
		d.add(SecSandbox, "isolation", OK, detail, "")
	case usesPython:
		d.add(SecSandbox, "isolation", Warn, detail,
			"allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0) or run as root; or set env.executor: starlark")
	default:
		d.add(SecSandbox, "isolation", Info, detail, "only for env.executor: python: enable user namespaces or run as root")
	}
}

func (d *doc) recipe() {
	if d.o.RecipeErr != nil {
		d.add(SecRecipe, "recipe", Fail, d.o.RecipeErr.Error(), "fix the fields named above (recipes/retool.yaml documents each)")
		return
	}
	r := d.o.Recipe
	if r == nil {
		return
	}
	if dir, ok := d.policyModel(r); ok {
		d.policyDir = dir
		d.prmModel(r)
		d.fits(r, dir)
		return
	}
	d.prmModel(r) // a wrong PRM folder is reported beside a wrong model.path
}

// policyModel checks the policy's model folder (model.path, or the built-in model) and returns it.
func (d *doc) policyModel(r *recipes.Recipe) (string, bool) {
	dir, from := r.Model.Path, "model.path"
	if dir == "" {
		var err error
		if dir, err = d.env.Builtin(); err != nil {
			d.add(SecRecipe, "model", Fail, err.Error(), "give model.path (a HuggingFace folder) or rebuild the binary with testdata/builtin")
			return "", false
		}
		from = "the built-in model"
	}
	if missing := modelFiles(dir); missing != "" {
		d.add(SecRecipe, "model", Fail, fmt.Sprintf("%s (%s) %s", dir, from, missing),
			"point model.path at a local HuggingFace folder with config.json, *.safetensors and tokenizer.json")
		return "", false
	}
	d.add(SecRecipe, "model", OK, fmt.Sprintf("%s (%s)", dir, from), "")
	return dir, true
}

// prmModel checks the PRM's own model folder (prm.kind: model with prm.model a folder), which the
// run loads beside the policy when it starts: a wrong path would otherwise surface only then.
func (d *doc) prmModel(r *recipes.Recipe) {
	if !r.PRMPhase() || r.PRM.Model == "reference" {
		return
	}
	if missing := modelFiles(r.PRM.Model); missing != "" {
		d.add(SecRecipe, "prm_model", Fail, fmt.Sprintf("%s (prm.model) %s", r.PRM.Model, missing),
			"point prm.model at a local HuggingFace folder with config.json, *.safetensors and tokenizer.json, or set it to reference or policy")
		return
	}
	d.add(SecRecipe, "prm_model", OK, r.PRM.Model+" (prm.model)", "")
}

// modelFiles says what a model folder lacks, "" when nothing.
func modelFiles(dir string) string {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "is not a folder"
	}
	var missing []string
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		missing = append(missing, "config.json")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) == 0 {
		missing = append(missing, "*.safetensors")
	}
	t1, _ := filepath.Glob(filepath.Join(dir, "tokenizer.json*"))
	if len(t1) == 0 {
		missing = append(missing, "tokenizer.json")
	}
	if len(missing) == 0 {
		return ""
	}
	return "lacks " + strings.Join(missing, ", ")
}

// fits asks the ledger whether the recipe fits: on a GPU in memory.vram (auto: NVML's free
// memory), on the go backend in the host's available memory, which then holds everything.
func (d *doc) fits(r *recipes.Recipe, dir string) {
	rr := *r
	req := ledger.Request{Recipe: &rr, ModelDir: dir, DetectedVRAM: int64(d.rep.GPU.FreeBytes)}
	where := "device memory"
	if d.rep.Backend != device.CUDA {
		rr.Backend.Kind, rr.Memory.VRAM = device.Go, "auto"
		// the controller's sizes on the CPU, where nothing sizes them against a budget
		if rr.Memory.KVSlots <= 0 {
			rr.Memory.KVSlots = recipes.AutoInt(min(16, rr.BatchSize()))
		}
		if rr.Train.MicroBatch <= 0 {
			rr.Train.MicroBatch = recipes.AutoInt(min(8, rr.BatchSize()))
		}
		req.DetectedVRAM, where = d.rep.Memory.AvailableBytes, "available host memory (the go backend holds everything there)"
	}
	fix := "lower rollout.max_total_tokens, memory.kv_slots or train.micro_batch, set train.gradient_checkpointing: true or memory.optimizer_offload: host, or use a smaller model; agentrl-tui plan RECIPE shows the ledger"
	if req.DetectedVRAM <= 0 && rr.Memory.VRAM == "auto" {
		d.add(SecRecipe, "fits", Warn, "not checked: no memory reading", "give memory.vram, e.g. 24GiB, to check it with agentrl-tui plan")
		return
	}
	p, err := ledger.PlanFor(req)
	if err != nil {
		d.add(SecRecipe, "fits", Fail, err.Error(), fix)
		return
	}
	d.rep.Plan = &PlanRow{Shape: p.Shape.Name, Fits: p.Fits, KVSlots: p.KVSlots, MicroBatch: p.MicroBatch, Total: p.Total, Budget: p.Budget, Reason: p.Reason,
		HostRAM: p.Host.RAM, Disk: p.Host.Disk}
	defer d.hostNeeds(r, p)
	if !p.Fits {
		d.add(SecRecipe, "fits", Fail, fmt.Sprintf("does not fit %s of %s: %s", gib(p.Budget), where, p.Reason), fix)
		return
	}
	detail := fmt.Sprintf("peak %s of %s %s: %d KV slots, micro-batch %d", gib(p.Total), gib(p.Budget), where, p.KVSlots, p.MicroBatch)
	if p.HostBytes >= 10<<20 { // the built-in model's 2 MiB reference copy is not worth a mention
		detail += fmt.Sprintf("; %s of master weights, AdamW moments and the reference wait in host memory during rollout", gib(p.HostBytes))
	}
	d.add(SecRecipe, "fits", OK, detail, "")
}

// hostNeeds checks the plan's host memory (its peak: writing a checkpoint, or loading the models)
// against the memory available now, and the disk the store will fill at checkpoint.keep_* against
// the free space where run.store lives.
func (d *doc) hostNeeds(r *recipes.Recipe, p *ledger.Plan) {
	h := p.Host
	if m := d.rep.Memory.AvailableBytes; m <= 0 {
		d.add(SecRecipe, "host_memory", Warn, fmt.Sprintf("needs %s; not checked: no reading of available memory", gib(h.RAM)),
			"nothing to do on Linux (/proc/meminfo); elsewhere compare agentrl-tui plan's host memory with what is free")
	} else {
		detail := fmt.Sprintf("needs %s of the %s available (writing a checkpoint of %s: %s; loading the models: %s)",
			gib(h.RAM), gib(m), gib(h.CheckpointBytes), gib(h.Step), gib(h.Load))
		if h.RAM > m {
			d.add(SecRecipe, "host_memory", Fail, detail,
				"free host memory, or need less of it: train.optimizer_bits: 8 (offloaded moments a quarter the size), "+
					"memory.optimizer_offload / memory.master_offload: device where the GPU has room, train.lora.rank > 0, "+
					"or a smaller model; agentrl-tui plan RECIPE lists each part")
		} else {
			d.add(SecRecipe, "host_memory", OK, detail, "")
		}
	}
	if d.env.Disk == nil {
		return
	}
	dir := filepath.Dir(r.Run.Store)
	free, at, err := d.env.Disk(dir)
	detail := fmt.Sprintf("the store %s needs %s: %d checkpoints of %s (checkpoint.keep_best %d, keep_last %d, and the one being written)",
		r.Run.Store, gib(h.Disk), h.Checkpoints, gib(h.CheckpointBytes), r.Checkpoint.KeepBest, r.Checkpoint.KeepLast)
	switch {
	case err != nil:
		d.add(SecRecipe, "disk", Warn, detail+"; free space unknown: "+err.Error(), "make sure the disk of "+dir+" has "+gib(h.Disk)+" free")
	case h.Disk > free:
		d.add(SecRecipe, "disk", Fail, fmt.Sprintf("%s, but %s has %s free", detail, at, gib(free)),
			"free disk there, or point run.store at a disk with room, or keep fewer or smaller checkpoints: lower checkpoint.keep_last "+
				"and keep_best (keep_last 0 keeps every one), or checkpoint.save_optimizer: false (the moments are two thirds of a full checkpoint)")
	default:
		d.add(SecRecipe, "disk", OK, fmt.Sprintf("%s; %s has %s free", detail, at, gib(free)), "")
	}
}

// modules reports which of the allowed modules import in the interpreter.
func (d *doc) modules(s SandboxInfo, usesPython bool) {
	if len(s.Missing) == 0 {
		if len(s.Modules) > 0 {
			d.add(SecSandbox, "modules", OK, strings.Join(s.Modules, ", ")+" import", "")
		}
		return
	}
	var miss []string
	for _, m := range slices.Sorted(maps.Keys(s.Missing)) {
		miss = append(miss, m+" ("+s.Missing[m]+")")
	}
	level := Info
	if usesPython {
		level = Warn
	}
	d.add(SecSandbox, "modules", level, "missing: "+strings.Join(miss, "; "),
		"install them for the interpreter (Debian: apt-get install python3-numpy python3-sympy), or list only what it has in env.sandbox.modules")
}
