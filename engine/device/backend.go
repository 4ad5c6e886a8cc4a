// Package device chooses and creates the GoMLX compute backend (the pure-Go CPU backend or XLA's
// PJRT CUDA plugin) and reads the GPU through NVML. It owns every environment variable that XLA
// reads, so that nothing downloads a plugin or preallocates GPU memory behind the engine's back.
package device

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"  // the "go" backend
	_ "github.com/gomlx/go-xla/compute/xla" // the "xla" backend (PJRT plugins, loaded on demand)
)

// Kinds of backend a user can ask for.
const (
	Auto = "auto"
	Go   = "go"
	CUDA = "cuda"
)

// Request says which backend to create.
type Request struct {
	Kind       string // auto | go | cuda; "" means auto
	PluginPath string // the plugin file, or a folder to search (flag or recipe); optional
	// MemoryFraction, when > 0, caps the XLA allocator's share of GPU memory.
	MemoryFraction float64
	// ModelParams is the parameter count of the model the backend will run (0: not known): on
	// the Go backend it picks the op scheduler (GoConfigFor).
	ModelParams int64
	// CompileCache is the folder the XLA backend keeps its compiled programs in between processes
	// (CompileCache): "" for DefaultCompileCacheDir, "off" for none. The Go backend has none.
	CompileCache string
}

// Choice is the backend that was created and why.
type Choice struct {
	Backend compute.Backend
	Kind    string // go | cuda
	Config  string // the GoMLX backend configuration string used
	Reason  string // one sentence a user can read: which backend and why
	Plugin  *Plugin
	// Cache is the compilation cache the XLA backend compiles through (nil: none, as on the Go
	// backend); CacheNote says which folder, or why there is none.
	Cache     *CompileCache
	CacheNote string
}

// Plugin is a located PJRT CUDA plugin with its CUDA library folder.
type Plugin struct {
	Path string // the .so file
	// NvidiaDir is the nvidia/ folder of CUDA libraries beside the plugin ("" when there is none);
	// CUDADir the folder in it for --xla_gpu_cuda_data_dir (nvidia/cu13: nvvm/libdevice, bin/ptxas).
	NvidiaDir, CUDADir string
	FoundVia           string // ViaFlag | PJRT_PLUGIN_LIBRARY_PATH | site-packages | go-xla installer folder
	Layout             string // LayoutJAX | LayoutGoXLA | LayoutOther
}

// Env abstracts the process environment and file system probes so that the choice logic is testable.
type Env struct {
	Getenv   func(string) string
	Setenv   func(string, string) error
	Glob     func(string) ([]string, error)
	Stat     func(string) (os.FileInfo, error)
	HasGPU   func() (bool, string) // whether an NVIDIA GPU and driver are usable, and what was seen
	SitePkgs func() []string       // Python site-packages folders to search
}

// SystemEnv is the real environment.
func SystemEnv() Env {
	return Env{
		Getenv:   os.Getenv,
		Setenv:   os.Setenv,
		Glob:     filepath.Glob,
		Stat:     os.Stat,
		HasGPU:   probeGPU,
		SitePkgs: pythonSitePackages,
	}
}

// Open creates the backend named by the request (and GOMLX_BACKEND, which wins when set).
func Open(req Request) (*Choice, error) { return open(req, SystemEnv()) }

