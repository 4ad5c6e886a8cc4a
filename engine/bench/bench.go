// Package bench measures the engine for `agentrl-tui bench` and `make gpu-check`: generation
// (Rollout) against the device's memory bandwidth, one update (Train) against the backend's
// matmul peak, the OpenAI endpoint against the generator it serves (Serve), each set against
// PyTorch where a python with torch is found (Versus). It is a side job of the RL loop and imports
// none of it: the loop is package engine, the benchmarks build on engine/model, engine/rollout,
// engine/train and engine/serve directly.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/gobackend"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/compiles"
	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/residency"
	"agentrl/engine/rollout"
	"agentrl/engine/torchref"
	"agentrl/engine/train"
)

// Model loads the model a benchmark runs: a HuggingFace folder, or (dir empty) a known shape
// with random weights (ledger.KnownShape names them).
func Model(choice *device.Choice, dir, shape string, dt dtypes.DType) (*model.Model, error) {
	return ModelWith(choice, dir, shape, model.Options{Compute: dt})
}

// ModelWith is Model with every model option (attention, its block) given.
func ModelWith(choice *device.Choice, dir, shape string, opts model.Options) (*model.Model, error) {
	if dir != "" {
		return model.Load(choice.Backend, dir, opts)
	}
	sh, err := ledger.KnownShape(shape)
	if err != nil {
		return nil, err
	}
	return model.New(choice.Backend, model.RandomParamsParallel(ConfigFromShape(sh), 1, 0.02), opts)
}

// PeakMeter is train.BenchConfig.Peak for backend b of kind: on the Go backend the bytes its
// buffers hold at most (device.StartPeakHeld: counted where buffers change hands, the same under
// any load), else NVML's used memory of GPU 0, else the process's resident peak (device.StartPeak
// says why).
func PeakMeter(kind string, b compute.Backend) func() func() (int64, string) {
	return func() func() (int64, string) {
		if kind == device.Go {
			if p := device.StartPeakHeld(b); p != nil {
				return p.Stop
			}
		}
		var mon *device.Monitor
		if kind != device.Go {
			mon = device.NewMonitor()
		}
		p := device.StartPeak(kind == device.Go, mon)
		return func() (int64, string) {
			b, s := p.Stop()
			if mon != nil {
				mon.Close()
			}
			return b, s
		}
	}
}

// ShapeOf is the ledger's shape of a model config.
func ShapeOf(name string, c *model.Config) ledger.Shape {
	fam := "qwen3"
	if c.Family == model.Qwen2 {
		fam = "qwen2"
	}
	return ledger.Shape{Name: name, Family: fam, Layers: c.NumLayers, Hidden: c.HiddenSize, Intermediate: c.IntermediateSize,
		Heads: c.NumHeads, KVHeads: c.NumKVHeads, HeadDim: c.HeadDim, Vocab: c.VocabSize, Tied: c.TieWordEmbeddings}
}

// trainPlan is the ledger's plan of one micro-batch of c on m (the micro-batch train.Bench runs:
// all the sequences when c's is 0 or larger) on a backend of kind, with no budget.
func trainPlan(m *model.Model, kind string, c train.BenchConfig) (*ledger.Plan, error) {
	cb := 4
	if m.Options().Compute != dtypes.Float32 {
		cb = 2
	}
	micro := c.MicroBatch
	if micro <= 0 || micro > c.Sequences {
		micro = c.Sequences
	}
	return ledger.Compute(ShapeOf("bench", m.Config), ledger.Settings{ComputeBytes: cb, SeqLen: c.Length, KVSlots: 1,
		MicroBatch: micro, Offload: ledger.OffloadDevice, DeviceIsHost: kind == device.Go}, 0)
}

