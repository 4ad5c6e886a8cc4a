package doctor

import (
	"encoding/json"
	"math"
	"strings"
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

// TestCompareOp: errors relative to each element's scale, the worst element named, and a NaN or
// infinite output reported in words (the report's JSON could not hold it as a number).
func TestCompareOp(t *testing.T) {
	tests := []struct {
		got        []float32
		val, scale []float64
		ulps       float64
		worst, err string
	}{
		{[]float32{1, 2}, []float64{1, 2}, []float64{1, 2}, 0, "", ""},
		{[]float32{1, 2.5}, []float64{1, 2}, []float64{1, 8}, 0.0625 / 0x1p-23, "element 1: 2.5, float64 2", ""},
		{[]float32{1, float32(math.NaN())}, []float64{1, 2}, []float64{1, 2}, 0, "", "element 1: NaN where float64 gives 2"},
		{[]float32{float32(math.Inf(1))}, []float64{3}, []float64{3}, 0, "", "element 0: +Inf"},
	}
	for _, tt := range tests {
		var row OpRow
		compareOp(&row, tt.got, tt.val, tt.scale)
		if row.Ulps != tt.ulps || !strings.HasPrefix(row.Worst, tt.worst) || !strings.HasPrefix(row.Error, tt.err) || (tt.err == "") != (row.Error == "") {
			t.Errorf("compareOp(%v, %v, %v) = %+v; want %.4g ulps, worst %q, error %q", tt.got, tt.val, tt.scale, row, tt.ulps, tt.worst, tt.err)
		}
		if _, err := json.Marshal(row); err != nil {
			t.Errorf("row %+v does not encode: %v", row, err)
		}
	}
}