func open(req Request, env Env) (*Choice, error) {
	// Never let go-xla download anything, whatever the request.
	_ = env.Setenv("GOMLX_NO_AUTO_INSTALL", "1")
	if cfg := env.Getenv(compute.ConfigEnvVar); cfg != "" {
		kind := Go
		if !strings.HasPrefix(cfg, "go") {
			kind = CUDA
		}
		reason := fmt.Sprintf("using GOMLX_BACKEND=%s from the environment", cfg)
		run := cfg
		var b compute.Backend
		var err error
		if kind == Go {
			if safe, changed := SafeGoConfig(cfg); changed {
				run = safe
				reason = fmt.Sprintf("GOMLX_BACKEND=%s runs GoMLX's parallel op scheduler with a bounded worker pool, which deadlocks on this engine's "+
					"training graphs (ops on every worker wait for their matmuls' workers); running %s (no bound) instead", cfg, safe)
			}
			b, err = NewGo(run)
		} else {
			b, err = compute.NewWithConfig(run)
		}
		if err != nil {
			return nil, fmt.Errorf("GOMLX_BACKEND=%q: %w", cfg, err)
		}
		c := &Choice{Backend: b, Kind: kind, Config: run, Reason: reason, CacheNote: goCacheNote}
		if kind != Go {
			if c.Cache, c.CacheNote, err = useCompileCache(req.CompileCache); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	kind := req.Kind
	if kind == "" {
		kind = Auto
	}
	switch kind {
	case Go:
		return openGo("the go (CPU) backend was requested", req.ModelParams)
	case CUDA:
		p, searched, err := FindPlugin(req.PluginPath, env)
		if err != nil {
			return nil, pluginError(searched, err)
		}
		if ok, seen := env.HasGPU(); !ok {
			return nil, fmt.Errorf("backend cuda: the PJRT CUDA plugin is at %s but no usable NVIDIA GPU was found (%s); "+
				"check that the driver is installed and nvidia-smi lists a GPU, or run with --backend go", p.Path, seen)
		}
		return openCUDA(p, req, env, "the cuda backend was requested")
	case Auto:
		ok, seen := env.HasGPU()
		if !ok {
			return openGo(fmt.Sprintf("no NVIDIA GPU (%s), so the go (CPU) backend", seen), req.ModelParams)
		}
		p, searched, err := FindPlugin(req.PluginPath, env)
		if err != nil {
			return openGo(fmt.Sprintf("a GPU is present but no PJRT CUDA plugin was found (searched %d places; --backend cuda lists them), so the go (CPU) backend", len(searched)), req.ModelParams)
		}
		return openCUDA(p, req, env, "a GPU and the PJRT CUDA plugin were found")
	default:
		return nil, fmt.Errorf("backend %q is not one of auto, go, cuda", kind)
	}
}

// GoConfig runs the Go backend's ops in parallel (independent ops of a graph on both cores, where
// the sequential scheduler left one core idle outside the matrix kernels) with an unbounded worker
// pool. With its default pool (2 × GOMAXPROCS workers) the parallel scheduler deadlocked on the
// training graphs: every worker held an op waiting for its matmul's workers, which waited for a
// free slot (third_party/compute's patch 21 fixes that at its source). Unbounded, nothing ever
// waits for a slot; the matrix kernels still split their work
// into GOMAXPROCS parts, as they do under the sequential scheduler, so results are bit-identical to
// it. Tests open it too (NewGo).
const GoConfig = "go:ops_parallel,parallelism=-1"

// SafeGoConfig rewrites a Go backend configuration whose op scheduler can deadlock — the
// parallel one (asked for, or GoMLX's default when one graph runs at a time) with a bounded
// worker pool — to the same with an unbounded pool, keeping its other options. changed is false
// when cfg is safe as it is: sequential ops, or parallelism=-1 (unbounded) or 0 (no workers).
func SafeGoConfig(cfg string) (string, bool) {
	name, opts, _ := strings.Cut(cfg, ":")
	var keep []string
	sequential, bounded := false, true
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "":
		case "ops_parallel":
			sequential = false
			keep = append(keep, o)
		case "ops_sequential":
			sequential = true
			keep = append(keep, o)
		case "parallelism":
			if n, err := strconv.Atoi(v); err == nil && n <= 0 {
				bounded = false
			}
			keep = append(keep, o)
		default:
			keep = append(keep, o)
		}
	}
	if sequential || !bounded {
		return cfg, false
	}
	var out []string
	for _, o := range keep {
		if !strings.HasPrefix(o, "parallelism=") {
			out = append(out, o)
		}
	}
	return name + ":" + strings.Join(append(out, "parallelism=-1"), ","), true
}

// stdoutMu serialises NewGo's borrowing of os.Stdout.
var stdoutMu sync.Mutex

// NewGo creates a Go backend from cfg. GoMLX prints "Go backend: parallelism set to N" on
// standard output when the configuration sets parallelism, which would corrupt a command's JSON
// output; NewGo sends that line to /dev/null.
func NewGo(cfg string) (compute.Backend, error) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		saved := os.Stdout
		os.Stdout = null
		defer func() { os.Stdout = saved; null.Close() }()
	}
	return compute.NewWithConfig(cfg)
}

