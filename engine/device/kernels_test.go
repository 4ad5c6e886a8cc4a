package device

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestKernelSetEnv(t *testing.T) {
	for _, tc := range []struct {
		k    KernelSet
		want string
	}{
		{AVX512, "GOMLX_SIMD_AVX512=true GOMLX_SIMD_AVX512_GEMM=false GOMLX_SIMD_AVX2=true"},
		{AVX512GEMM, "GOMLX_SIMD_AVX512=false GOMLX_SIMD_AVX512_GEMM=true GOMLX_SIMD_AVX2=true"},
		{AVX2, "GOMLX_SIMD_AVX512=false GOMLX_SIMD_AVX512_GEMM=false GOMLX_SIMD_AVX2=true"},
		{Portable, "GOMLX_SIMD_AVX512=false GOMLX_SIMD_AVX512_GEMM=false GOMLX_SIMD_AVX2=false"},
	} {
		if got := strings.Join(tc.k.Env(), " "); got != tc.want {
			t.Errorf("%s.Env() = %q; want %q", tc.k, got, tc.want)
		}
		// A process started with a set's environment runs that set, where the CPU has it.
		env := map[string]string{}
		for _, kv := range tc.k.Env() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		avail := KernelSets()
		want := tc.k
		for want != Portable && !contains(avail, want) {
			want = map[KernelSet]KernelSet{AVX512: AVX2, AVX512GEMM: AVX2, AVX2: Portable}[want]
		}
		if got := ActiveKernels(envOf(env)); got != want {
			t.Errorf("ActiveKernels(%s.Env()) = %s; want %s (this CPU and build have %v)", tc.k, got, want, avail)
		}
	}
	if got, want := ActiveKernels(envOf(nil)), KernelSets()[0]; got != want {
		t.Errorf("ActiveKernels with nothing set = %s; want the first available, %s", got, want)
	}
}

func contains(s []KernelSet, k KernelSet) bool {
	for _, x := range s {
		if x == k {
			return true
		}
	}
	return false
}

// TestPickKernels: both phases count relative to the fastest set, ties keep the backend's order.
func TestPickKernels(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []KernelTiming
		want KernelSet
	}{
		{"intel-like: simd three times slower", []KernelTiming{{AVX512, 60, 900}, {AVX2, 57, 880}, {Portable, 19, 350}}, Portable},
		{"amd-like: avx512 twice as fast", []KernelTiming{{AVX512, 17, 170}, {AVX2, 30, 300}, {Portable, 20, 350}}, AVX512},
		{"split: decode a little slower, train much faster", []KernelTiming{{AVX512, 21, 170}, {Portable, 20, 350}}, AVX512},
		{"tie keeps the order", []KernelTiming{{AVX512, 20, 300}, {Portable, 20, 300}}, AVX512},
	} {
		c := pickKernels(tc.ts)
		if c.Set != tc.want {
			t.Errorf("%s: picked %s; want %s (%s)", tc.name, c.Set, tc.want, c.Reason)
		}
		if !strings.Contains(c.Reason, "measured fastest") {
			t.Errorf("%s: reason %q does not say it was measured", tc.name, c.Reason)
		}
	}
}

