package device

import (
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPUInfo is what NVML says about the machine's first GPU, for `agentrl-tui doctor`, or why it
// says nothing (Seen false, Reason set).
type GPUInfo struct {
	Seen   bool   `json:"seen"`
	Reason string `json:"reason,omitempty"`
	Count  int    `json:"count,omitempty"` // GPUs NVML lists; the engine uses the first
	Name   string `json:"name,omitempty"`
	Driver string `json:"driver,omitempty"`
	// CUDA is the newest CUDA version the driver supports ("13.0"): a plugin built for a newer
	// one does not load.
	CUDA              string `json:"cuda,omitempty"`
	TotalBytes        uint64 `json:"total_bytes,omitempty"`
	FreeBytes         uint64 `json:"free_bytes,omitempty"`
	ComputeCapability string `json:"compute_capability,omitempty"` // "9.0" on an H100
	// BandwidthBytesPerSec is the memory bandwidth NVML's clocks give (see Monitor.PeakBandwidth).
	BandwidthBytesPerSec float64 `json:"bandwidth_bytes_per_s,omitempty"`
}

// ReadGPU asks NVML about GPU 0: its name, the driver and the CUDA version the driver supports,
// memory total and free, compute capability. NVML is loaded at run time, so a machine without
// the driver gets Seen false and the reason, never a failure.
func ReadGPU() GPUInfo {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		reason := "NVML unavailable (" + nvml.ErrorString(ret) + "): no NVIDIA driver is installed or loaded"
		if _, err := os.Stat("/dev/nvidia0"); err == nil {
			reason = "/dev/nvidia0 exists but NVML did not start (" + nvml.ErrorString(ret) + "): the driver's user-space library (libnvidia-ml.so.1) is missing or does not match the kernel module"
		}
		return GPUInfo{Reason: reason}
	}
	defer func() { _ = nvml.Shutdown() }()
	var g GPUInfo
	if v, ret := nvml.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		g.Driver = v
	}
	if v, ret := nvml.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		g.CUDA = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS || n == 0 {
		g.Reason = "the NVIDIA driver " + g.Driver + " is loaded but NVML lists no GPU"
		return g
	}
	dev, ret := nvml.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		g.Reason = "NVML lists a GPU but cannot open it: " + nvml.ErrorString(ret)
		return g
	}
	g.Seen, g.Count = true, n
	g.Name, _ = dev.GetName()
	if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.TotalBytes, g.FreeBytes = mem.Total, mem.Free
	}
	if major, minor, ret := dev.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	if clock, ret := dev.GetMaxClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
		if width, ret := dev.GetMemoryBusWidth(); ret == nvml.SUCCESS {
			g.BandwidthBytesPerSec = float64(clock) * 1e6 * float64(width) / 8 * 2
		}
	}
	return g
}