func openGo(reason string, params int64) (*Choice, error) {
	cfg, why := GoConfigFor(params)
	b, err := NewGo(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the go backend: %w", err)
	}
	return &Choice{Backend: b, Kind: Go, Config: cfg, Reason: "backend go: " + reason + why,
		CacheNote: goCacheNote}, nil
}

// goCacheNote is the Go backend's Choice.CacheNote.
const goCacheNote = "compile cache: none (the go backend compiles a program in milliseconds; the cache is XLA's)"

// SequentialOpsFrom is the model size from which the Go backend runs a graph's ops one at a time
// (GoSequentialConfig), each product still split over every core.
const SequentialOpsFrom = 100_000_000

// GoSequentialConfig runs the Go backend's ops one at a time in the graph's order, with the same
// unbounded pool for the matrix kernels as GoConfig (results are bit-identical to it).
const GoSequentialConfig = "go:ops_sequential,parallelism=-1"

// GoConfigFor is the Go backend configuration for a model of params parameters (0: unknown) and,
// where it is not GoConfig, why. The parallel scheduler keeps both cores busy on the small
// products of the built-in model; on a model of real width each product fills every core alone,
// and running independent ops at once only holds their outputs together: a training step of
// Qwen3-0.6B (512 tokens, 2-core AMD EPYC with AVX-512) added 15.1 GB at its peak and took
// 34.8 s in parallel, 5.9 GB and 25.1 s in order, every vocabulary chunk's weight-gradient
// product (a 593.5 MiB [vocab, hidden] buffer each) having been alive at once.
func GoConfigFor(params int64) (cfg, why string) {
	if params >= SequentialOpsFrom {
		return GoSequentialConfig, fmt.Sprintf(" (ops in order: a model of %.0fM parameters)", float64(params)/1e6)
	}
	return GoConfig, ""
}

func openCUDA(p *Plugin, req Request, env Env, why string) (*Choice, error) {
	setCUDAEnv(p, env)
	cfg := "xla:" + p.Path + ",preallocate=false"
	if req.MemoryFraction > 0 {
		cfg += fmt.Sprintf(",memory_fraction=%g", req.MemoryFraction)
	}
	cache, note, err := useCompileCache(req.CompileCache)
	if err != nil {
		return nil, err
	}
	b, err := compute.NewWithConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the CUDA backend from %s (%s layout): %w", p.Path, p.Layout, err)
	}
	return &Choice{Backend: b, Kind: CUDA, Config: cfg, Plugin: p, Cache: cache, CacheNote: note,
		Reason: fmt.Sprintf("backend cuda: %s (plugin %s via %s, %s layout)", why, p.Path, p.FoundVia, p.Layout)}, nil
}

// setCUDAEnv sets what XLA and go-xla read before the plugin loads.
func setCUDAEnv(p *Plugin, env Env) {
	// XLA needs nvvm/libdevice and ptxas when it compiles; without a system CUDA they are only in
	// the plugin's nvidia/ folder. go-xla's own fix-up (pjrt/cuda_linux.go cudaSetCUDADir) writes
	// <plugin folder>/../nvidia, which for go-xla's installer lacks nvvm/ (it is in nvidia/cu13/)
	// and for JAX's wheel does not exist; it leaves an XLA_FLAGS that already names a folder alone,
	// so the folder found here goes first.
	flags := env.Getenv("XLA_FLAGS")
	if !strings.Contains(flags, "--xla_gpu_cuda_data_dir") && p.CUDADir != "" {
		flags = strings.TrimSpace(flags + " --xla_gpu_cuda_data_dir=" + p.CUDADir)
		_ = env.Setenv("XLA_FLAGS", flags)
	}
	// go-xla's CUDA checks stay on (they warn when no nvidia/ folder is beside the plugin, and
	// set the data folder when XLA_FLAGS names none), except for JAX's wheel, where they misfire:
	// they look for <plugin folder>/../nvidia = site-packages/jax_plugins/nvidia, which no JAX
	// install has (the wheel's libraries are in site-packages/nvidia, which its RPATH reaches),
	// and print a warning telling the user to symlink it there. A GOPJRT_CUDA_CHECKS the user set
	// is kept either way.
	if p.Layout == LayoutJAX && env.Getenv("GOPJRT_CUDA_CHECKS") == "" {
		_ = env.Setenv("GOPJRT_CUDA_CHECKS", "0")
	}
}