// TestChooseKernels walks the order of ChooseKernels with a fake probe and a temporary cache.
func TestChooseKernels(t *testing.T) {
	if len(KernelSets()) < 2 {
		// Without the SIMD build (or AVX2) there is nothing to choose: say so, probe nothing.
		c := ChooseKernels(KernelOptions{Getenv: envOf(nil), Probe: func(KernelSet) (KernelTiming, error) {
			t.Fatal("probed with a single kernel set")
			return KernelTiming{}, nil
		}})
		if c.Set != Portable || !strings.Contains(c.Reason, "portable kernels:") {
			t.Fatalf("single set: %+v", c)
		}
		return
	}
	cache := filepath.Join(t.TempDir(), "kernels.json")
	var probed []KernelSet
	fast := map[KernelSet]KernelTiming{AVX512: {AVX512, 60, 900}, AVX512GEMM: {AVX512GEMM, 58, 870}, AVX2: {AVX2, 57, 880}, Portable: {Portable, 19, 350}}
	probe := func(k KernelSet) (KernelTiming, error) {
		probed = append(probed, k)
		return fast[k], nil
	}
	o := KernelOptions{Shape: "test-shape", Probe: probe, CacheFile: cache, Getenv: envOf(nil)}
	c := ChooseKernels(o)
	if c.Set != Portable || len(probed) != len(KernelSets()) || len(c.Timings) != len(KernelSets()) {
		t.Fatalf("first choice %+v after probing %v; want portable after probing every set once", c, probed)
	}
	// The second time the cache answers and nothing is probed; without a probe too.
	probed = nil
	if c = ChooseKernels(o); c.Set != Portable || len(probed) != 0 || !strings.Contains(c.Reason, "cached in "+cache) {
		t.Fatalf("cached choice %+v, probed %v; want portable from the cache", c, probed)
	}
	if c = (func(o KernelOptions) KernelChoice { o.Probe = nil; return ChooseKernels(o) })(o); c.Set != Portable || !strings.Contains(c.Reason, "cached in") {
		t.Errorf("cached choice without a probe: %+v; want portable from the cache", c)
	}
	// Another shape is measured anew; Fresh measures again.
	o.Shape = "other"
	if ChooseKernels(o); len(probed) == 0 {
		t.Error("a new shape was not measured")
	}
	probed = nil
	o.Fresh = true
	if ChooseKernels(o); len(probed) == 0 {
		t.Error("Fresh did not measure")
	}
	// Close results are measured twice, keeping each set's best.
	probed = nil
	// (The two close sets are the first two this CPU has: avx512 and avx2 on an AVX-512 machine,
	// avx2 and portable on an AVX2-only one.)
	sets := KernelSets()
	near := map[KernelSet]KernelTiming{}
	for i, k := range sets {
		near[k] = KernelTiming{k, 40, 600} // far behind
		if i < 2 {
			near[k] = KernelTiming{k, 20 + float64(i), 300 + 10*float64(i)}
		}
	}
	o.Probe = func(k KernelSet) (KernelTiming, error) { probed = append(probed, k); return near[k], nil }
	if c = ChooseKernels(o); c.Set != sets[0] || len(probed) != len(sets)+2 {
		t.Errorf("close call: %s after probing %v; want %s after a second look at the two best", c.Set, probed, sets[0])
	}
	// The user's environment wins and nothing is probed.
	probed = nil
	o.Getenv = envOf(map[string]string{"GOMLX_SIMD_AVX512": "false"})
	if c = ChooseKernels(o); len(probed) != 0 || !strings.Contains(c.Reason, "GOMLX_SIMD_AVX512=false in the environment") || c.Set == AVX512 {
		t.Errorf("environment: %+v, probed %v", c, probed)
	}
	// A choice carried into a restarted process is taken as it is when it matches the process.
	carried := KernelChoice{Set: Portable, Reason: "carried"}
	data, _ := json.Marshal(carried)
	env := map[string]string{EnvKernels: string(data)}
	for _, kv := range Portable.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	o.Getenv = envOf(env)
	if c = ChooseKernels(o); c.Reason != "carried" || len(probed) != 0 {
		t.Errorf("carried choice: %+v, probed %v", c, probed)
	}
	// A failing probe keeps the active set and says why.
	o.Getenv, o.Fresh = envOf(nil), true
	o.Probe = func(KernelSet) (KernelTiming, error) { return KernelTiming{}, errors.New("boom") }
	if c = ChooseKernels(o); c.Set != ActiveKernels(envOf(nil)) || !strings.Contains(c.Reason, "boom") {
		t.Errorf("failing probe: %+v", c)
	}
	// A set that fails is left out, the others are compared, and nothing is cached: the next
	// choice measures again.
	o.Shape, probed = "partial", nil
	o.Probe = func(k KernelSet) (KernelTiming, error) {
		probed = append(probed, k)
		if k == Portable {
			return KernelTiming{}, ErrNoReexec
		}
		return fast[k], nil
	}
	c = ChooseKernels(o)
	if c.Set == Portable || len(c.Timings) != len(KernelSets())-1 || !strings.Contains(c.Reason, "not measured: portable ("+ErrNoReexec.Error()) {
		t.Errorf("partial measurement: %+v", c)
	}
	o.Fresh, probed = false, nil
	if ChooseKernels(o); len(probed) == 0 {
		t.Error("a partial measurement was cached")
	}
	// Without a probe and with nothing cached, the active set runs, unmeasured.
	o.Shape, o.Probe = "never measured", nil
	if c = ChooseKernels(o); c.Set != ActiveKernels(envOf(nil)) || !strings.Contains(c.Reason, "not measured") || len(c.Timings) != 0 {
		t.Errorf("no probe: %+v", c)
	}
}

