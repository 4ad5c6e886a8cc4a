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
		site + "/nvidia/cu13":                               true,
	}
}

func TestFindPlugin(t *testing.T) {
	for _, tc := range []struct {
		name        string
		explicit    string
		vars        map[string]string
		files       map[string]bool
		sites       []string
		wantPath    string
		wantVia     string
		wantCUDADir string
		wantErr     string
	}{
		{
			name: "site-packages, newest CUDA first", files: jaxSite(), sites: []string{site},
			wantPath: site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so", wantVia: "site-packages", wantCUDADir: site + "/nvidia/cu13",
		},
		{
			name: "explicit flag wins", explicit: "/x/my_cuda.so", files: map[string]bool{"/x/my_cuda.so": false}, sites: []string{site},
			wantPath: "/x/my_cuda.so", wantVia: "flag",
		},
		{
			name: "explicit flag missing", explicit: "/x/none.so", sites: []string{site},
			wantErr: "/x/none.so",
		},
		{
			name: "PJRT_PLUGIN_LIBRARY_PATH folder", vars: map[string]string{"PJRT_PLUGIN_LIBRARY_PATH": "/plugins"},
			files:    map[string]bool{"/plugins": true, "/plugins/pjrt_c_api_cuda_plugin.so": false},
			wantPath: "/plugins/pjrt_c_api_cuda_plugin.so", wantVia: "PJRT_PLUGIN_LIBRARY_PATH",
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
			if p.Path != tc.wantPath || p.FoundVia != tc.wantVia || p.CUDADir != tc.wantCUDADir {
				t.Errorf("got %+v; want path %s via %s cuda dir %q", p, tc.wantPath, tc.wantVia, tc.wantCUDADir)
			}
		})
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
			[]string{"Searched:", site + "/jax_plugins/xla_cuda*/xla_cuda_plugin.so", "--backend go", "PJRT_PLUGIN_LIBRARY_PATH"}},
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