// Layouts of a PJRT CUDA plugin and its CUDA libraries, as the two installers lay them out.
const (
	// LayoutJAX is JAX's pip wheel (pip install 'jax[cuda13]'): the plugin at
	// <site-packages>/jax_plugins/xla_cuda13/xla_cuda_plugin.so, the CUDA libraries in the
	// nvidia-* wheels at <site-packages>/nvidia/cu13 (cuDNN, NCCL in nvidia/cudnn, nvidia/nccl).
	LayoutJAX = "jax wheel"
	// LayoutGoXLA is go-xla's installer (installer/cuda.go CudaInstall in
	// github.com/gomlx/go-xla v0.4.5, run by cmd/pjrt_installer or xla.AutoInstall): the plugin,
	// taken out of the same JAX wheel and renamed, at <prefix>/go-xla/nvidia/pjrt_c_api_cuda_plugin.so
	// (prefix ~/.local/lib or /usr/local/lib), and the nvidia-* wheels' nvidia/ folders extracted
	// beside it, in <prefix>/go-xla/nvidia (cu13/lib, cu13/nvvm, cudnn/lib, …, plus a bin/ptxas link).
	LayoutGoXLA = "go-xla installer"
	// LayoutOther is a plugin file in any other place.
	LayoutOther = "other"
)

// ViaFlag is Plugin.FoundVia for a plugin named by hand.
const ViaFlag = "--plugin or backend.plugin"

// GoXLADirs are the folders go-xla's installer installs into and go-xla itself searches
// (pjrt/dynamiclib_posix.go osDefaultLibraryPaths in v0.4.5): ~/.local/lib/go-xla and
// /usr/local/lib/go-xla, the plugin in their nvidia/ folder.
func GoXLADirs(env Env) []string {
	var out []string
	if h := env.Getenv("HOME"); h != "" {
		out = append(out, filepath.Join(h, ".local", "lib", "go-xla"))
	}
	return append(out, "/usr/local/lib/go-xla")
}

// pluginPatterns are the names a CUDA plugin has inside a folder someone names (a flag, the
// recipe's backend.plugin, PJRT_PLUGIN_LIBRARY_PATH), whichever layout the folder is a part of:
// the plugin's own folder, go-xla's nvidia/ or go-xla/ or lib/ folder, JAX's xla_cuda13/,
// jax_plugins/ or site-packages/ folder.
var pluginPatterns = []string{
	"pjrt_c_api_cuda*_plugin.so",
	"xla_cuda_plugin.so",
	"pjrt*cuda*.so",
	"nvidia/pjrt_c_api_cuda*_plugin.so",
	"go-xla/nvidia/pjrt_c_api_cuda*_plugin.so",
	"xla_cuda*/xla_cuda_plugin.so",
	"jax_plugins/xla_cuda*/xla_cuda_plugin.so",
}

// pluginIn returns the first plugin file inside dir by pluginPatterns (the newest CUDA major
// first where several match one pattern: xla_cuda13 before xla_cuda12), "" when none.
func pluginIn(dir string, env Env) string {
	for _, pat := range pluginPatterns {
		m, _ := env.Glob(filepath.Join(dir, pat))
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		for _, c := range m {
			if st, err := env.Stat(c); err == nil && !st.IsDir() {
				return c
			}
		}
	}
	return ""
}

