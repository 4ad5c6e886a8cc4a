package ledger

import (
	"strings"
	"testing"

	"github.com/gomlx/compute/gobackend"
)

func TestCheckpointsKept(t *testing.T) {
	for _, tc := range []struct {
		every, best, last, steps, want int
	}{
		{10, 1, 2, 30, 4},  // the retained three and the one being written
		{10, 0, 1, 100, 2}, // keep_last 1: the last and the next
		{10, 2, 0, 30, 4},  // keep_last 0: every save is kept, 3 periodic and the final
		{0, 0, 0, 30, 1},   // only the final save
		{7, 0, 0, 30, 5},   // 4 periodic saves (7, 14, 21, 28) and the final
		{5, 3, 2, 1000, 6},
	} {
		if got := CheckpointsKept(tc.every, tc.best, tc.last, tc.steps); got != tc.want {
			t.Errorf("CheckpointsKept(every %d, best %d, last %d, %d steps) = %d; want %d", tc.every, tc.best, tc.last, tc.steps, got, tc.want)
		}
	}
}

// TestHostPlan checks the host memory and disk of a plan against sums worked by hand from the
// shape: qwen3-0.6b (596,049,920 parameters; its largest tensor the 151,936 × 1,024 embedding).
func TestHostPlan(t *testing.T) {
	sh, err := KnownShape("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	params := sh.Params()
	embed := int64(sh.Vocab) * int64(sh.Hidden)
	base := Settings{ComputeBytes: 2, SeqLen: 1024, MaxKVSlots: 64, MaxMicroBatch: 16, Offload: OffloadDevice, MasterOffload: OffloadDevice,
		OptimizerBits: 32, SaveOptimizer: true, KeepBest: 1, KeepLast: 2, CheckpointsKept: 4, Reference: true}
	ckpt := params*4 + 2*params*4 + CheckpointFileBytes // float32 weights, m and v, files
	for _, tc := range []struct {
		name       string
		edit       func(*Settings)
		components map[string]int64
		ckpt       int64
		disk       int64
		load       int64
	}{
		{name: "GPU, everything on the device, moments saved", edit: func(*Settings) {},
			components: map[string]int64{ReferenceWeights: params * 2, CheckpointCopy: embed * 8, StorePending: StorePendingBytes,
				DeviceReadCopies: params*4 + 2*params*4, HostProcess: HostReserve},
			ckpt: ckpt, disk: 4 * ckpt, load: 2*params*4 + HostReserve},
		{name: "GPU, master and moments offloaded: on the host, not read from the device", edit: func(s *Settings) { s.Offload, s.MasterOffload = OffloadHost, OffloadHost },
			components: map[string]int64{MasterWeights: params * 4, OptimizerMoments: 2 * params * 4, ReferenceWeights: params * 2, CheckpointCopy: embed * 8,
				StorePending: StorePendingBytes, DeviceReadCopies: 0, HostProcess: HostReserve},
			ckpt: ckpt, disk: 4 * ckpt, load: 2*params*4 + HostReserve},
		{name: "no optimizer state saved, every checkpoint kept", edit: func(s *Settings) { s.SaveOptimizer, s.CheckpointsKept = false, 7 },
			components: map[string]int64{ReferenceWeights: params * 2, CheckpointCopy: embed * 8,
				StorePending: StorePendingBytes, DeviceReadCopies: params * 4, HostProcess: HostReserve},
			ckpt: params*4 + CheckpointFileBytes, disk: 7 * (params*4 + CheckpointFileBytes), load: 2*params*4 + HostReserve},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := base
			tc.edit(&st)
			p, err := Compute(sh, st, 0)
			if err != nil {
				t.Fatal(err)
			}
			h := p.Host
			var sum int64
			for n, want := range tc.components {
				if got := h.Components[n]; got != want {
					t.Errorf("%s: %d bytes; want %d", n, got, want)
				}
				sum += want
			}
			if len(h.Components) != countNonZero(tc.components) && len(h.Components) != len(tc.components) {
				t.Errorf("components %v; want exactly %v", h.Components, tc.components)
			}
			if h.Step != sum || h.CheckpointBytes != tc.ckpt || h.Disk != tc.disk || h.Load != tc.load || h.RAM != max(sum, tc.load) {
				t.Errorf("step %d, checkpoint %d, disk %d, load %d, ram %d; want %d, %d, %d, %d, %d", h.Step, h.CheckpointBytes, h.Disk, h.Load, h.RAM,
					sum, tc.ckpt, tc.disk, tc.load, max(sum, tc.load))
			}
		})
	}
	// LoRA: each checkpoint holds the frozen base as float32, but its chunks are stored once.
	lora := base
	lora.LoRARank, lora.LoRATargets = 8, ""
	lp, err := Compute(sh, lora, 0)
	if err != nil {
		t.Fatal(err)
	}
	if shared := params * 4; lp.Host.Disk != shared+4*(lp.Host.CheckpointBytes-shared) || lp.Host.CheckpointBytes <= shared {
		t.Errorf("LoRA: disk %d for checkpoints of %d; want the base's %d once and the rest 4 times", lp.Host.Disk, lp.Host.CheckpointBytes, shared)
	}
	// On the go backend the device is the host: its whole ledger is host memory, and nothing is
	// copied back from a device.
	st := base
	st.DeviceIsHost, st.ComputeBytes = true, 4
	p, err := Compute(sh, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Host.Components[DeviceLedger] != p.Total-RuntimeReserve+GoKeptBuffers || p.Host.Components[DeviceReadCopies] != 0 || p.Host.RAM < p.Total {
		t.Errorf("go backend: %+v; want the device ledger %d (the runtime reserve the backend's kept buffers) in host memory and no device read copies", p.Host.Components, p.Total)
	}
	if GoKeptBuffers != gobackend.DefaultLargePoolBytes {
		t.Errorf("the ledger counts %d bytes of the go backend's kept buffers; the backend keeps up to %d", GoKeptBuffers, gobackend.DefaultLargePoolBytes)
	}
	tab := p.Table()
	for _, want := range []string{"host memory: ", "device_ledger", "the go backend's device memory is the host's",
		"disk: ", "4 checkpoints of", "checkpoint.keep_best 1 + keep_last 2 + the one being written", "bbolt never shrinks its file"} {
		if !strings.Contains(tab, want) {
			t.Errorf("the plan table lacks %q:\n%s", want, tab)
		}
	}
}

