package device

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"agentrl/third_party/patches"
)

// KernelSet names a set of matrix kernels of GoMLX's Go backend: its AVX-512 kernels, its AVX2
// kernels with the AVX-512 ones for large float32 products (third_party/compute's patch 27), its
// AVX2 kernels, or its portable Go ones. The backend registers its kernels once, when the process
// starts, from GOMLX_SIMD_AVX512, GOMLX_SIMD_AVX512_GEMM and GOMLX_SIMD_AVX2, so a set holds for a
// whole process and another set means another process.
//
// Which set is fastest depends on the CPU, not only on what it supports: on an AVX-512 AMD EPYC
// the AVX-512 kernels train about three times as fast as the portable ones, while on an AVX-512
// Intel Xeon the SIMD kernels decoded 2.6x and trained 1.4x slower (and on an AVX2-only EPYC
// generation was slower too). The likely cause: the scalar code after them, math.Exp above all,
// ran with the vector registers' upper halves dirty (gomlx/compute v0.1.6 never clears them),
// which Intel CPUs pay for and AMD CPUs do not; third_party/compute's patch 13 clears them after
// every node and pooled task, and patches 6, 9 and 15 replaced the slowest kernels with assembly,
// none of it yet timed on an Intel CPU. So the choice is measured, not inferred: the binary
// measures, once per CPU model, GoMLX version (with its patches) and model shape, and runs with
// the fastest set (see ChooseKernels).
type KernelSet string

// The kernel sets, in the order the backend prefers them when nothing is switched off.
const (
	AVX512 KernelSet = "avx512"
	// AVX512GEMM is the AVX2 set with its large float32 products (training's, a long prefill's)
	// on the AVX-512 panel kernel: on an AMD EPYC with AVX-512 that kernel is the faster one, the
	// AVX2 set's small ones decode faster, and the large products are bit-identical either way.
	AVX512GEMM KernelSet = "avx512-gemm"
	AVX2       KernelSet = "avx2"
	Portable   KernelSet = "portable"
)

// The environment variables the Go backend reads at start-up, and the one that carries a choice
// into the process the binary restarts itself as.
const (
	envAVX512     = "GOMLX_SIMD_AVX512"
	envAVX512GEMM = "GOMLX_SIMD_AVX512_GEMM"
	envAVX2       = "GOMLX_SIMD_AVX2"
	EnvKernels    = "AGENTRL_KERNELS"
)

// kernelEnvs are the backend's variables that choose a set, in the order Env writes them.
var kernelEnvs = []string{envAVX512, envAVX512GEMM, envAVX2}

// KernelEnvNames are the environment variables the Go backend reads at start-up to choose its
// kernel set (what a test clears to start from the backend's default).
func KernelEnvNames() []string { return append([]string{}, kernelEnvs...) }

// Env is the environment that makes a new process of this binary run set k.
func (k KernelSet) Env() []string {
	on := func(b bool) string {
		if b {
			return "true"
		}
		return "false"
	}
	return []string{envAVX512 + "=" + on(k == AVX512), envAVX512GEMM + "=" + on(k == AVX512GEMM),
		envAVX2 + "=" + on(k == AVX512 || k == AVX512GEMM || k == AVX2)}
}

// KernelSets lists the sets this binary and this CPU can run, in the backend's order of
// preference: AVX-512 (and AVX-512 GEMM) and AVX2 only in a build with GOEXPERIMENT=simd on a
// CPU that has them.
func KernelSets() []KernelSet { return append(simdKernelSets(), Portable) }

// ActiveKernels is the set the backend registered in this process: the first of KernelSets that
// the environment does not switch off.
func ActiveKernels(getenv func(string) string) KernelSet {
	off := func(name string) bool {
		switch strings.ToLower(getenv(name)) {
		case "0", "false", "f", "no", "off", "disabled":
			return true
		}
		return false
	}
	on := func(name string) bool {
		switch strings.ToLower(getenv(name)) {
		case "1", "true", "t", "yes", "on", "enabled":
			return true
		}
		return false
	}
	for _, k := range KernelSets() {
		switch {
		case k == AVX512 && !off(envAVX512):
			return k
		case k == AVX512GEMM && on(envAVX512GEMM) && !off(envAVX2): // the backend's default is off
			return k
		case k == AVX2 && !off(envAVX2):
			return k
		case k == Portable:
			return k
		}
	}
	return Portable
}

// KernelTiming is what one set measured on the model: a decode step and a training micro-step.
type KernelTiming struct {
	Set      KernelSet `json:"set"`
	DecodeMs float64   `json:"decode_ms"`
	TrainMs  float64   `json:"train_ms"`
}

// KernelChoice is the set a process runs with and why.
type KernelChoice struct {
	Set     KernelSet      `json:"set"`
	Reason  string         `json:"reason"`
	Timings []KernelTiming `json:"timings,omitempty"`
	// Measured is when the timings were taken (they may come from the cache).
	Measured time.Time `json:"measured,omitzero"`
}