// FindPlugin locates the PJRT CUDA plugin: the explicit path (a file, or a folder of either
// layout), then PJRT_PLUGIN_LIBRARY_PATH, then JAX's wheel under Python site-packages, then
// go-xla's installer folders. It returns every place it looked, for the error message.
func FindPlugin(explicit string, env Env) (*Plugin, []string, error) {
	var searched []string
	if explicit != "" {
		st, err := env.Stat(explicit)
		switch {
		case err != nil:
			searched = append(searched, explicit+" (--plugin / backend.plugin)")
			return nil, searched, fmt.Errorf("plugin %s does not exist", explicit)
		case !st.IsDir():
			searched = append(searched, explicit+" (--plugin / backend.plugin)")
			return newPlugin(explicit, ViaFlag, env), searched, nil
		}
		searched = append(searched, fmt.Sprintf("%s/{%s} (--plugin / backend.plugin)", explicit, strings.Join(pluginPatterns, ",")))
		if c := pluginIn(explicit, env); c != "" {
			return newPlugin(c, ViaFlag, env), searched, nil
		}
		return nil, searched, fmt.Errorf("the folder %s holds no PJRT CUDA plugin (xla_cuda_plugin.so from JAX's wheel, or pjrt_c_api_cuda_plugin.so from go-xla's installer)", explicit)
	}
	for _, dir := range filepath.SplitList(env.Getenv("PJRT_PLUGIN_LIBRARY_PATH")) {
		if dir == "" {
			continue
		}
		searched = append(searched, dir+" (PJRT_PLUGIN_LIBRARY_PATH)")
		st, err := env.Stat(dir)
		switch {
		case err != nil:
		case !st.IsDir() && strings.Contains(filepath.Base(dir), "cuda"):
			return newPlugin(dir, "PJRT_PLUGIN_LIBRARY_PATH", env), searched, nil
		case st.IsDir():
			if c := pluginIn(dir, env); c != "" {
				return newPlugin(c, "PJRT_PLUGIN_LIBRARY_PATH", env), searched, nil
			}
		}
	}
	for _, sp := range env.SitePkgs() {
		pattern := filepath.Join(sp, "jax_plugins", "xla_cuda*", "xla_cuda_plugin.so")
		searched = append(searched, pattern)
		m, _ := env.Glob(pattern)
		sort.Sort(sort.Reverse(sort.StringSlice(m))) // newest CUDA major first (xla_cuda13 before xla_cuda12)
		if len(m) > 0 {
			return newPlugin(m[0], "site-packages", env), searched, nil
		}
	}
	for _, dir := range GoXLADirs(env) {
		pattern := filepath.Join(dir, "nvidia", "pjrt_c_api_cuda*_plugin.so")
		searched = append(searched, pattern)
		m, _ := env.Glob(pattern)
		if len(m) > 0 {
			return newPlugin(m[0], "go-xla installer folder", env), searched, nil
		}
	}
	return nil, searched, fmt.Errorf("no PJRT CUDA plugin found")
}

func newPlugin(path, via string, env Env) *Plugin {
	p := &Plugin{Path: abs(path), FoundVia: via}
	p.Layout = layoutOf(p.Path)
	p.NvidiaDir = nvidiaDirFor(p.Path, env)
	p.CUDADir = cudaDirIn(p.NvidiaDir, env)
	return p
}

// layoutOf says which installer laid out the plugin at path.
func layoutOf(path string) string {
	dir := filepath.Dir(path)
	switch {
	case strings.HasPrefix(filepath.Base(dir), "xla_cuda") && filepath.Base(filepath.Dir(dir)) == "jax_plugins":
		return LayoutJAX
	case strings.HasPrefix(filepath.Base(path), "pjrt_c_api_cuda") && filepath.Base(dir) == "nvidia":
		return LayoutGoXLA
	}
	return LayoutOther
}

// nvidiaDirFor finds the nvidia/ folder of CUDA libraries beside a plugin, where the plugin's
// RPATH looks for them: <plugin folder>/../nvidia (go-xla's installer, where the plugin sits in
// that nvidia/ folder itself) or <plugin folder>/../../nvidia (JAX's wheel:
// site-packages/jax_plugins/xla_cuda13/ → site-packages/nvidia). "" when neither exists.
func nvidiaDirFor(plugin string, env Env) string {
	up := filepath.Dir(filepath.Dir(plugin))
	for _, d := range []string{filepath.Join(up, "nvidia"), filepath.Join(filepath.Dir(up), "nvidia")} {
		if dirExists(env, d) {
			return d
		}
	}
	return ""
}

// cudaDirIn is the folder to give XLA as --xla_gpu_cuda_data_dir inside an nvidia/ folder: the
// one holding nvvm/libdevice and bin/ptxas — cu13 (CUDA 13 wheels), cu12, cuda_nvcc (CUDA 12
// wheels, one folder per package) — or the nvidia/ folder itself; "" without one.
func cudaDirIn(nvidia string, env Env) string {
	if nvidia == "" {
		return ""
	}
	for _, c := range []string{"cu13", "cu12", "cuda_nvcc"} {
		if d := filepath.Join(nvidia, c); dirExists(env, d) {
			return d
		}
	}
	return nvidia
}