func countNonZero(m map[string]int64) int {
	n := 0
	for _, v := range m {
		if v != 0 {
			n++
		}
	}
	return n
}

// TestGoBackendPlansOneRAM: on the go backend the device phases are sized so that the host plan,
// device ledger and what waits beside it together, fits the budget; on a GPU the same recipe
// fills the device budget alone.
func TestGoBackendPlansOneRAM(t *testing.T) {
	shape, err := KnownShape("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	st := Settings{ComputeBytes: 4, SeqLen: 256, MaxKVSlots: 16, MaxMicroBatch: 16, Offload: OffloadAuto, Reference: true,
		Attention: AttentionDense, CheckpointsKept: 1}
	budget := int64(24) << 30
	gpu, err := Compute(shape, st, budget)
	if err != nil {
		t.Fatal(err)
	}
	st.DeviceIsHost = true
	cpu, err := Compute(shape, st, budget)
	if err != nil {
		t.Fatal(err)
	}
	if !cpu.Fits || cpu.Host.RAM > budget {
		t.Errorf("go backend: host memory %s against a budget of %s (fits %v, %s)", gib(cpu.Host.RAM), gib(budget), cpu.Fits, cpu.Reason)
	}
	if cpu.HostBeside != shape.Params()*4+int64(shape.Vocab)*int64(shape.Hidden)*4*2+StorePendingBytes+HostReserve {
		t.Errorf("host beside the phases %d; want the reference copy, a checkpoint's largest tensor twice, the store's chunks and the process", cpu.HostBeside)
	}
	if cpu.MicroBatch >= gpu.MicroBatch || gpu.HostBeside != 0 {
		t.Errorf("micro-batch %d on the go backend, %d on a GPU (host beside %d); want fewer on the go backend", cpu.MicroBatch, gpu.MicroBatch, gpu.HostBeside)
	}
}
