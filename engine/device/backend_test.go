package device

import (
	"agentrl/engine/device/devicetest"
	"io"
	"os"
	"strings"
	"testing"
)

// fakeEnv is an in-memory environment: files that exist, variables, and a GPU answer.
type fakeEnv struct {
	vars  map[string]string
	files devicetest.Files
	gpu   bool
	sites []string
}

func (e *fakeEnv) env() Env {
	return Env{
		Getenv:   func(k string) string { return e.vars[k] },
		Setenv:   func(k, v string) error { e.vars[k] = v; return nil },
		Glob:     e.files.Glob,
		Stat:     e.files.Stat,
		HasGPU:   func() (bool, string) { return e.gpu, "fake" },
		SitePkgs: func() []string { return e.sites },
	}
}

const site = "/opt/torch/.venv/lib/python3.12/site-packages"

func jaxSite() map[string]bool {
	return map[string]bool{
		site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so": false,
		site + "/jax_plugins/xla_cuda12/xla_cuda_plugin.so": false,
		site + "/nvidia":      true,
		site + "/nvidia/cu13": true,
	}
}

// goXLA is what go-xla v0.4.5's installer leaves in prefix (installer/cuda.go CudaInstall):
// go-xla/nvidia/pjrt_c_api_cuda_plugin.so beside the nvidia-* wheels' folders; withLibs false
// leaves the plugin alone, as a copy of the file without its folder.
func goXLA(prefix string, withLibs bool) map[string]bool {
	files := map[string]bool{prefix + "/go-xla": true, prefix + "/go-xla/nvidia/pjrt_c_api_cuda_plugin.so": false}
	if withLibs {
		for _, d := range []string{"nvidia", "nvidia/cu13", "nvidia/cudnn", "nvidia/bin"} {
			files[prefix+"/go-xla/"+d] = true
		}
	} else {
		delete(files, prefix+"/go-xla")
	}
	return files
}

