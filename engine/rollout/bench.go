package rollout

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"agentrl/engine/model"
)

// BenchConfig describes a generation benchmark: Sequences requests of PromptLen random tokens, each
// generating NewTokens tokens at temperature 1, through a generator of Slots slots.
type BenchConfig struct {
	Sequences, PromptLen, NewTokens int
	Gen                             Config
	Seed                            uint64
}

// BenchResult holds what a benchmark measured.
type BenchResult struct {
	Tokens       int64         `json:"tokens"`
	Wall         time.Duration `json:"wall_ns"`
	TokensPerSec float64       `json:"tokens_per_s"`
	Steps        int64         `json:"steps"`
	StepMillis   float64       `json:"step_ms"`
	Occupancy    float64       `json:"slot_occupancy"` // mean share of slots carrying a token per step
	// RolloutOccupancy is the share of slot-steps with a request in progress (PhaseStats.Occupancy;
	// a prefill step carries fewer lanes than the slots at work, so it can exceed Occupancy);
	// RolloutTail the time from 90 % of the requests done to the last; ToolStallShare the share
	// of the decode time the batch stood still for a tool; ToolQueueSeconds the time requests
	// waited for a tool worker; OccupancyTrace the occupancy over the run, TraceEvery steps a point.
	RolloutOccupancy float64   `json:"rollout_occupancy"`
	RolloutTail      float64   `json:"rollout_tail_s"`
	ToolStallShare   float64   `json:"tool_stall_share"`
	ToolQueueSeconds float64   `json:"tool_queue_s"`
	OccupancyTrace   []float64 `json:"occupancy_trace,omitempty"`
	TraceEvery       int       `json:"trace_every,omitempty"`
	// BytesPerSec is the memory traffic a step needs at least — the weights in the compute dtype
	// plus the KV cache rows attended — divided by the step time.
	BytesPerSec float64       `json:"bytes_per_s"`
	CompileTime time.Duration `json:"compile_ns"`
}

// Bench runs the benchmark on model m.
func Bench(ctx context.Context, m *model.Model, bc BenchConfig) (*BenchResult, error) {
	if bc.Gen.MaxLen == 0 {
		bc.Gen.MaxLen = model.Bucket(bc.PromptLen + bc.NewTokens + 1)
	}
	t0 := time.Now()
	g, err := New(m, bc.Gen)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	res := &BenchResult{CompileTime: time.Since(t0)}
	before := g.Stats()
	meter := g.Measure()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, bc.Sequences)
	for i := 0; i < bc.Sequences; i++ {
		prompt := BenchPrompt(bc, i, m.Config.VocabSize)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := g.Generate(ctx, Request{Append: prompt, MaxNew: bc.NewTokens, Sampling: Sampling{Temperature: 1, Seed: bc.Seed + uint64(i)}})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	res.Wall = time.Since(start)
	ps := meter.Stop()
	res.RolloutOccupancy, res.RolloutTail, res.ToolStallShare = ps.Occupancy(), ps.Tail().Seconds(), ps.StallShare()
	res.OccupancyTrace, res.TraceEvery = ps.Trace(32)
	st := g.Stats()
	res.Tokens = st.Tokens - before.Tokens
	res.Steps = st.Steps - before.Steps
	res.TokensPerSec = float64(res.Tokens) / res.Wall.Seconds()
	stepTime := st.StepTime - before.StepTime
	if res.Steps > 0 {
		res.StepMillis = stepTime.Seconds() * 1000 / float64(res.Steps)
		res.Occupancy = float64(st.SlotSteps-before.SlotSteps) / float64(res.Steps*int64(g.cfg.Slots))
	}
	// Lower bound on bytes moved per decode step: all weights once, plus each active slot's
	// attended cache rows (mean context ≈ prompt + half the new tokens).
	c := m.Config
	elem := int64(m.Options().Compute.Size())
	weights := c.NumParams() * elem
	meanCtx := int64(bc.PromptLen + bc.NewTokens/2)
	kvPerSlot := 2 * int64(c.NumLayers*c.NumKVHeads*c.HeadDim) * meanCtx * elem
	perStep := float64(weights) + res.Occupancy*float64(g.cfg.Slots)*float64(kvPerSlot)
	if res.StepMillis > 0 {
		res.BytesPerSec = perStep / (res.StepMillis / 1000)
	}
	return res, nil
}

// BenchPrompt is request i's prompt in a benchmark of bc: PromptLen token ids spread over a
// vocabulary of vocab, the same for any benchmark of the same requests.
func BenchPrompt(bc BenchConfig, i, vocab int) []int32 {
	prompt := make([]int32, bc.PromptLen)
	for j := range prompt {
		prompt[j] = int32((uint64(i*7919+j*104729) + bc.Seed) % uint64(vocab))
	}
	return prompt
}

// Write prints the result for people.
func (r *BenchResult) Write(w io.Writer, bandwidth float64, bandwidthSource string) {
	fmt.Fprintf(w, "generated %d tokens in %.2fs: %.1f tokens/s\n", r.Tokens, r.Wall.Seconds(), r.TokensPerSec)
	fmt.Fprintf(w, "steps %d, %.2f ms/step, slot occupancy %.0f%%, compile+warm-up %.1fs\n", r.Steps, r.StepMillis, 100*r.Occupancy, r.CompileTime.Seconds())
	fmt.Fprintf(w, "rollout occupancy %.0f%% (slots with a request in progress), tail %.2fs (90%% of the requests done to the last), tool stall %.1f%%, tool queue %.2fs\n",
		100*r.RolloutOccupancy, r.RolloutTail, 100*r.ToolStallShare, r.ToolQueueSeconds)
	if bandwidth > 0 {
		fmt.Fprintf(w, "memory traffic ≥ %.2f GB/s = %.1f%% of %.1f GB/s (%s)\n", r.BytesPerSec/1e9, 100*r.BytesPerSec/bandwidth, bandwidth/1e9, bandwidthSource)
	}
}

// HostBandwidth measures host memory copy bandwidth (bytes/s: read + write) with a 256 MiB copy,
// the reference a CPU run is compared with.
func HostBandwidth() float64 {
	const n = 256 << 20
	src := make([]byte, n)
	dst := make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	best := 0.0
	for i := 0; i < 3; i++ {
		t := time.Now()
		copy(dst, src)
		if bw := 2 * n / time.Since(t).Seconds(); bw > best {
			best = bw
		}
	}
	return best
}