func dirExists(env Env, d string) bool {
	st, err := env.Stat(d)
	return err == nil && st.IsDir()
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// The versions the install commands pin. JAXVersion is the JAX release whose CUDA 13 plugin
// (PJRT C API 0.104 is what go-xla v0.4.5's pjrt_c_api.h declares) ran this engine on an H100 on
// 2026-11-27 (docs/gpu/2026-11-27-h100.md). go-xla's installer takes the same plugin from the
// jax-cuda13-pjrt wheel of that version.
const (
	JAXVersion = "0.11.2"
	// InstallJAX installs JAX's wheel: the plugin and the nvidia-* wheels it depends on.
	InstallJAX = "pip install 'jax[cuda13]==" + JAXVersion + "'"
	// InstallGoXLA runs go-xla's installer for the same plugin into ~/.local/lib/go-xla.
	InstallGoXLA = "go run github.com/gomlx/go-xla/cmd/pjrt_installer@latest -plugin cuda13 -version " + JAXVersion + " -path ~/.local/lib/go-xla"
)

// InstallFix is the fix line for a missing plugin: either installer, and how to point at it.
func InstallFix() string {
	return "install the CUDA 13 plugin with its CUDA libraries, either " + InstallJAX +
		" (jax_plugins/xla_cuda13/xla_cuda_plugin.so and site-packages/nvidia/cu13) or go-xla's installer, " + InstallGoXLA +
		" (go-xla/nvidia/pjrt_c_api_cuda_plugin.so beside its nvidia libraries); both are searched, or pass --plugin FILE-OR-FOLDER " +
		"(backend.plugin in the recipe) or set PJRT_PLUGIN_LIBRARY_PATH; or run on the CPU with --backend go"
}

// LibsFix is the fix line for a plugin whose CUDA libraries are missing, by its layout.
func LibsFix(p *Plugin) string {
	tail := ", or point XLA_FLAGS=--xla_gpu_cuda_data_dir= at a CUDA installation that has them"
	switch p.Layout {
	case LayoutJAX:
		return InstallJAX + " into the Python environment that holds " + p.Path +
			" (the nvidia-* wheels it depends on land in its site-packages/nvidia)" + tail
	case LayoutGoXLA:
		return "rerun go-xla's installer into " + filepath.Dir(filepath.Dir(p.Path)) + ": " +
			strings.Replace(InstallGoXLA, "~/.local/lib/go-xla", filepath.Dir(filepath.Dir(p.Path)), 1) +
			" (it extracts the nvidia-* wheels into that nvidia/ folder)" + tail
	}
	return "put the CUDA libraries in an nvidia/ folder at " + filepath.Join(filepath.Dir(filepath.Dir(p.Path)), "nvidia") +
		" or one level above (where the plugin's RPATH looks), or install the plugin with " + InstallJAX + " or go-xla's installer" + tail
}

func pluginError(searched []string, cause error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "backend cuda: %v. Searched: ", cause)
	if len(searched) == 0 {
		b.WriteString("nothing (no --plugin, no PJRT_PLUGIN_LIBRARY_PATH and no Python site-packages found)")
	} else {
		b.WriteString(strings.Join(searched, "; "))
	}
	b.WriteString(". Fix: " + InstallFix())
	return fmt.Errorf("%s", b.String())
}

// pythonSitePackages lists candidate site-packages folders: well-known locations, plus what
// python3 itself reports when it is installed.
func pythonSitePackages() []string {
	var out []string
	seen := map[string]bool{}
	add := func(ps ...string) {
		for _, p := range ps {
			if p != "" && !seen[p] && dirExists(SystemEnv(), p) {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		m, _ := filepath.Glob(filepath.Join(v, "lib", "python3*", "site-packages"))
		add(m...)
	}
	for _, pat := range []string{
		"/opt/*/.venv/lib/python3*/site-packages",
		"/opt/*/lib/python3*/site-packages",
		"/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages",
		filepath.Join(os.Getenv("HOME"), ".local/lib/python3*/site-packages"),
	} {
		m, _ := filepath.Glob(pat)
		add(m...)
	}
	if py, err := exec.LookPath("python3"); err == nil {
		cmd := exec.Command(py, "-c", "import site,sys;print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]))")
		if b, err := cmd.Output(); err == nil {
			add(strings.Fields(string(b))...)
		}
	}
	return out
}
