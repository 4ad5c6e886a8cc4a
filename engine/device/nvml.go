package device

import (
	"fmt"
	"os"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Reading is one NVML sample of GPU 0.
type Reading struct {
	Name       string
	UsedBytes  uint64
	TotalBytes uint64
	UtilPct    uint32 // GPU utilisation over the last sample period
}

// Monitor reads GPU memory and utilisation through NVML. A machine without an NVIDIA driver gives
// a Monitor whose Read reports ok=false; nothing panics.
type Monitor struct {
	mu     sync.Mutex
	dev    nvml.Device
	ok     bool
	reason string
}

// NewMonitor initialises NVML (it is dlopen-ed at run time, so the binary runs without a driver).
func NewMonitor() *Monitor {
	m := &Monitor{}
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		m.reason = "NVML unavailable: " + nvml.ErrorString(ret)
		return m
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS || n == 0 {
		m.reason = "NVML sees no GPU"
		_ = nvml.Shutdown()
		return m
	}
	dev, ret := nvml.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		m.reason = "NVML: " + nvml.ErrorString(ret)
		_ = nvml.Shutdown()
		return m
	}
	m.dev, m.ok = dev, true
	return m
}

// Available says whether readings come from a real GPU, and if not, why.
func (m *Monitor) Available() (bool, string) { return m.ok, m.reason }

// Read samples GPU 0.
func (m *Monitor) Read() (Reading, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ok {
		return Reading{}, false
	}
	var r Reading
	r.Name, _ = m.dev.GetName()
	if mem, ret := m.dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		r.UsedBytes, r.TotalBytes = mem.Used, mem.Total
	}
	if u, ret := m.dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		r.UtilPct = u.Gpu
	}
	return r, true
}

// PeakBandwidth is the theoretical memory bandwidth of GPU 0 in bytes/s: the maximum memory
// clock × bus width × 2 (double data rate).
func (m *Monitor) PeakBandwidth() (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ok {
		return 0, false
	}
	clock, ret := m.dev.GetMaxClockInfo(nvml.CLOCK_MEM)
	if ret != nvml.SUCCESS {
		return 0, false
	}
	width, ret := m.dev.GetMemoryBusWidth()
	if ret != nvml.SUCCESS {
		return 0, false
	}
	return float64(clock) * 1e6 * float64(width) / 8 * 2, true
}

// Close shuts NVML down.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ok {
		_ = nvml.Shutdown()
		m.ok = false
	}
}

// probeGPU reports whether an NVIDIA GPU is usable, trying NVML first and the device node second.
func probeGPU() (bool, string) {
	m := NewMonitor()
	defer m.Close()
	if ok, reason := m.Available(); ok {
		r, _ := m.Read()
		return true, fmt.Sprintf("NVML sees %s", r.Name)
	} else if _, err := os.Stat("/dev/nvidia0"); err == nil {
		return false, "/dev/nvidia0 exists but " + reason
	} else {
		return false, reason
	}
}
