package ledger

import (
	"fmt"
	"strings"
)

// Host memory and disk: what a run needs outside the device. The device ledger above sizes the
// GPU; a run also holds, in host memory, what its plan moves off the device during rollout (the
// offloaded master weights and AdamW moments, the reference copy), and, while it writes a
// checkpoint (after the step's sync, with the offloaded parts on the host), what the checkpoint
// streams through host memory (engine/checkpoint.go → store.SaveCheckpointFrom): one tensor at a
// time, made when the store asks for it (its float32 copy and its safetensors bytes, at most the
// largest tensor's twice over), and the chunks waiting for their bbolt transaction (at most 64 MiB
// and one 4 MiB chunk, copied out of their tensor). On a GPU, GoMLX also keeps a host copy of
// each device tensor the save reads (tensors.Tensor materialises its local copy and holds it
// until the tensor is freed): the master weights and, when saved, the moments that are on the
// device. On the go backend the device is the host, so its whole ledger (less the CUDA runtime
// reserve) is host memory too.
//
// The store keeps checkpoint.keep_best + keep_last checkpoints (every one when keep_last is 0),
// plus the one being written before retention drops the oldest (the final save is never
// retained); bbolt reuses freed pages but never shrinks its file, so the file reaches that many
// checkpoints. Chunks shared between checkpoints are stored once: the figure counts LoRA's frozen
// base once and assumes nothing else is shared (trained weights and moments change every step).

// Host components, the keys of HostPlan.Components (beside MasterWeights, OptimizerMoments and
// ReferenceWeights, which wait there during rollout).
const (
	DeviceLedger     = "device_ledger"      // the go backend: the device's whole peak, in host memory
	CheckpointCopy   = "checkpoint"         // the tensor being written: its float32 copy and its bytes
	StorePending     = "store_pending"      // chunks waiting for their store transaction
	DeviceReadCopies = "device_read_copies" // GoMLX's host copies of the device tensors a save reads
	HostProcess      = "process"            // the Go runtime, tokenizer, trajectories, sandbox workers
)

// HostReserve is the process's own host memory beside the model: the Go runtime, the tokenizer,
// a step's trajectories and the sandbox. A make run on the built-in model resides in about
// 0.5 GiB, the model's part included.
const HostReserve int64 = 1 << 30

// GoKeptBuffers is the most bytes of freed large buffers the go backend keeps for reuse
// (gobackend.DefaultLargePoolBytes, third_party/compute patch 25): live to the collector, so host
// memory counts them in the go backend's device ledger in place of the CUDA runtime's reserve.
const GoKeptBuffers int64 = 1 << 30

// StorePendingBytes is the most chunk bytes waiting for a bbolt transaction: store.txBytes
// (64 MiB) and one store.ChunkSize chunk (4 MiB).
const StorePendingBytes int64 = 68 << 20

// CheckpointFileBytes is what a checkpoint keeps beside the tensors: config.json, tokenizer.json
// (11 MiB for Qwen3's), tokenizer_config.json, generation_config.json.
const CheckpointFileBytes int64 = 16 << 20

// HostPlan is what the run needs outside the device.
type HostPlan struct {
	// Components is host memory while a checkpoint is written (the step's host peak), by
	// component.
	Components map[string]int64
	// Step is their sum.
	Step int64
	// Load is host memory while the models load: the policy and the reference read as float32
	// (LoRA: one base, read as float32 and kept in the compute dtype), before they go to the device.
	Load int64
	// RAM is the larger of Step and Load: the host memory the run needs.
	RAM int64
	// CheckpointBytes is one checkpoint as the store writes it (before deduplication).
	CheckpointBytes int64
	// Checkpoints is the most checkpoints the store file holds at once.
	Checkpoints int
	// Disk is Checkpoints × CheckpointBytes (LoRA: the frozen base's share once, its chunks being
	// the same in every checkpoint): what the run's checkpoints make the store file reach.
	Disk int64
}

// hostOrder is the order the table lists host components in.
func hostOrder() []string {
	return []string{DeviceLedger, MasterWeights, OptimizerMoments, ReferenceWeights, PRMWeights, CheckpointCopy, StorePending, DeviceReadCopies, HostProcess}
}

// CheckpointsKept is the most checkpoints a store holds at once for checkpoint.every, keep_best
// and keep_last over maxSteps steps (see the package comment on host memory and disk).
func CheckpointsKept(every, keepBest, keepLast, maxSteps int) int {
	if keepLast > 0 {
		return keepBest + keepLast + 1
	}
	n := 1 // the final save
	if every > 0 {
		n += maxSteps / every
	}
	return n
}

// checkpointBytes is one checkpoint: every policy tensor as float32 (LoRA: the base and the
// adapters), the moments when saved, ppo's value head (its weights, and its moments when saved),
// and the model's files.
func (z sizer) checkpointBytes() int64 {
	weights := z.params * 4
	if z.st.LoRARank > 0 {
		weights += (z.trainable - z.head()) * 4
	}
	n := weights + z.head()*4 + CheckpointFileBytes
	if z.st.SaveOptimizer {
		n += z.moments()
	}
	return n
}

// largestTensor is the most values in one stored tensor.
func (z sizer) largestTensor() int64 {
	var most int64
	for _, n := range z.sh.tensorSizes() {
		most = max(most, n)
	}
	return most
}

// hostBeside is what host memory holds beside the device phases on the go backend, whose device is
// that memory (0 elsewhere, and for an evaluation-only run, which holds one model): the reference
// copy and a folder PRM's weights, which wait there outside their phases, what writing a
// checkpoint streams through it (see host), and the process itself (HostReserve). The device
// phases' runtime reserve stands for the buffers the backend keeps for reuse (GoKeptBuffers).
func (z sizer) hostBeside() int64 {
	if !z.st.DeviceIsHost || z.st.EvalOnly {
		return 0
	}
	return z.reference() + z.prmOwnWeights() + z.checkpointCopy() + min(StorePendingBytes, z.checkpointBytes()) + HostReserve
}

