package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/engine/device"
	"agentrl/engine/device/devicetest"
	"agentrl/engine/model"
	"agentrl/recipes"
)

// fakeMachine is a machine made of answers: files that exist, a GPU or not, what opening the
// backend gives, a python or not.
type fakeMachine struct {
	files   devicetest.Files
	vars    map[string]string
	sites   []string
	gpu     device.GPUInfo
	bf16    error // what the bf16 check says on any backend that opens
	mem     MemInfo
	python  bool // a python with torch and transformers
	sandbox SandboxInfo
	disk    int64 // free bytes where the store goes; 0: 1 TiB
}

const site = "/opt/torch/.venv/lib/python3.12/site-packages"

// jaxWheel is a site-packages with JAX's CUDA 13 plugin; withLibs adds the CUDA libraries.
func jaxWheel(withLibs bool) map[string]bool {
	files := map[string]bool{
		site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so": false,
		site + "/nvidia":      true,
		site + "/nvidia/cu13": true,
	}
	if withLibs {
		for _, f := range []string{"cu13/lib/libcudart.so.13", "cu13/lib/libcublas.so.13", "cu13/lib/libcublasLt.so.13",
			"cudnn/lib/libcudnn.so.9", "cu13/lib/libnvJitLink.so.13", "cu13/nvvm/libdevice/libdevice.10.bc", "cu13/bin/ptxas"} {
			files[site+"/nvidia/"+f] = false
		}
		files[site+"/nvidia/cudnn"] = true
	}
	return files
}

// goXLAInstall is what go-xla v0.4.5's installer leaves in ~/.local/lib/go-xla for cuda13
// (installer/cuda.go: the plugin renamed into nvidia/, the nvidia-* wheels extracted beside it,
// a bin/ptxas link); withLibs false is the plugin file without its libraries.
func goXLAInstall(withLibs bool) map[string]bool {
	const g = "/root/.local/lib/go-xla"
	files := map[string]bool{g: true, g + "/nvidia": true, g + "/nvidia/pjrt_c_api_cuda_plugin.so": false}
	if withLibs {
		for _, d := range []string{"cu13", "cu13/lib", "cudnn", "cudnn/lib", "bin"} {
			files[g+"/nvidia/"+d] = true
		}
		for _, f := range []string{"cu13/lib/libcudart.so.13", "cu13/lib/libcublas.so.13", "cu13/lib/libcublasLt.so.13",
			"cudnn/lib/libcudnn.so.9", "cu13/lib/libnvJitLink.so.13", "cu13/nvvm/libdevice/libdevice.10.bc", "cu13/bin/ptxas", "bin/ptxas"} {
			files[g+"/nvidia/"+f] = false
		}
	} else {
		delete(files, g+"/nvidia")
		delete(files, g)
	}
	return files
}

func h100() device.GPUInfo {
	return device.GPUInfo{Seen: true, Count: 1, Name: "NVIDIA H100 80GB HBM3", Driver: "580.65", CUDA: "13.0",
		TotalBytes: 80 << 30, FreeBytes: 79 << 30, ComputeCapability: "9.0"}
}

// findsPlugin is whether the plugin search finds a plugin on this machine.
func (m fakeMachine) findsPlugin(explicit string) bool {
	_, _, err := device.FindPlugin(explicit, device.Env{Getenv: func(k string) string { return m.vars[k] }, Glob: m.files.Glob, Stat: m.files.Stat,
		SitePkgs: func() []string { return m.sites }})
	return err == nil
}

