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
	PluginPath string // explicit path to xla_cuda_plugin.so (flag or recipe); optional
	// MemoryFraction, when > 0, caps the XLA allocator's share of GPU memory.
	MemoryFraction float64
}

// Choice is the backend that was created and why.
type Choice struct {
	Backend compute.Backend
	Kind    string // go | cuda
	Config  string // the GoMLX backend configuration string used
	Reason  string // one sentence a user can read: which backend and why
	Plugin  *Plugin
}

// Plugin is a located PJRT CUDA plugin with its CUDA library folder.
type Plugin struct {
	Path     string // the .so file
	CUDADir  string // folder holding the nvidia/ CUDA libraries (for --xla_gpu_cuda_data_dir)
	FoundVia string // flag | PJRT_PLUGIN_LIBRARY_PATH | site-packages
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
		return &Choice{Backend: b, Kind: kind, Config: run, Reason: reason}, nil
	}
	kind := req.Kind
	if kind == "" {
		kind = Auto
	}
	switch kind {
	case Go:
		return openGo("the go (CPU) backend was requested")
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
			return openGo(fmt.Sprintf("no NVIDIA GPU (%s), so the go (CPU) backend", seen))
		}
		p, searched, err := FindPlugin(req.PluginPath, env)
		if err != nil {
			return openGo(fmt.Sprintf("a GPU is present but no PJRT CUDA plugin was found (searched %d places; --backend cuda lists them), so the go (CPU) backend", len(searched)))
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
// free slot. Unbounded, nothing ever waits for a slot; the matrix kernels still split their work
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

func openGo(reason string) (*Choice, error) {
	b, err := NewGo(GoConfig)
	if err != nil {
		return nil, fmt.Errorf("creating the go backend: %w", err)
	}
	return &Choice{Backend: b, Kind: Go, Config: GoConfig, Reason: "backend go: " + reason}, nil
}

func openCUDA(p *Plugin, req Request, env Env, why string) (*Choice, error) {
	// go-xla writes a wrong --xla_gpu_cuda_data_dir unless XLA_FLAGS already holds one.
	flags := env.Getenv("XLA_FLAGS")
	if !strings.Contains(flags, "--xla_gpu_cuda_data_dir") && p.CUDADir != "" {
		flags = strings.TrimSpace(flags + " --xla_gpu_cuda_data_dir=" + p.CUDADir)
		_ = env.Setenv("XLA_FLAGS", flags)
	}
	if env.Getenv("GOPJRT_CUDA_CHECKS") == "" {
		_ = env.Setenv("GOPJRT_CUDA_CHECKS", "0")
	}
	cfg := "xla:" + p.Path + ",preallocate=false"
	if req.MemoryFraction > 0 {
		cfg += fmt.Sprintf(",memory_fraction=%g", req.MemoryFraction)
	}
	b, err := compute.NewWithConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the CUDA backend from %s: %w", p.Path, err)
	}
	return &Choice{Backend: b, Kind: CUDA, Config: cfg, Plugin: p,
		Reason: fmt.Sprintf("backend cuda: %s (plugin %s via %s)", why, p.Path, p.FoundVia)}, nil
}

// FindPlugin locates the PJRT CUDA plugin: the explicit path, then PJRT_PLUGIN_LIBRARY_PATH, then
// jax_plugins/xla_cuda*/xla_cuda_plugin.so under Python site-packages. It returns every place it
// looked, for the error message.
func FindPlugin(explicit string, env Env) (*Plugin, []string, error) {
	var searched []string
	if explicit != "" {
		searched = append(searched, explicit+" (--plugin)")
		if st, err := env.Stat(explicit); err == nil && !st.IsDir() {
			return &Plugin{Path: abs(explicit), CUDADir: cudaDirFor(explicit, env), FoundVia: "flag"}, searched, nil
		}
		return nil, searched, fmt.Errorf("plugin %s does not exist", explicit)
	}
	for _, dir := range filepath.SplitList(env.Getenv("PJRT_PLUGIN_LIBRARY_PATH")) {
		if dir == "" {
			continue
		}
		searched = append(searched, dir+" (PJRT_PLUGIN_LIBRARY_PATH)")
		candidates := []string{dir}
		if st, err := env.Stat(dir); err == nil && st.IsDir() {
			m, _ := env.Glob(filepath.Join(dir, "*cuda*.so"))
			m2, _ := env.Glob(filepath.Join(dir, "xla_cuda*", "*.so"))
			candidates = append(m, m2...)
		}
		for _, c := range candidates {
			if st, err := env.Stat(c); err == nil && !st.IsDir() && strings.Contains(filepath.Base(c), "cuda") {
				return &Plugin{Path: abs(c), CUDADir: cudaDirFor(c, env), FoundVia: "PJRT_PLUGIN_LIBRARY_PATH"}, searched, nil
			}
		}
	}
	for _, sp := range env.SitePkgs() {
		pattern := filepath.Join(sp, "jax_plugins", "xla_cuda*", "xla_cuda_plugin.so")
		searched = append(searched, pattern)
		m, _ := env.Glob(pattern)
		sort.Sort(sort.Reverse(sort.StringSlice(m))) // newest CUDA major first (xla_cuda13 before xla_cuda12)
		if len(m) > 0 {
			return &Plugin{Path: abs(m[0]), CUDADir: cudaDirFor(m[0], env), FoundVia: "site-packages"}, searched, nil
		}
	}
	return nil, searched, fmt.Errorf("no PJRT CUDA plugin found")
}

// cudaDirFor finds the CUDA library folder shipped beside a plugin from a JAX wheel:
// <site-packages>/nvidia/cu13 (or cu12), or <site-packages>/nvidia itself.
func cudaDirFor(plugin string, env Env) string {
	sp := filepath.Dir(filepath.Dir(filepath.Dir(abs(plugin)))) // .../site-packages
	for _, c := range []string{"cu13", "cu12"} {
		d := filepath.Join(sp, "nvidia", c)
		if st, err := env.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	if d := filepath.Join(sp, "nvidia"); dirExists(env, d) {
		return d
	}
	return ""
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

func pluginError(searched []string, cause error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "backend cuda: %v. Searched: ", cause)
	if len(searched) == 0 {
		b.WriteString("nothing (no --plugin, no PJRT_PLUGIN_LIBRARY_PATH and no Python site-packages found)")
	} else {
		b.WriteString(strings.Join(searched, "; "))
	}
	b.WriteString(". Fix: install JAX's CUDA plugin (pip install 'jax[cuda13]' brings jax_plugins/xla_cuda13/xla_cuda_plugin.so " +
		"and the nvidia/cu13 libraries), then pass --plugin /path/to/xla_cuda_plugin.so or set PJRT_PLUGIN_LIBRARY_PATH " +
		"to its folder; or run on the CPU with --backend go")
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