func merge(ms ...map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestFindPlugin(t *testing.T) {
	const goxlaPlugin = "/root/.local/lib/go-xla/nvidia/pjrt_c_api_cuda_plugin.so"
	for _, tc := range []struct {
		name        string
		explicit    string
		vars        map[string]string
		files       map[string]bool
		sites       []string
		wantPath    string
		wantVia     string
		wantCUDADir string
		wantLayout  string
		wantErr     string
	}{
		{
			name: "site-packages, newest CUDA first", files: jaxSite(), sites: []string{site},
			wantPath: site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so", wantVia: "site-packages", wantCUDADir: site + "/nvidia/cu13", wantLayout: LayoutJAX,
		},
		{
			name: "go-xla's installer in ~/.local/lib", vars: map[string]string{"HOME": "/root"}, files: goXLA("/root/.local/lib", true),
			wantPath: goxlaPlugin, wantVia: "go-xla installer folder", wantCUDADir: "/root/.local/lib/go-xla/nvidia/cu13", wantLayout: LayoutGoXLA,
		},
		{
			name: "go-xla's installer in /usr/local/lib", files: goXLA("/usr/local/lib", true),
			wantPath: "/usr/local/lib/go-xla/nvidia/pjrt_c_api_cuda_plugin.so", wantVia: "go-xla installer folder",
			wantCUDADir: "/usr/local/lib/go-xla/nvidia/cu13", wantLayout: LayoutGoXLA,
		},
		{
			name: "both layouts: JAX's wheel first", vars: map[string]string{"HOME": "/root"}, files: merge(jaxSite(), goXLA("/root/.local/lib", true)), sites: []string{site},
			wantPath: site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so", wantVia: "site-packages", wantCUDADir: site + "/nvidia/cu13", wantLayout: LayoutJAX,
		},
		{
			name: "go-xla's plugin by hand finds its CUDA folder", explicit: goxlaPlugin, files: goXLA("/root/.local/lib", true),
			wantPath: goxlaPlugin, wantVia: ViaFlag, wantCUDADir: "/root/.local/lib/go-xla/nvidia/cu13", wantLayout: LayoutGoXLA,
		},
		{
			name: "a go-xla install folder named", explicit: "/root/.local/lib/go-xla", files: goXLA("/root/.local/lib", true),
			wantPath: goxlaPlugin, wantVia: ViaFlag, wantCUDADir: "/root/.local/lib/go-xla/nvidia/cu13", wantLayout: LayoutGoXLA,
		},
		{
			name: "a site-packages folder named", explicit: site, files: merge(jaxSite(), map[string]bool{site: true}),
			wantPath: site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so", wantVia: ViaFlag, wantCUDADir: site + "/nvidia/cu13", wantLayout: LayoutJAX,
		},
		{
			name: "a folder without a plugin", explicit: "/opt/empty", files: map[string]bool{"/opt/empty": true},
			wantErr: "holds no PJRT CUDA plugin",
		},
		{
			name: "go-xla's plugin without its nvidia folder", explicit: goxlaPlugin, files: goXLA("/root/.local/lib", false),
			wantPath: goxlaPlugin, wantVia: ViaFlag, wantCUDADir: "", wantLayout: LayoutGoXLA,
		},
		{
			name: "explicit flag wins", explicit: "/x/my_cuda.so", files: map[string]bool{"/x/my_cuda.so": false}, sites: []string{site},
			wantPath: "/x/my_cuda.so", wantVia: ViaFlag, wantLayout: LayoutOther,
		},
		{
			name: "explicit flag missing", explicit: "/x/none.so", sites: []string{site},
			wantErr: "/x/none.so",
		},
		{
			name: "PJRT_PLUGIN_LIBRARY_PATH folder", vars: map[string]string{"PJRT_PLUGIN_LIBRARY_PATH": "/plugins"},
			files:    map[string]bool{"/plugins": true, "/plugins/pjrt_c_api_cuda_plugin.so": false},
			wantPath: "/plugins/pjrt_c_api_cuda_plugin.so", wantVia: "PJRT_PLUGIN_LIBRARY_PATH", wantLayout: LayoutOther,
		},
		{
			name: "PJRT_PLUGIN_LIBRARY_PATH is go-xla's nvidia folder", vars: map[string]string{"PJRT_PLUGIN_LIBRARY_PATH": "/usr/local/lib/go-xla/nvidia"},
			files:    goXLA("/usr/local/lib", true),
			wantPath: "/usr/local/lib/go-xla/nvidia/pjrt_c_api_cuda_plugin.so", wantVia: "PJRT_PLUGIN_LIBRARY_PATH",
			wantCUDADir: "/usr/local/lib/go-xla/nvidia/cu13", wantLayout: LayoutGoXLA,
		},
		{
			name: "nothing anywhere", sites: []string{"/usr/lib/python3/dist-packages"},
			wantErr: "no PJRT CUDA plugin",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := &fakeEnv{vars: map[string]string{}, files: tc.files, sites: tc.sites}
			for k, v := range tc.vars {
				fe.vars[k] = v
			}
			p, searched, err := FindPlugin(tc.explicit, fe.env())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error()+strings.Join(searched, ";"), tc.wantErr) {
					t.Fatalf("got %v (searched %v); want error mentioning %q", err, searched, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Path != tc.wantPath || p.FoundVia != tc.wantVia || p.CUDADir != tc.wantCUDADir || p.Layout != tc.wantLayout {
				t.Errorf("got %+v; want path %s via %s cuda dir %q layout %q", p, tc.wantPath, tc.wantVia, tc.wantCUDADir, tc.wantLayout)
			}
		})
	}
}

// TestSetCUDAEnv: the data folder goes into XLA_FLAGS unless one is there; go-xla's checks are
// turned off only for JAX's wheel, where they look for jax_plugins/nvidia, and never over the
// user's own setting.
func TestSetCUDAEnv(t *testing.T) {
	jax := &Plugin{Path: site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so", CUDADir: site + "/nvidia/cu13", Layout: LayoutJAX}
	goxla := &Plugin{Path: "/g/go-xla/nvidia/pjrt_c_api_cuda_plugin.so", CUDADir: "/g/go-xla/nvidia/cu13", Layout: LayoutGoXLA}
	bare := &Plugin{Path: "/x/pjrt_c_api_cuda_plugin.so", Layout: LayoutOther}
	for _, tc := range []struct {
		name       string
		p          *Plugin
		vars       map[string]string
		wantFlags  string
		wantChecks string
	}{
		{"jax wheel", jax, nil, "--xla_gpu_cuda_data_dir=" + site + "/nvidia/cu13", "0"},
		{"go-xla installer: checks stay on", goxla, nil, "--xla_gpu_cuda_data_dir=/g/go-xla/nvidia/cu13", ""},
		{"no CUDA folder: go-xla's fix-up may find one", bare, nil, "", ""},
		{"the user's XLA_FLAGS and checks are kept", jax, map[string]string{"XLA_FLAGS": "--xla_gpu_cuda_data_dir=/usr/local/cuda", "GOPJRT_CUDA_CHECKS": "1"},
			"--xla_gpu_cuda_data_dir=/usr/local/cuda", "1"},
		{"other XLA_FLAGS are kept", goxla, map[string]string{"XLA_FLAGS": "--xla_dump_to=/tmp/d"},
			"--xla_dump_to=/tmp/d --xla_gpu_cuda_data_dir=/g/go-xla/nvidia/cu13", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := &fakeEnv{vars: map[string]string{}}
			for k, v := range tc.vars {
				fe.vars[k] = v
			}
			setCUDAEnv(tc.p, fe.env())
			if got := fe.vars["XLA_FLAGS"]; got != tc.wantFlags {
				t.Errorf("XLA_FLAGS = %q; want %q", got, tc.wantFlags)
			}
			if got := fe.vars["GOPJRT_CUDA_CHECKS"]; got != tc.wantChecks {
				t.Errorf("GOPJRT_CUDA_CHECKS = %q; want %q", got, tc.wantChecks)
			}
		})
	}
}

func TestLibsFix(t *testing.T) {
	for _, tc := range []struct {
		p     *Plugin
		wants []string
	}{
		{&Plugin{Path: site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so", Layout: LayoutJAX}, []string{"pip install 'jax[cuda13]==" + JAXVersion + "'", site}},
		{&Plugin{Path: "/g/go-xla/nvidia/pjrt_c_api_cuda_plugin.so", Layout: LayoutGoXLA}, []string{"pjrt_installer", "-version " + JAXVersion, "-path /g/go-xla"}},
		{&Plugin{Path: "/x/y/my_cuda.so", Layout: LayoutOther}, []string{"/x/nvidia", "XLA_FLAGS"}},
	} {
		got := LibsFix(tc.p)
		for _, w := range tc.wants {
			if !strings.Contains(got, w) {
				t.Errorf("LibsFix(%s) = %q; want it to contain %q", tc.p.Layout, got, w)
			}
		}
	}
}

func TestOpenChoosesGoWithoutGPU(t *testing.T) {
	fe := &fakeEnv{vars: map[string]string{}, files: jaxSite(), sites: []string{site}}
	c, err := open(Request{Kind: Auto}, fe.env())
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != Go || !strings.Contains(c.Reason, "no NVIDIA GPU") {
		t.Errorf("got %s (%q); want go with a reason naming the missing GPU", c.Kind, c.Reason)
	}
	if fe.vars["GOMLX_NO_AUTO_INSTALL"] != "1" {
		t.Errorf("GOMLX_NO_AUTO_INSTALL = %q; want 1", fe.vars["GOMLX_NO_AUTO_INSTALL"])
	}
}

func TestOpenAutoWithGPUButNoPluginFallsBack(t *testing.T) {
	fe := &fakeEnv{vars: map[string]string{}, gpu: true}
	c, err := open(Request{}, fe.env())
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != Go || !strings.Contains(c.Reason, "no PJRT CUDA plugin") {
		t.Errorf("got %s (%q); want go naming the missing plugin", c.Kind, c.Reason)
	}
}

func TestOpenCUDAErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fe    *fakeEnv
		wants []string
	}{
		{"no plugin", &fakeEnv{vars: map[string]string{}, gpu: true, sites: []string{site}},
			[]string{"Searched:", site + "/jax_plugins/xla_cuda*/xla_cuda_plugin.so", "/usr/local/lib/go-xla/nvidia/pjrt_c_api_cuda*_plugin.so",
				"--backend go", "PJRT_PLUGIN_LIBRARY_PATH", "jax[cuda13]==", "pjrt_installer"}},
		{"plugin but no GPU", &fakeEnv{vars: map[string]string{}, files: jaxSite(), sites: []string{site}},
			[]string{"no usable NVIDIA GPU", "--backend go"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := open(Request{Kind: CUDA}, tc.fe.env())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestOpenRejectsUnknownKind(t *testing.T) {
	fe := &fakeEnv{vars: map[string]string{}}
	if _, err := open(Request{Kind: "tpu"}, fe.env()); err == nil || !strings.Contains(err.Error(), "auto, go, cuda") {
		t.Fatalf("got %v; want an error listing the accepted kinds", err)
	}
}

func TestGOMLXBackendEnvWins(t *testing.T) {
	fe := &fakeEnv{vars: map[string]string{"GOMLX_BACKEND": "go"}, gpu: true, files: jaxSite(), sites: []string{site}}
	c, err := open(Request{Kind: CUDA}, fe.env())
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != Go || !strings.Contains(c.Reason, "GOMLX_BACKEND") {
		t.Errorf("got %s (%q); want the environment's go backend", c.Kind, c.Reason)
	}
	// GOMLX_BACKEND=go is GoMLX's parallel op scheduler with a bounded pool, which deadlocks
	// here: it runs unbounded, and the reason says so.
	if c.Config != "go:parallelism=-1" || !strings.Contains(c.Reason, "GOMLX_BACKEND=go runs GoMLX's parallel op scheduler with a bounded worker pool") {
		t.Errorf("GOMLX_BACKEND=go ran %q (%q); want go:parallelism=-1 and a reason naming the replacement", c.Config, c.Reason)
	}
}

func TestSafeGoConfig(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		changed  bool
	}{
		{"go", "go:parallelism=-1", true},
		{"go:", "go:parallelism=-1", true},
		{"go:ops_parallel", "go:ops_parallel,parallelism=-1", true},
		{"go:ops_parallel,parallelism=4", "go:ops_parallel,parallelism=-1", true},
		{"go:ops_parallel,parallelism=-1", "go:ops_parallel,parallelism=-1", false},
		{"go:parallelism=0", "go:parallelism=0", false},
		{"go:ops_sequential", "go:ops_sequential", false},
		{"go:parallelism=2,ops_sequential", "go:parallelism=2,ops_sequential", false},
		{"go:ops_sequential,ops_parallel", "go:ops_sequential,ops_parallel,parallelism=-1", true}, // the last one wins in GoMLX
		{"go:dependency_order", "go:dependency_order,parallelism=-1", true},
	} {
		got, changed := SafeGoConfig(tc.in)
		if got != tc.want || changed != tc.changed {
			t.Errorf("SafeGoConfig(%q) = %q, %v; want %q, %v", tc.in, got, changed, tc.want, tc.changed)
		}
	}
}

// TestNewGoKeepsStdoutClean: GoMLX prints a line on standard output when parallelism is set;
// NewGo must not let it through (it would corrupt --json output).
func TestNewGoKeepsStdoutClean(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	b, err := NewGo(GoConfig)
	os.Stdout = saved
	w.Close()
	out, _ := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if len(out) != 0 {
		t.Errorf("NewGo printed %q on standard output", out)
	}
	if d := b.Description(); !strings.Contains(d, "parallelism=-1") {
		t.Errorf("backend %q; want the unbounded pool of GoConfig", d)
	}
	if os.Stdout != saved {
		t.Error("NewGo left os.Stdout replaced")
	}
}

func TestMonitorWithoutGPU(t *testing.T) {
	m := NewMonitor()
	defer m.Close()
	if ok, reason := m.Available(); !ok {
		if _, got := m.Read(); got {
			t.Error("Read reported a sample without a GPU")
		}
		if reason == "" {
			t.Error("no reason given for the missing GPU")
		}
	}
}

// TestOpenPicksTheGoSchedulerByModelSize: the Go backend runs ops in parallel for a small or
// unknown model and one at a time from SequentialOpsFrom parameters, and says so.
func TestOpenPicksTheGoSchedulerByModelSize(t *testing.T) {
	for _, c := range []struct {
		params int64
		cfg    string
		says   string
	}{
		{0, GoConfig, ""},
		{650_000, GoConfig, ""}, // the built-in model
		{SequentialOpsFrom - 1, GoConfig, ""},
		{SequentialOpsFrom, GoSequentialConfig, "ops in order: a model of 100M parameters"},
		{596_049_920, GoSequentialConfig, "ops in order: a model of 596M parameters"}, // Qwen3-0.6B
	} {
		fe := &fakeEnv{vars: map[string]string{}, files: jaxSite(), sites: []string{site}}
		ch, err := open(Request{Kind: Go, ModelParams: c.params}, fe.env())
		if err != nil {
			t.Fatal(err)
		}
		if ch.Config != c.cfg || c.says != "" && !strings.Contains(ch.Reason, c.says) || c.says == "" && strings.Contains(ch.Reason, "ops in order") {
			t.Errorf("%d parameters: config %q, reason %q; want %q saying %q", c.params, ch.Config, ch.Reason, c.cfg, c.says)
		}
	}
}