// TestKernelEnv: a set's process gets the set's variables, and a choice only when one is carried.
func TestKernelEnv(t *testing.T) {
	in := []string{"HOME=/h", "GOMLX_SIMD_AVX512=false", "AGENTRL_KERNELS={}", "GOMLX_SIMD_AVX2=true", "GOMLX_SIMD_AVX512_GEMM=true", "X=1"}
	got := strings.Join(KernelEnv(in, AVX2, ""), " ")
	if want := "HOME=/h X=1 GOMLX_SIMD_AVX512=false GOMLX_SIMD_AVX512_GEMM=false GOMLX_SIMD_AVX2=true"; got != want {
		t.Errorf("KernelEnv(avx2) = %q; want %q", got, want)
	}
	got = strings.Join(KernelEnv(in, AVX512, `{"set":"avx512"}`), " ")
	if want := `HOME=/h X=1 GOMLX_SIMD_AVX512=true GOMLX_SIMD_AVX512_GEMM=false GOMLX_SIMD_AVX2=true AGENTRL_KERNELS={"set":"avx512"}`; got != want {
		t.Errorf("KernelEnv(avx512, carried) = %q; want %q", got, want)
	}
}

// TestGoBackend decides as Open does, without opening anything.
func TestGoBackend(t *testing.T) {
	noGPU := func() (bool, string) { return false, "none" }
	gpu := func() (bool, string) { return true, "a GPU" }
	for _, tc := range []struct {
		name   string
		env    map[string]string
		kind   string
		hasGPU func() (bool, string)
		want   bool
	}{
		{"go asked", nil, Go, gpu, true},
		{"cuda asked", nil, CUDA, noGPU, false},
		{"auto without a GPU", nil, Auto, noGPU, true},
		{"auto, GPU but no plugin", nil, "", gpu, true},
		{"GOMLX_BACKEND go wins", map[string]string{"GOMLX_BACKEND": "go:ops_sequential"}, CUDA, gpu, true},
		{"GOMLX_BACKEND xla wins", map[string]string{"GOMLX_BACKEND": "xla:cuda"}, Go, noGPU, false},
		{"unknown kind", nil, "tpu", noGPU, false},
	} {
		env := Env{Getenv: envOf(tc.env), HasGPU: tc.hasGPU, Glob: func(string) ([]string, error) { return nil, nil },
			Stat: func(string) (os.FileInfo, error) { return nil, os.ErrNotExist }, SitePkgs: func() []string { return nil }}
		if got := goBackend(Request{Kind: tc.kind}, env); got != tc.want {
			t.Errorf("%s: goBackend = %v; want %v", tc.name, got, tc.want)
		}
	}
}

// TestRestartInATest: a test binary cannot restart itself, and says so.
func TestRestartInATest(t *testing.T) {
	if CanRestart() {
		t.Fatal("CanRestart in a test binary")
	}
	if err := Restart(KernelChoice{Set: Portable}); !errors.Is(err, ErrNoReexec) {
		t.Errorf("Restart = %v; want ErrNoReexec", err)
	}
	if _, err := ProcessProbe([]string{"kernels", "probe"}, time.Second, nil)(Portable); !errors.Is(err, ErrNoReexec) {
		t.Errorf("ProcessProbe = %v; want ErrNoReexec", err)
	}
}

func TestCPUModel(t *testing.T) {
	if m := CPUModel(); m == "" {
		t.Error("CPUModel is empty")
	}
}