// ConfigFromShape turns a ledger shape into a model config (random-weight benchmarks).
func ConfigFromShape(s ledger.Shape) *model.Config {
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

// Versus is the PyTorch reference a benchmark is set against: what it measured, its tokens/s,
// the engine's tokens/s over it, or why it did not run (skipped: no python with torch, another
// device or dtype; failed: its error). A reference that is skipped or fails never fails the
// benchmark.
type Versus struct {
	Reference             *torchref.Result `json:"reference,omitempty"`
	ReferenceTokensPerSec float64          `json:"reference_tokens_per_s,omitempty"`
	Ratio                 float64          `json:"ratio,omitempty"` // engine tokens/s ÷ reference tokens/s
	ReferenceSkipped      string           `json:"reference_skipped,omitempty"`
	ReferenceError        string           `json:"reference_error,omitempty"`
}

// set records a reference run at tps tokens/s against the engine's own.
func (v *Versus) set(tps, engine float64) {
	v.ReferenceTokensPerSec = tps
	if tps > 0 {
		v.Ratio = engine / tps
	}
}

// Torch is the PyTorch reference to run: Python is a path, torchref.Auto or empty (skip it); BLAS
// is --torch-blas (torchref.BLASDir: auto, system, openblas, reference or a folder).
type Torch struct{ Python, BLAS string }

// cpuReference finds the python for the CPU reference and runs spec with it on the BLAS asked
// for; what it ran or why not ends up in v.
func (v *Versus) cpuReference(ctx context.Context, m *model.Model, torch Torch, spec torchref.Spec) {
	if dt := m.Options().Compute; dt != dtypes.Float32 {
		v.ReferenceSkipped = fmt.Sprintf("PyTorch reference skipped: it computes in float32 and this run in %s", strings.ToLower(dt.String()))
		return
	}
	python, skipped := torchref.Find(ctx, torch.Python)
	if python == "" {
		v.ReferenceSkipped = skipped
		return
	}
	dir, err := torchref.BLASDir(torch.BLAS)
	if err != nil {
		v.ReferenceError = err.Error()
		return
	}
	spec.BLASDir = dir
	// The reference runs beside this process, which still holds the model: give the machine back
	// what the engine's run freed (the backend's kept buffers, the heap the collector freed), or
	// the two together outgrow it (a 0.6B update: 14 GiB here and 12 GiB in PyTorch on 24 GiB).
	gobackend.TrimPools(m.Backend)
	debug.FreeOSMemory()
	r, err := torchref.Run(ctx, python, spec)
	if err != nil {
		v.ReferenceError = err.Error()
		return
	}
	v.Reference = r
}

// writeReference prints one line on the reference's run of what ("decode", "update"), its
// millis per unit, and the ratio; nothing when no reference ran.
func (v *Versus) writeReference(w io.Writer, what string, millis float64, unit string) {
	r := v.Reference
	if r == nil || v.ReferenceTokensPerSec == 0 {
		return
	}
	blas := r.BLAS
	if blas == "" {
		blas = "not seen"
	}
	fmt.Fprintf(w, "PyTorch %s eager %s on %s, %d threads (%s, BLAS %s): %.1f tokens/s, %.2f %s; this engine / PyTorch = %.2f\n",
		r.Torch, what, r.Device, r.Threads, r.Python, blas, v.ReferenceTokensPerSec, millis, unit, v.Ratio)
}

// RolloutResult is what `bench rollout` measured: the engine's generation, the memory bandwidth it
// is set against, and PyTorch's generation of the same requests on the same shape (Versus; on a
// GPU transformers' generate, whose own result is in Torch).
type RolloutResult struct {
	// Model is what was measured: a known shape's name (random weights) or a model folder.
	Model string `json:"model,omitempty"`
	*rollout.BenchResult
	Bandwidth       float64                  `json:"reference_bytes_per_s,omitempty"`
	BandwidthSource string                   `json:"-"`
	Torch           *torchref.GenerateResult `json:"torch,omitempty"` // the GPU reference (transformers)
	// Kernels is the CPU matrix-kernel set the process ran and why (see `agentrl-tui kernels`);
	// "" on a GPU.
	Kernels string `json:"kernels,omitempty"`
	// Compiles are the programs the generator compiled (one per step shape) and their seconds.
	Compiles compiles.Snapshot `json:"compiles"`
	// CompileCache is what the XLA backend's compilation cache did in the whole command (nil on
	// the Go backend): loaded, stored, and its failures with the last one's words.
	CompileCache *device.CompileCacheStats `json:"compile_cache,omitempty"`
	Versus
}

// Rollout generates bc's requests with m and measures them against the device's memory
// bandwidth (on the CPU: a memcpy measured in the same run) and against PyTorch when torch.Python
// (a path, torchref.Auto, or empty to skip) finds one with torch: on the CPU the eager reference
// (engine/torchref) with as many threads as the Go backend, on a GPU transformers' generate.
func Rollout(ctx context.Context, m *model.Model, kind string, bc rollout.BenchConfig, torch Torch) (*RolloutResult, error) {
	cc := compiles.NewCounter()
	bc.Gen.Compiles = cc
	// Generation reads the weights cast once to the compute dtype, as a training run's rollout
	// does (bfloat16 on a GPU); m's own float32 weights wait in host memory meanwhile.
	gm, done, err := residency.InferenceModel(m, true)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := rollout.Bench(ctx, gm, bc)
	if err != nil {
		return nil, err
	}
	out := &RolloutResult{BenchResult: res, Compiles: cc.Snapshot()}
	if kind == device.Go {
		out.Bandwidth, out.BandwidthSource = rollout.HostBandwidth(), "host memcpy measured in this run"
		slots := bc.Gen.Slots
		if slots <= 0 {
			slots = 8 // rollout.Config's default
		}
		spec := torchref.NewSpec(m.Config, runtime.GOMAXPROCS(0))
		spec.Decode = &torchref.Decode{Slots: slots, Sequences: bc.Sequences, PromptLen: bc.PromptLen, NewTokens: bc.NewTokens}
		if out.cpuReference(ctx, m, torch, spec); out.Reference != nil && out.Reference.Decode != nil {
			out.set(out.Reference.Decode.TokensPerSec, res.TokensPerSec)
		}
		return out, nil
	}
	mon := device.NewMonitor()
	if b, ok := mon.PeakBandwidth(); ok {
		out.Bandwidth, out.BandwidthSource = b, "NVML memory clock × bus width"
	}
	mon.Close()
	python, skipped := torchref.Find(ctx, torch.Python, "transformers")
	if python == "" {
		out.ReferenceSkipped = skipped
		return out, nil
	}
	dt := "bfloat16"
	if m.Options().Compute == dtypes.Float32 {
		dt = "float32"
	}
	t, err := torchref.Generate(ctx, python, m.Config, dt, bc)
	if err != nil {
		out.ReferenceError = err.Error()
		return out, nil
	}
	out.Torch = t
	out.set(t.TokensPerSec, res.TokensPerSec)
	return out, nil
}

// Write prints the result for a person: the engine's generation and memory traffic, then the
// reference's tokens/s and the ratio.
func (b *RolloutResult) Write(w io.Writer) {
	if b.Kernels != "" {
		fmt.Fprintf(w, "kernels: %s\n", b.Kernels)
	}
	b.BenchResult.Write(w, b.Bandwidth, b.BandwidthSource)
	fmt.Fprintf(w, "compiled %s\n", b.Compiles)
	writeCacheStats(w, b.CompileCache)
	if t := b.Torch; t != nil {
		fmt.Fprintf(w, "PyTorch %s generate on %s: %.1f tokens/s; this engine / PyTorch = %.2f\n",
			t.Torch, t.Device, t.TokensPerSec, b.Ratio)
	}
	if r := b.Reference; r != nil && r.Decode != nil {
		b.writeReference(w, "decode", r.Decode.StepMillis, "ms per model call")
	}
}

// TrainResult is what `bench train` measured: one update of the engine, its arithmetic rate against
// the peak (see MatmulPeak), and on the CPU the PyTorch eager reference's update of the same batch.
type TrainResult struct {
	// Model is what was measured: a known shape's name (random weights) or a model folder.
	Model string `json:"model,omitempty"`
	*train.BenchResult
	Backend    string  `json:"backend"`
	Threads    int     `json:"threads,omitempty"` // the Go backend's (GOMAXPROCS), and the reference's
	PeakFLOPs  float64 `json:"peak_flops"`
	PeakSource string  `json:"peak_source"`
	PeakShare  float64 `json:"peak_share"` // flops_per_s ÷ peak_flops
	// Kernels is the CPU matrix-kernel set the process ran and why; "" on a GPU.
	Kernels string `json:"kernels,omitempty"`
	// Compiles are the programs the trainer compiled (one per graph and micro-batch shape) and
	// their seconds, out of the first update's compile_s.
	Compiles compiles.Snapshot `json:"compiles"`
	// CompileCache is what the XLA backend's compilation cache did in the whole command (nil on
	// the Go backend).
	CompileCache *device.CompileCacheStats `json:"compile_cache,omitempty"`
	// LedgerStepBytes is, with a peak measured, what the ledger's train phase counts for one
	// micro-batch beside the weights and moments (gradients, gradient workspace, activations),
	// and ProcessPeakBytes the process's resident peak over the whole command (VmHWM).
	LedgerStepBytes  int64 `json:"ledger_step_bytes,omitempty"`
	ProcessPeakBytes int64 `json:"process_peak_bytes,omitempty"`
	// HeapLimit says the Go runtime's memory limit the command set (device.LimitHeap), if any.
	HeapLimit string `json:"heap_limit,omitempty"`
	Versus
}

// Train runs train.Bench on m, measures the backend's peak with MatmulPeak and, on the Go
// backend when torch.Python finds a python with torch, times the PyTorch eager reference on the
// same shape, batch, micro-batches and trained tokens with as many threads as the Go backend.
func Train(ctx context.Context, m *model.Model, kind string, c train.BenchConfig, torch Torch) (*TrainResult, error) {
	plan, err := trainPlan(m, kind, c)
	if err != nil {
		return nil, err
	}
	var heap string
	if kind == device.Go && m.Params.Bytes()/4 >= device.SequentialOpsFrom {
		_, heap = device.LimitHeap(plan.Train.Bytes)
	}
	cc := compiles.NewCounter()
	c.Compiles = cc
	res, err := train.Bench(m, c)
	if err != nil {
		return nil, err
	}
	out := &TrainResult{BenchResult: res, Backend: kind, Compiles: cc.Snapshot(), HeapLimit: heap}
	if res.PeakBytesSource != "" { // what the peak is set against: the micro-batch's part of the train phase
		h := plan.Train.Holds
		out.LedgerStepBytes = h[ledger.Gradients] + h[ledger.GradientWorkspace] + h[ledger.Activations]
		out.ProcessPeakBytes = device.ProcessPeak()
	}
	sizes := []int{512, 1024}
	if kind != device.Go {
		sizes = []int{4096, 8192}
	}
	dt := m.Options().Compute
	if out.PeakFLOPs, err = MatmulPeak(m.Backend, dt, sizes, 5); err != nil {
		return nil, err
	}
	out.PeakSource = fmt.Sprintf("best %s n×n matmul of this backend (n = %s), measured in this run: the backend's own best, not the hardware's",
		strings.ToLower(dt.String()), joinInts(sizes))
	out.PeakShare = res.FLOPsPerSec / out.PeakFLOPs
	if kind != device.Go {
		out.ReferenceSkipped = "PyTorch reference skipped: the eager reference runs on the CPU, this run on " + kind
		return out, nil
	}
	out.Threads = runtime.GOMAXPROCS(0)
	rc := res.Config
	spec := torchref.NewSpec(m.Config, out.Threads)
	spec.Matmul = sizes
	spec.Train = &torchref.Train{Sequences: rc.Sequences, Length: rc.Length, Prompt: rc.Prompt, MicroBatch: rc.MicroBatch, Updates: rc.Updates}
	if out.cpuReference(ctx, m, torch, spec); out.Reference != nil && out.Reference.Train != nil {
		out.set(out.Reference.Train.TokensPerSec, res.TokensPerSec)
	}
	return out, nil
}

// Write prints the result for a person: the engine's update, its share of the peak, the reference.
func (b *TrainResult) Write(w io.Writer) {
	if b.Kernels != "" {
		fmt.Fprintf(w, "kernels: %s\n", b.Kernels)
	}
	if b.Threads > 0 {
		fmt.Fprintf(w, "backend %s, %d threads (GOMAXPROCS)\n", b.Backend, b.Threads)
	}
	if b.HeapLimit != "" {
		fmt.Fprintln(w, b.HeapLimit)
	}
	b.BenchResult.Write(w)
	if b.LedgerStepBytes > 0 {
		fmt.Fprintf(w, "ledger: %.2f GiB for this micro-batch (gradients, gradient workspace, activations): the peak is %+.0f%% of it; process resident peak %.2f GiB\n",
			gib(b.LedgerStepBytes), 100*(float64(b.PeakBytes)/float64(b.LedgerStepBytes)-1), gib(b.ProcessPeakBytes))
	}
	fmt.Fprintf(w, "compiled %s\n", b.Compiles)
	writeCacheStats(w, b.CompileCache)
	fmt.Fprintf(w, "arithmetic %.2f GFLOP/s = %.2f%% of %.1f GFLOP/s, the peak taken as the %s\n",
		b.FLOPsPerSec/1e9, 100*b.PeakShare, b.PeakFLOPs/1e9, b.PeakSource)
	if r := b.Reference; r != nil && r.Train != nil {
		b.writeReference(w, "update", r.Train.MicroStepMs, "ms per micro-step")
		fmt.Fprintf(w, "PyTorch: %.2f GFLOP/s by the same count; its own best float32 n×n matmul (n = %s) %.1f GFLOP/s\n",
			b.FLOPs/r.Train.UpdateSeconds/1e9, joinInts(r.Matmul), r.MatmulFLOPs/1e9)
	}
}

// MatmulPeak is the backend's best arithmetic rate in FLOP/s: for each n of sizes, up to reps
// timed runs (fewer once half a second is spent on that size; one untimed run first compiles) of
// an n×n by n×n product in dt, contracted as the model's linear layers are (x·Wᵀ), counted as
// 2n³ FLOPs; each run reads the product's maximum back, so that an asynchronous device is timed
// to the end. The inputs stay on the device.
func MatmulPeak(b compute.Backend, dt dtypes.DType, sizes []int, reps int) (float64, error) {
	e, err := NewExec(b, func(x, w *Node) *Node {
		y := DotGeneral(ConvertDType(x, dt), []int{1}, nil, ConvertDType(w, dt), []int{1}, nil)
		return ConvertDType(ReduceAllMax(y), dtypes.Float32)
	})
	if err != nil {
		return 0, err
	}
	defer e.Finalize()
	best := 0.0
	for _, n := range sizes {
		data := make([]float32, n*n)
		for i := range data {
			data[i] = float32(i%7) / 7
		}
		x, w := tensors.FromFlatDataAndDimensions(data, n, n), tensors.FromFlatDataAndDimensions(data, n, n)
		var spent float64
		for r := 0; r <= reps && (r < 2 || spent < 0.5); r++ {
			t := time.Now()
			out, err := e.Call(x, w)
			if err != nil {
				return 0, errors.Join(fmt.Errorf("matmul %d×%d: %w", n, n, err), x.FinalizeAll(), w.FinalizeAll())
			}
			tensors.ToScalar[float32](out[0])
			d := time.Since(t).Seconds()
			out[0].FinalizeAll()
			if r > 0 {
				spent += d
				best = max(best, 2*float64(n)*float64(n)*float64(n)/d)
			}
		}
		x.FinalizeAll()
		w.FinalizeAll()
	}
	return best, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }

// writeCacheStats prints what the compilation cache did, if there was one.
func writeCacheStats(w io.Writer, c *device.CompileCacheStats) {
	if c != nil {
		fmt.Fprintln(w, c)
	}
}
