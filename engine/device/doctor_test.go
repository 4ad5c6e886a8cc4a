package device

import (
	"regexp"
	"testing"
)

// TestReadGPU checks ReadGPU against the Monitor on this machine: without a GPU it says why and
// nothing else; with one it names it, its memory, the driver's CUDA version and the compute
// capability.
func TestReadGPU(t *testing.T) {
	m := NewMonitor()
	seen, _ := m.Available()
	m.Close()
	g := ReadGPU()
	if g.Seen != seen {
		t.Fatalf("ReadGPU().Seen = %v; the Monitor says %v", g.Seen, seen)
	}
	version := regexp.MustCompile(`^\d+\.\d+$`)
	for _, c := range []struct {
		what string
		bad  bool
	}{
		{"a reason when no GPU is seen", !g.Seen && g.Reason == ""},
		{"nothing but the reason without a GPU", !g.Seen && (g.Name != "" || g.TotalBytes != 0 || g.Count != 0)},
		{"a name and memory with a GPU", g.Seen && (g.Name == "" || g.TotalBytes == 0 || g.FreeBytes > g.TotalBytes || g.Count < 1)},
		{"CUDA and compute capability as major.minor", g.Seen && (!version.MatchString(g.CUDA) || !version.MatchString(g.ComputeCapability))},
	} {
		if c.bad {
			t.Errorf("want %s; got %+v", c.what, g)
		}
	}
}