func (m fakeMachine) env() Env {
	return Env{
		Device: device.Env{
			Getenv:   func(k string) string { return m.vars[k] },
			Setenv:   func(string, string) error { return nil },
			Glob:     m.files.Glob,
			Stat:     m.files.Stat,
			HasGPU:   func() (bool, string) { return m.gpu.Seen, m.gpu.Reason },
			SitePkgs: func() []string { return m.sites },
		},
		CPU: func() CPUInfo { return CPUInfo{Model: "Test CPU (AVX2)", Cores: 2, GOMAXPROCS: 2} },
		Kernels: func() device.KernelChoice {
			return device.KernelChoice{Set: device.AVX2, Reason: "avx2 kernels, cached"}
		},
		Memory: func() (MemInfo, error) { return m.mem, nil },
		GPU:    func() device.GPUInfo { return m.gpu },
		Backend: func(req device.Request) BackendProbe {
			switch {
			case req.Kind == device.Go || (req.Kind == device.Auto && !m.gpu.Seen):
				return BackendProbe{Kind: device.Go, Reason: "backend go", BF16: m.bf16}
			case !m.gpu.Seen:
				return BackendProbe{Err: errors.New("backend cuda: no usable NVIDIA GPU")}
			case m.findsPlugin(req.PluginPath):
				return BackendProbe{Kind: device.CUDA, Reason: "backend cuda", BF16: m.bf16}
			case req.Kind == device.Auto:
				return BackendProbe{Kind: device.Go, Reason: "backend go: no plugin", BF16: m.bf16}
			}
			return BackendProbe{Err: errors.New("backend cuda: no PJRT CUDA plugin found")}
		},
		Python: func(_ context.Context, flag string, modules ...string) (string, string) {
			if m.python && flag != "" {
				return "/usr/bin/python3", ""
			}
			return "", "PyTorch reference skipped: no python3 with torch"
		},
		Torch:   func(context.Context, string) (string, bool, error) { return "2.9.0", true, nil },
		Sandbox: func() SandboxInfo { return m.sandbox },
		Builtin: func() (string, error) { return filepath.Join("..", "..", "testdata", "builtin"), nil },
		Disk: func(dir string) (int64, string, error) {
			if m.disk == 0 {
				return 1 << 40, dir, nil
			}
			return m.disk, dir, nil
		},
	}
}

// cpuBox is a 2-core machine with 16 GiB, no GPU, python3 with torch, running as root.
func cpuBox() fakeMachine {
	return fakeMachine{files: map[string]bool{}, vars: map[string]string{}, mem: MemInfo{TotalBytes: 16 << 30, AvailableBytes: 12 << 30},
		gpu:    device.GPUInfo{Reason: "NVML unavailable: no NVIDIA driver"},
		python: true, sandbox: SandboxInfo{Python: "/usr/bin/python3", Root: true, UserNS: "max_user_namespaces 1000",
			Isolation: "rlimits, per-sandbox uid (process limit, leftover processes killed), no network (empty network namespace)"}}
}

func gpuBox(libs bool) fakeMachine {
	m := cpuBox()
	m.gpu, m.files, m.sites = h100(), jaxWheel(libs), []string{site}
	return m
}

// goXLABox is gpuBox with go-xla's installer in place of JAX's wheel.
func goXLABox(libs bool) fakeMachine {
	m := cpuBox()
	m.gpu, m.files, m.vars = h100(), goXLAInstall(libs), map[string]string{"HOME": "/root"}
	return m
}

func defaults(t *testing.T, edit func(r *recipes.Recipe)) *recipes.Recipe {
	t.Helper()
	r, err := recipes.Load("", recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(r)
	}
	return r
}