// checkpointCopy is the tensor a checkpoint streams through host memory: the largest one's
// float32 copy and its bytes.
func (z sizer) checkpointCopy() int64 { return z.largestTensor() * 4 * 2 }

// host is the host plan of p (computed by Compute).
func (z sizer) host(p *Plan) HostPlan {
	h := HostPlan{Components: map[string]int64{}}
	if z.st.DeviceIsHost {
		// The go backend has no CUDA runtime; its runtime reserve stands for the freed buffers
		// of 16 MiB and more it keeps for reuse, at most GoKeptBuffers (third_party/compute
		// patch 25), which the collector counts as live (HostProcess covers the process).
		h.Components[DeviceLedger] = max(p.Total-RuntimeReserve+GoKeptBuffers, 0)
	}
	for n, b := range p.Rollout.Host {
		h.Components[n] = b
	}
	// An evaluation writes no checkpoint (its step is the process and the go backend's device
	// ledger, its disk nothing); it loads the model as a run does.
	if !z.st.EvalOnly {
		h.CheckpointBytes = z.checkpointBytes()
		h.Components[CheckpointCopy] = z.checkpointCopy()
		h.Components[StorePending] = min(StorePendingBytes, h.CheckpointBytes)
	}
	if !z.st.DeviceIsHost && !z.st.EvalOnly {
		var read int64
		if !p.MasterOnHost {
			read += z.master()
		}
		read += z.base()
		if z.st.SaveOptimizer && !p.MomentsOnHost {
			read += z.moments()
		}
		h.Components[DeviceReadCopies] = read
	}
	h.Components[HostProcess] = HostReserve
	for _, b := range h.Components {
		h.Step += b
	}
	switch {
	case z.st.EvalOnly: // one model, read as float32 (a LoRA checkpoint merged); no reference, no PRM
		h.Load = z.params * 4
	case z.st.LoRARank > 0:
		h.Load = z.params*4 + z.params*z.b
	default:
		h.Load = 2 * z.params * 4
	}
	if own := z.prmOwnWeights(); own > 0 && !z.st.EvalOnly { // a folder PRM is read as float32 too, as the policy and reference are counted
		h.Load += own / z.b * 4
	}
	if z.st.DeviceIsHost {
		h.Load = max(h.Load, p.Total-RuntimeReserve+GoKeptBuffers) // the go backend's ledger counts the loaded weights
	}
	h.Load += HostReserve
	h.RAM = max(h.Step, h.Load)
	if z.st.EvalOnly {
		return h
	}
	h.Checkpoints = max(1, z.st.CheckpointsKept)
	// LoRA's frozen base is the same bytes in every checkpoint: its chunks are stored once
	shared := int64(0)
	if z.st.LoRARank > 0 {
		shared = z.params * 4
	}
	h.Disk = shared + int64(h.Checkpoints)*(h.CheckpointBytes-shared)
	return h
}

// HostTable renders the host plan: host memory by component at the step's peak, at load, and the
// disk the store needs.
func (p *Plan) HostTable() string {
	var b strings.Builder
	h := p.Host
	if p.Settings.EvalOnly {
		fmt.Fprintf(&b, "host memory: %s at most (evaluating %s, loading the model %s)\n", gib(h.RAM), gib(h.Step), gib(h.Load))
	} else {
		fmt.Fprintf(&b, "host memory: %s at most (writing a checkpoint %s, loading the models %s)\n", gib(h.RAM), gib(h.Step), gib(h.Load))
	}
	for _, n := range hostOrder() {
		v, ok := h.Components[n]
		if !ok || v == 0 {
			continue
		}
		note := ""
		switch n {
		case DeviceLedger:
			note = "the go backend's device memory is the host's (its runtime reserve: the freed buffers it keeps for reuse)"
		case MasterWeights, OptimizerMoments:
			note = "offloaded during rollout"
		case ReferenceWeights:
			note = "the reference copy, off the device but for its forward"
		case PRMWeights:
			note = "the PRM's own weights, off the device but for its phase"
		case CheckpointCopy:
			note = "a checkpoint streams one tensor at a time: the largest's float32 copy and bytes"
		case StorePending:
			note = "chunks waiting for their store transaction (64 MiB and one chunk)"
		case DeviceReadCopies:
			note = "host copies GoMLX keeps of the device tensors the save reads"
		case HostProcess:
			note = "Go runtime, tokenizer, trajectories, sandbox"
		}
		fmt.Fprintf(&b, "  %-21s %12s  %s\n", n, gib(v), note)
	}
	st := p.Settings
	if st.EvalOnly {
		b.WriteString("disk: no checkpoints (an evaluation stores its trajectories and pass@k)\n")
		return b.String()
	}
	kept := fmt.Sprintf("checkpoint.keep_best %d + keep_last %d + the one being written", st.KeepBest, st.KeepLast)
	if st.KeepLast == 0 {
		kept = "keep_last 0 keeps every checkpoint: one per checkpoint.every steps and the final one"
	}
	what := "float32 weights"
	if st.SaveOptimizer {
		what += " and AdamW moments"
	}
	if st.LoRARank > 0 {
		what += "; the frozen base stored once"
	}
	fmt.Fprintf(&b, "disk: %s for the store (%d checkpoints of %s: %s; %s; one more if a best is marked by hand; bbolt never shrinks its file)\n",
		gib(h.Disk), h.Checkpoints, gib(h.CheckpointBytes), what, kept)
	return b.String()
}
