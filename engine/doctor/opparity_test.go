package doctor

import (
	"testing"

	"agentrl/engine/device"
)

// TestOpParity: on the Go backend every float32 operation of the forward pass is within a few
// float32 steps of float64 (measured: 0.5 to 6 ulps, 2-core AMD EPYC, avx2 kernels), so a wrong
// kernel or lowering shows as a row far above them; every case runs and names its worst element.
func TestOpParity(t *testing.T) {
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	rows := OpParity(b)
	if len(rows) != len(opCases()) {
		t.Fatalf("%d rows for %d cases", len(rows), len(opCases()))
	}
	for _, r := range rows {
		if r.Error != "" || r.Worst == "" || !(r.Ulps <= 16) {
			t.Errorf("%s %s: %.3g (%.1f ulps), worst %q, error %q; want within 16 ulps of float64", r.Op, r.Shape, r.MaxRel, r.Ulps, r.Worst, r.Error)
		}
	}
}
