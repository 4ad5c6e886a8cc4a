package engine

import (
	"context"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/device"
	"agentrl/engine/ledger"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
)

// BenchModel loads the model a benchmark runs: a HuggingFace folder, or (dir empty) a known shape
// with random weights (ledger.KnownShape names them).
func BenchModel(choice *device.Choice, dir, shape string, dt dtypes.DType) (*model.Model, error) {
	if dir != "" {
		return model.Load(choice.Backend, dir, model.Options{Compute: dt})
	}
	sh, err := ledger.KnownShape(shape)
	if err != nil {
		return nil, err
	}
	return model.New(choice.Backend, model.RandomParams(ConfigFromShape(sh), 1, 0.02), model.Options{Compute: dt})
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

// RolloutBench is what `bench rollout` measured: the engine's generation, the memory bandwidth it
// is set against, and (on a GPU, when a python with torch is given) PyTorch's generate on the
// same shape and lengths.
type RolloutBench struct {
	*rollout.BenchResult
	Bandwidth       float64              `json:"reference_bytes_per_s,omitempty"`
	BandwidthSource string               `json:"-"`
	Torch           *rollout.TorchResult `json:"torch,omitempty"`
	TorchErr        error                `json:"-"`
}

// BenchRollout generates bc's requests with m and measures them against the device's memory
// bandwidth (on the CPU: a memcpy measured in the same run) and, on a GPU with torchPython set,
// PyTorch's generate.
func BenchRollout(ctx context.Context, m *model.Model, kind string, bc rollout.BenchConfig, torchPython string) (*RolloutBench, error) {
	res, err := rollout.Bench(ctx, m, bc)
	if err != nil {
		return nil, err
	}
	out := &RolloutBench{BenchResult: res}
	if kind == device.Go {
		out.Bandwidth, out.BandwidthSource = rollout.HostBandwidth(), "host memcpy measured in this run"
		return out, nil
	}
	mon := device.NewMonitor()
	if b, ok := mon.PeakBandwidth(); ok {
		out.Bandwidth, out.BandwidthSource = b, "NVML memory clock × bus width"
	}
	mon.Close()
	if torchPython != "" {
		dt := "bfloat16"
		if m.Options().Compute == dtypes.Float32 {
			dt = "float32"
		}
		out.Torch, out.TorchErr = rollout.TorchReference(ctx, torchPython, m.Config, dt, bc)
	}
	return out, nil
}