// KernelOptions say how to choose.
type KernelOptions struct {
	// Shape identifies the work the choice is for: the model's shape and the decode and training
	// batch shapes (their sizes decide which kernels pay off).
	Shape string
	// Probe measures one set, in a process of its own that starts with set.Env(). nil measures
	// nothing: the cache answers, else the active set runs, unmeasured.
	Probe func(set KernelSet) (KernelTiming, error)
	// CacheFile holds earlier choices (default: DefaultKernelCache()).
	CacheFile string
	// Fresh measures again even when the cache has an answer.
	Fresh  bool
	Getenv func(string) string // default os.Getenv
	// Progress, when set, is told before each measurement.
	Progress func(msg string)
}

// DefaultKernelCache is where choices are kept: kernels.json under the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache on Linux).
func DefaultKernelCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "agentrl-tui", "kernels.json")
}

// ChooseKernels decides which kernel set to run. In order: a choice carried in AGENTRL_KERNELS
// (this process is the restart that applies one), GOMLX_SIMD_AVX512 / _AVX512_GEMM / _AVX2 set by the
// user, the only set there is, an earlier measurement of this CPU, GoMLX version and shape in the
// cache, or a new measurement of every set (kept in the cache when every set could be measured).
// It never fails: when nothing could be measured the active set runs, and the reason says why.
func ChooseKernels(o KernelOptions) KernelChoice {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	active := ActiveKernels(o.Getenv)
	if s := o.Getenv(EnvKernels); s != "" {
		var c KernelChoice
		if err := json.Unmarshal([]byte(s), &c); err == nil && c.Set == active {
			return c
		}
	}
	var set []string
	for _, name := range kernelEnvs {
		if v := o.Getenv(name); v != "" {
			set = append(set, name+"="+v)
		}
	}
	if len(set) > 0 {
		return KernelChoice{Set: active, Reason: fmt.Sprintf("%s kernels, as %s in the environment says", active, strings.Join(set, " "))}
	}
	sets := KernelSets()
	if len(sets) == 1 {
		why := "this binary was built without GOEXPERIMENT=simd"
		if simdBuild {
			why = "this CPU has no AVX2"
		}
		return KernelChoice{Set: Portable, Reason: "portable kernels: " + why}
	}
	if o.CacheFile == "" {
		o.CacheFile = DefaultKernelCache()
	}
	key := KernelCacheKey(o.Shape)
	cache := readKernelCache(o.CacheFile)
	if c, ok := cache[key]; ok && !o.Fresh && len(c.Timings) > 0 {
		c.Reason = fmt.Sprintf("%s; measured %s, cached in %s", c.Reason, c.Measured.Format("2006-01-02"), o.CacheFile)
		return c
	}
	if o.Probe == nil {
		return KernelChoice{Set: active, Reason: fmt.Sprintf("%s kernels, the backend's default: not measured on this CPU for this model", active)}
	}
	timings, failed := measureKernels(sets, o)
	if len(timings) == 0 {
		return KernelChoice{Set: active, Reason: fmt.Sprintf("%s kernels, the backend's default: measuring failed (%s)", active, strings.Join(failed, "; "))}
	}
	c := pickKernels(timings)
	c.Measured = time.Now().UTC()
	if len(failed) > 0 {
		// A set that fails (bfloat16 refused on a CPU whose kernels compute it wrongly, a process
		// that cannot restart itself) is left out, and the choice is not kept: the next run measures again.
		c.Reason += fmt.Sprintf("; not measured: %s", strings.Join(failed, "; "))
		return c
	}
	cache[key] = c
	if err := writeKernelCache(o.CacheFile, cache); err != nil {
		c.Reason += fmt.Sprintf(" (not cached: %v)", err)
	}
	return c
}

// KernelCacheKey is the cache's key for a shape on this machine: the CPU model, the gomlx/compute
// version and the shape.
func KernelCacheKey(shape string) string {
	return strings.Join([]string{CPUModel(), "gomlx/compute " + ComputeVersion(), shape}, " | ")
}

