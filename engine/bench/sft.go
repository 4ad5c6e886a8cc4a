package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"agentrl/engine/compiles"
	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/sft"
	"agentrl/engine/torchref"
)

// SFTResult is what `bench sft` measured: the SFT step of sft --data on the engine and, on the
// CPU, PyTorch eager's supervised step (cross-entropy, gradients accumulated, one AdamW update)
// on the same shape, sequences, micro-batches and trained tokens.
type SFTResult struct {
	*sft.BenchResult
	Backend  string            `json:"backend"`
	Threads  int               `json:"threads,omitempty"`
	Kernels  string            `json:"kernels,omitempty"`
	Compiles compiles.Snapshot `json:"compiles"`
	Versus
}

// SFT runs sft.Bench on m and, on the Go backend when torch finds a python with torch, the
// PyTorch eager reference with as many threads, on the BLAS torch names.
func SFT(ctx context.Context, m *model.Model, kind string, c sft.BenchConfig, torch Torch) (*SFTResult, error) {
	cc := compiles.NewCounter()
	c.Compiles = cc
	res, err := sft.Bench(m, c)
	if err != nil {
		return nil, err
	}
	out := &SFTResult{BenchResult: res, Backend: kind, Compiles: cc.Snapshot()}
	if kind != device.Go {
		out.ReferenceSkipped = "PyTorch reference skipped: the eager reference runs on the CPU, this run on " + kind
		return out, nil
	}
	if c.GradientCheckpointing || c.OptimizerBits == 8 {
		out.ReferenceSkipped = "PyTorch reference skipped: it has no gradient checkpointing or 8-bit moments to compare with"
		return out, nil
	}
	out.Threads = runtime.GOMAXPROCS(0)
	rc := res.Config
	spec := torchref.NewSpec(m.Config, out.Threads)
	spec.SFT = &torchref.Train{Sequences: rc.Sequences, Length: rc.Length, Prompt: rc.Prompt, MicroBatch: rc.MicroBatch, Updates: rc.Updates}
	if out.cpuReference(ctx, m, torch, spec); out.Reference != nil && out.Reference.SFT != nil {
		out.set(out.Reference.SFT.TokensPerSec, res.TokensPerSec)
	}
	return out, nil
}

// Write prints the result for a person: the engine's step, then the reference's.
func (b *SFTResult) Write(w io.Writer) {
	if b.Kernels != "" {
		fmt.Fprintf(w, "kernels: %s\n", b.Kernels)
	}
	if b.Threads > 0 {
		fmt.Fprintf(w, "backend %s, %d threads (GOMAXPROCS)\n", b.Backend, b.Threads)
	}
	b.BenchResult.Write(w)
	fmt.Fprintf(w, "compiled %s\n", b.Compiles)
	if r := b.Reference; r != nil && r.SFT != nil {
		b.writeReference(w, "SFT step", 1000*r.SFT.UpdateSeconds, "ms per step")
	}
}