func TestRun(t *testing.T) {
	type want struct {
		canRun, gpuReady bool
		backend          string
		status           map[string]Status // check name → status
		detail           map[string]string // check name → a part of its detail
		fix              map[string]string // check name → a part of its fix
	}
	for _, tc := range []struct {
		name    string
		machine fakeMachine
		opts    Options
		recipe  func(*recipes.Recipe)
		want    want
	}{
		{
			name: "no GPU, backend auto: runs on the CPU", machine: cpuBox(),
			want: want{canRun: true, backend: device.Go, status: map[string]Status{"cpu": OK, "kernels": OK, "gpu": Info, "plugin": Info,
				"cuda_libs": Info, "backend": OK, "bf16": OK, "torch": OK, "executor": OK, "isolation": OK, "model": OK, "fits": OK},
				detail: map[string]string{"gpu": "no GPU seen: NVML unavailable", "plugin": "searched /usr/local/lib/go-xla/nvidia", "fits": "available host memory"}},
		},
		{
			name: "no GPU, GPU required", machine: cpuBox(), opts: Options{RequireGPU: true},
			want: want{canRun: false, status: map[string]Status{"gpu": Fail, "plugin": Fail, "backend": Fail, "bf16": Info}},
		},
		{
			name: "no GPU, backend cuda", machine: cpuBox(), recipe: func(r *recipes.Recipe) { r.Backend.Kind = "cuda" },
			want: want{canRun: false, status: map[string]Status{"gpu": Fail, "plugin": Fail, "backend": Fail}},
		},
		{
			name: "GPU without plugin, backend auto: falls back to the CPU", machine: func() fakeMachine { m := cpuBox(); m.gpu = h100(); return m }(),
			want: want{canRun: true, backend: device.Go, status: map[string]Status{"gpu": OK, "plugin": Warn, "cuda_libs": Info},
				detail: map[string]string{"gpu": "H100", "plugin": "runs use the go (CPU) backend"}},
		},
		{
			name: "GPU without plugin, GPU required", machine: func() fakeMachine { m := cpuBox(); m.gpu = h100(); return m }(), opts: Options{RequireGPU: true},
			want: want{canRun: false, status: map[string]Status{"gpu": OK, "plugin": Fail, "backend": Fail}},
		},
		{
			name: "plugin without CUDA libraries", machine: gpuBox(false),
			want: want{canRun: false, backend: device.CUDA, status: map[string]Status{"plugin": OK, "cuda_libs": Fail, "cuda_version": OK},
				detail: map[string]string{"cuda_libs": "missing CUDA runtime (libcudart.so*), cuBLAS", "plugin": "xla_cuda13"}},
		},
		{
			name: "go-xla's installer, found in ~/.local/lib/go-xla", machine: goXLABox(true), opts: Options{RequireGPU: true},
			want: want{canRun: true, gpuReady: true, backend: device.CUDA, status: map[string]Status{"plugin": OK, "cuda_libs": OK, "cuda_version": OK, "backend": OK, "compile_cache": Info},
				detail: map[string]string{"plugin": "go-xla installer layout, found via go-xla installer folder", "cuda_libs": "/root/.local/lib/go-xla/nvidia/cu13",
					"cuda_version": "built for CUDA 13", "compile_cache": device.DefaultCompileCacheDir() + ": "}},
		},
		{
			name: "go-xla's plugin named by hand, its libraries missing", machine: goXLABox(false),
			recipe: func(r *recipes.Recipe) {
				r.Backend.Plugin = "/root/.local/lib/go-xla/nvidia/pjrt_c_api_cuda_plugin.so"
				r.Backend.CompileCache = device.CompileCacheOff
			},
			want: want{canRun: false, backend: device.CUDA, status: map[string]Status{"plugin": OK, "cuda_libs": Fail, "compile_cache": Info},
				detail: map[string]string{"cuda_libs": "no nvidia/ folder beside the plugin (/root/.local/lib/go-xla/nvidia or",
					"compile_cache": "off (backend.compile_cache: off)"},
				fix: map[string]string{"cuda_libs": "pjrt_installer@latest -plugin cuda13 -version " + device.JAXVersion + " -path /root/.local/lib/go-xla"}},
		},
		{
			name: "JAX's plugin, its nvidia folder missing", machine: func() fakeMachine {
				m := gpuBox(false)
				delete(m.files, site+"/nvidia")
				delete(m.files, site+"/nvidia/cu13")
				return m
			}(),
			want: want{canRun: false, backend: device.CUDA, status: map[string]Status{"plugin": OK, "cuda_libs": Fail},
				detail: map[string]string{"cuda_libs": "no nvidia/ folder beside the plugin (" + site + "/jax_plugins/nvidia or " + site + "/nvidia"},
				fix:    map[string]string{"cuda_libs": "pip install 'jax[cuda13]==" + device.JAXVersion + "' into the Python environment that holds"}},
		},
		{
			name: "no plugin: both installers in the fix", machine: func() fakeMachine { m := cpuBox(); m.gpu = h100(); return m }(), opts: Options{RequireGPU: true},
			want: want{canRun: false, status: map[string]Status{"plugin": Fail},
				detail: map[string]string{"plugin": "/usr/local/lib/go-xla/nvidia/pjrt_c_api_cuda*_plugin.so"},
				fix:    map[string]string{"plugin": "jax[cuda13]==" + device.JAXVersion}},
		},
		{
			name: "the whole GPU path", machine: gpuBox(true), opts: Options{RequireGPU: true},
			want: want{canRun: true, gpuReady: true, backend: device.CUDA, status: map[string]Status{"gpu": OK, "plugin": OK, "cuda_libs": OK,
				"cuda_version": OK, "backend": OK, "bf16": OK, "torch": OK, "torch_cuda": OK, "fits": OK},
				detail: map[string]string{"cuda_libs": "not needed here: cuFFT", "fits": "device memory"}},
		},
		{
			name: "driver older than the plugin's CUDA", machine: func() fakeMachine { m := gpuBox(true); m.gpu.CUDA = "12.4"; return m }(),
			want: want{canRun: false, status: map[string]Status{"cuda_libs": OK, "cuda_version": Fail}, detail: map[string]string{"cuda_version": "only CUDA 12.4"}},
		},
		{
			name: "bf16 broken, the recipe computes in bf16", machine: func() fakeMachine { m := cpuBox(); m.bf16 = model.ErrBadLowPrecision; return m }(),
			recipe: func(r *recipes.Recipe) { r.Model.DType = "bf16" },
			want:   want{canRun: false, backend: device.Go, status: map[string]Status{"bf16": Fail}},
		},
		{
			name: "bf16 broken, the recipe computes in f32 on the CPU", machine: func() fakeMachine { m := cpuBox(); m.bf16 = model.ErrBadLowPrecision; return m }(),
			want: want{canRun: true, backend: device.Go, status: map[string]Status{"bf16": Warn}},
		},
		{
			name: "bf16 broken on the GPU", machine: func() fakeMachine { m := gpuBox(true); m.bf16 = model.ErrBadLowPrecision; return m }(),
			want: want{canRun: false, backend: device.CUDA, status: map[string]Status{"bf16": Fail}},
		},
		{
			name: "recipe does not fit", machine: func() fakeMachine { m := cpuBox(); m.mem.AvailableBytes = 1 << 20; return m }(),
			want: want{canRun: false, status: map[string]Status{"fits": Fail}, detail: map[string]string{"fits": "does not fit"}},
		},
		{
			name: "recipe does not fit the GPU", machine: gpuBox(true), recipe: func(r *recipes.Recipe) { r.Memory.VRAM = "1MiB" },
			want: want{canRun: false, gpuReady: true, status: map[string]Status{"fits": Fail}, detail: map[string]string{"fits": "device memory"}},
		},
		{
			name: "host memory short of the plan's", machine: func() fakeMachine { m := gpuBox(true); m.mem.AvailableBytes = 512 << 20; return m }(),
			want: want{canRun: false, gpuReady: true, backend: device.CUDA, status: map[string]Status{"fits": OK, "host_memory": Fail, "disk": OK},
				detail: map[string]string{"host_memory": "of the 0.50 GiB available (writing a checkpoint of"},
				fix:    map[string]string{"host_memory": "train.optimizer_bits: 8"}},
		},
		{
			name: "disk short of the store's checkpoints", machine: func() fakeMachine { m := cpuBox(); m.disk = 1 << 20; return m }(),
			want: want{canRun: false, backend: device.Go, status: map[string]Status{"fits": OK, "host_memory": OK, "disk": Fail},
				detail: map[string]string{"disk": "4 checkpoints of", "host_memory": "needs "},
				fix:    map[string]string{"disk": "lower checkpoint.keep_last and keep_best"}},
		},
		{
			name: "recipe does not load", machine: cpuBox(), opts: Options{RecipeErr: errors.New("recipe x.yaml: train.lr: want a number")},
			want: want{canRun: false, status: map[string]Status{"recipe": Fail}},
		},
		{
			name: "model folder missing", machine: cpuBox(), recipe: func(r *recipes.Recipe) { r.Model.Path = "/nonexistent/model" },
			want: want{canRun: false, status: map[string]Status{"model": Fail}, detail: map[string]string{"model": "is not a folder"}},
		},
		{
			name: "PRM model folder missing", machine: cpuBox(), recipe: func(r *recipes.Recipe) {
				r.PRM.Kind, r.PRM.Model, r.Hinter.Kind = "model", "/nonexistent/prm", "none"
			},
			want: want{canRun: false, status: map[string]Status{"model": OK, "prm_model": Fail},
				detail: map[string]string{"prm_model": "/nonexistent/prm (prm.model) is not a folder"}, fix: map[string]string{"prm_model": "reference or policy"}},
		},
		{
			name: "model and PRM model folders both missing", machine: cpuBox(), recipe: func(r *recipes.Recipe) {
				r.Model.Path, r.PRM.Kind, r.PRM.Model, r.Hinter.Kind = "/nonexistent/model", "model", "/nonexistent/prm", "none"
			},
			want: want{canRun: false, status: map[string]Status{"model": Fail, "prm_model": Fail}},
		},
		{
			name: "PRM model folder present", machine: cpuBox(), recipe: func(r *recipes.Recipe) {
				r.PRM.Kind, r.PRM.Model, r.Hinter.Kind = "model", filepath.Join("..", "..", "testdata", "builtin"), "none"
			},
			want: want{canRun: true, status: map[string]Status{"model": OK, "prm_model": OK}},
		},
		{
			name: "no python: the references are skipped, the run is not", machine: func() fakeMachine {
				m := cpuBox()
				m.python, m.sandbox = false, SandboxInfo{PythonErr: errors.New("executor python: no python3 found")}
				return m
			}(),
			want: want{canRun: true, status: map[string]Status{"torch": Warn, "executor": OK, "python": Info}},
		},
		{
			name: "python executor without python", machine: func() fakeMachine {
				m := cpuBox()
				m.sandbox = SandboxInfo{PythonErr: errors.New("executor python: no python3 found")}
				return m
			}(),
			recipe: func(r *recipes.Recipe) { r.Env.Executor = "python" },
			want:   want{canRun: false, status: map[string]Status{"python": Fail}},
		},
		{
			name: "python executor, strict isolation without root", machine: func() fakeMachine {
				m := cpuBox()
				m.sandbox.Root, m.sandbox.Isolation = false, "strict: own user, mount, PID, network, IPC and UTS namespaces, no network"
				return m
			}(),
			recipe: func(r *recipes.Recipe) { r.Env.Executor = "python" },
			want:   want{canRun: true, status: map[string]Status{"executor": OK, "isolation": OK}},
		},
		{
			name: "python executor, isolation none as root", machine: func() fakeMachine {
				m := cpuBox()
				m.sandbox.Isolation = "NONE (env.sandbox.isolation: none): the code can read every file this user can, per-sandbox uid (process limit, leftover processes killed), no network"
				return m
			}(),
			recipe: func(r *recipes.Recipe) { r.Env.Executor = "python" },
			want:   want{canRun: true, status: map[string]Status{"isolation": Warn}},
		},
		{
			name: "python executor, a module missing", machine: func() fakeMachine {
				m := cpuBox()
				m.sandbox.Isolation = "strict: own user, mount, PID, network, IPC and UTS namespaces"
				m.sandbox.Modules, m.sandbox.Missing = []string{"numpy"}, map[string]string{"sympy": "No module named 'sympy'"}
				return m
			}(),
			recipe: func(r *recipes.Recipe) { r.Env.Executor = "python" },
			want:   want{canRun: true, status: map[string]Status{"modules": Warn, "isolation": OK}},
		},
		{
			name: "python executor, the recipe says isolation none", machine: func() fakeMachine {
				m := cpuBox()
				m.sandbox.Isolation = "strict: own user, mount, PID, network, IPC and UTS namespaces"
				m.sandbox.Modules = []string{"numpy", "sympy"}
				return m
			}(),
			recipe: func(r *recipes.Recipe) { r.Env.Executor = "python"; r.Env.Sandbox.Isolation = "none" },
			want:   want{canRun: true, status: map[string]Status{"modules": OK, "isolation": Warn}},
		},
		{
			name: "python executor, not root", machine: func() fakeMachine {
				m := cpuBox()
				m.sandbox.Root, m.sandbox.Isolation = false, "rlimits, not root: process limit counts all of this user's processes, network NOT isolated"
				return m
			}(),
			recipe: func(r *recipes.Recipe) { r.Env.Executor = "python" },
			want:   want{canRun: true, status: map[string]Status{"executor": OK, "isolation": Warn}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o.RecipeErr == nil {
				o.Recipe = defaults(t, tc.recipe)
			}
			o.TorchPython = "auto"
			rep := Run(context.Background(), o, tc.machine.env())
			if rep.CanRun != tc.want.canRun {
				t.Errorf("CanRun = %v; want %v (failed: %v)", rep.CanRun, tc.want.canRun, rep.Failed())
			}
			if rep.GPUReady != tc.want.gpuReady {
				t.Errorf("GPUReady = %v; want %v", rep.GPUReady, tc.want.gpuReady)
			}
			if tc.want.backend != "" && rep.Backend != tc.want.backend {
				t.Errorf("Backend = %q; want %q", rep.Backend, tc.want.backend)
			}
			for name, st := range tc.want.status {
				c, ok := rep.Find(name)
				if !ok {
					t.Errorf("no %s check; checks: %+v", name, rep.Checks)
					continue
				}
				if c.Status != st {
					t.Errorf("%s: status %s (%s); want %s", name, c.Status, c.Detail, st)
				}
				if c.Status != OK && c.Status != Info && c.Fix == "" {
					t.Errorf("%s: status %s without a fix", name, c.Status)
				}
			}
			for name, part := range tc.want.detail {
				if c, _ := rep.Find(name); !strings.Contains(c.Detail, part) {
					t.Errorf("%s: detail %q; want it to contain %q", name, c.Detail, part)
				}
			}
			for name, part := range tc.want.fix {
				if c, _ := rep.Find(name); !strings.Contains(c.Fix, part) {
					t.Errorf("%s: fix %q; want it to contain %q", name, c.Fix, part)
				}
			}
			var b bytes.Buffer
			rep.Write(&b)
			if verdict := map[bool]string{true: "READY:", false: "NOT READY"}[rep.CanRun && (!rep.RequireGPU || rep.GPUReady)]; !strings.Contains(b.String(), verdict) {
				t.Errorf("the text report lacks %q:\n%s", verdict, b.String())
			}
			data, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(data, &back); err != nil || len(back.Checks) != len(rep.Checks) {
				t.Errorf("the JSON report does not read back: %v (%d checks; want %d)", err, len(back.Checks), len(rep.Checks))
			}
		})
	}
}

func TestDiskFree(t *testing.T) {
	dir := t.TempDir()
	free, at, err := diskFree(filepath.Join(dir, "runs", "not-yet"))
	if err != nil {
		t.Fatal(err)
	}
	if at != dir || free <= 0 {
		t.Errorf("diskFree measured %s (%d bytes free); want %s, the nearest folder that exists, with room", at, free, dir)
	}
}

func TestReadMemInfo(t *testing.T) {
	for _, tc := range []struct {
		name, text   string
		total, avail int64
		wantErr      bool
	}{
		{name: "linux", text: "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n", total: 24000000 << 10, avail: 20000000 << 10},
		{name: "empty", text: "", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "meminfo")
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := readMemInfo(p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v; want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (m.TotalBytes != tc.total || m.AvailableBytes != tc.avail) {
				t.Errorf("got %+v; want total %d, available %d", m, tc.total, tc.avail)
			}
		})
	}
}