// measureKernels probes every set once, and the two best again when they are within 25 % of
// each other, keeping each set's fastest figures (a busy machine only ever makes a set slower).
// A set whose probe fails is left out; failed says which and why.
func measureKernels(sets []KernelSet, o KernelOptions) (timings []KernelTiming, failed []string) {
	best := map[KernelSet]KernelTiming{}
	probe := func(k KernelSet) {
		if _, again := best[k]; o.Progress != nil && again {
			o.Progress(fmt.Sprintf("measuring the %s kernels again (the two best are within 25 %%)", k))
		} else if o.Progress != nil {
			o.Progress(fmt.Sprintf("measuring the %s kernels on this CPU (once per CPU model and model shape)", k))
		}
		t, err := o.Probe(k)
		if err == nil && (t.DecodeMs <= 0 || t.TrainMs <= 0) {
			err = fmt.Errorf("the probe measured %.3g ms a decode step and %.3g ms a train micro-step", t.DecodeMs, t.TrainMs)
		}
		if _, ok := best[k]; err != nil && ok {
			return // a second look that failed: the first figures stand
		} else if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", k, err))
			return
		}
		t.Set = k
		if b, ok := best[k]; ok {
			t.DecodeMs, t.TrainMs = min(t.DecodeMs, b.DecodeMs), min(t.TrainMs, b.TrainMs)
		}
		best[k] = t
	}
	for _, k := range sets {
		probe(k)
	}
	ranked := rankKernels(values(best, sets))
	if len(ranked) > 1 && KernelScore(ranked[1], ranked) < 1.25*KernelScore(ranked[0], ranked) {
		for _, k := range []KernelSet{ranked[0].Set, ranked[1].Set} {
			probe(k)
		}
	}
	return values(best, sets), failed
}

func values(m map[KernelSet]KernelTiming, order []KernelSet) []KernelTiming {
	out := make([]KernelTiming, 0, len(m))
	for _, k := range order {
		if t, ok := m[k]; ok {
			out = append(out, t)
		}
	}
	return out
}

// KernelScore is the score the choice ranks sets by, lower is better: a set's decode-step time
// over the fastest set's plus its train micro-step time over the fastest set's, so that both
// phases count alike whatever their absolute size. 2 is the best possible (fastest at both).
func KernelScore(t KernelTiming, all []KernelTiming) float64 {
	bd, bt := t.DecodeMs, t.TrainMs
	for _, o := range all {
		bd, bt = min(bd, o.DecodeMs), min(bt, o.TrainMs)
	}
	return t.DecodeMs/bd + t.TrainMs/bt
}

// Scores are the measured sets' scores (see KernelScore).
func (c KernelChoice) Scores() map[KernelSet]float64 {
	m := make(map[KernelSet]float64, len(c.Timings))
	for _, t := range c.Timings {
		m[t.Set] = KernelScore(t, c.Timings)
	}
	return m
}

// rankKernels sorts timings best first (ties: the backend's order of preference, kept by a stable sort).
func rankKernels(ts []KernelTiming) []KernelTiming {
	r := slices.Clone(ts)
	sort.SliceStable(r, func(i, j int) bool { return KernelScore(r[i], ts) < KernelScore(r[j], ts) })
	return r
}

// pickKernels chooses the best-scoring set and says why, naming every set's figures.
func pickKernels(ts []KernelTiming) KernelChoice {
	r := rankKernels(ts)
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%s %.1f/%.0f", t.Set, t.DecodeMs, t.TrainMs))
	}
	how := "measured fastest on this CPU"
	if len(ts) == 1 {
		how = "the only set measured on this CPU"
	}
	return KernelChoice{Set: r[0].Set, Timings: ts,
		Reason: fmt.Sprintf("%s kernels, %s (decode step / train micro-step in ms: %s)", r[0].Set, how, strings.Join(parts, ", "))}
}

func readKernelCache(path string) map[string]KernelChoice {
	m := map[string]KernelChoice{}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &m) // an unreadable cache is measured again and rewritten
	}
	return m
}

// writeKernelCache replaces the cache file whole (a temporary file renamed into place), so that
// concurrent runs never read half of one.
func writeKernelCache(path string, m map[string]KernelChoice) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return replaceFile(path, data)
}

// replaceFile writes data to path through a temporary file in the same folder renamed into
// place, so that a reader (another run) sees the old file whole or the new one, never part of
// one. The temporary file is removed when anything fails.
func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// CPUModel names the CPU ("Intel(R) Xeon(R) Processor", "AMD EPYC 9R14 96-Core Processor") with
// the vector extensions that matter here, from /proc/cpuinfo; "unknown CPU" elsewhere.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	name, ext := "unknown CPU", ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			name = strings.TrimSpace(v)
		case "flags":
			flags := strings.Fields(v)
			switch {
			case slices.Contains(flags, "avx512f"):
				ext = "AVX-512"
			case slices.Contains(flags, "avx2"):
				ext = "AVX2"
			default:
				ext = "no AVX2"
			}
		}
		if ext != "" && name != "unknown CPU" {
			break
		}
	}
	if ext == "" {
		return name
	}
	return name + " (" + ext + ")"
}

// ComputeVersion is the gomlx/compute module version this binary was built with (for agentrl's
// patched copy, the release and a hash of the patch series: third_party/patches.Version).
func ComputeVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/gomlx/compute" {
				if d.Replace != nil {
					// agentrl's patched copy under third_party/compute: named by its patch
					// series (a directory replace has no version of its own).
					return patches.Version()
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// ErrNoReexec is returned by a restart that this process cannot do (a test binary, say).
var ErrNoReexec = errors.New("this process cannot restart itself with other kernels")
