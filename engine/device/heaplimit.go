package device

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// LimitHeap sets the Go runtime's soft memory limit for a process whose plan says it holds about
// planned bytes (on the Go backend the ledger's figure is host memory): planned plus an eighth,
// and never above nine tenths of the machine's memory. The collector lets the heap grow to twice
// what was live at its last cycle (GOGC=100), which at a real model's size is gigabytes of
// garbage: a Qwen3-0.6B training step whose buffers peak at 5.0 GiB above 6.7 GiB of weights and
// moments resided at 18.6 GiB, and without the host optimizer (engine/train) at 24.4 GiB, killed
// for memory on a 24 GiB machine. With the limit the collector runs as the heap nears it instead.
// GOMEMLIMIT, when set, wins. It returns the limit set (0 when none was) and a sentence saying so.
func LimitHeap(planned int64) (int64, string) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return 0, "heap limit: GOMEMLIMIT=" + v + " from the environment"
	}
	if planned <= 0 {
		return 0, ""
	}
	limit := planned + planned/8
	if total := MemTotal(); total > 0 {
		limit = min(limit, total/10*9)
	}
	debug.SetMemoryLimit(limit)
	return limit, fmt.Sprintf("heap limit: %.1f GiB (the plan's %.1f GiB and an eighth, at most nine tenths of the machine's memory; GOMEMLIMIT overrides)",
		float64(limit)/(1<<30), float64(planned)/(1<<30))
}

// MemTotal is the machine's memory (MemTotal of /proc/meminfo), or a cgroup's limit when lower;
// 0 where neither can be read.
func MemTotal() int64 {
	total := int64(kBLine("/proc/meminfo", "MemTotal:"))
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}

// HostBudget is the memory budget `plan` and a run give the Go backend when memory.vram is auto:
// four fifths of the machine's memory (MemTotal), the rest left to the system, the page cache and
// the collector's slack above the live bytes (a Qwen3-0.6B step planned at 19.98 GiB resided at
// 22.05). 0 where the memory cannot be read.
func HostBudget() int64 { return MemTotal() / 5 * 4 }
