package train

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestGRPO(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rewards   []float64
		groups    []int
		divideStd bool
		want      []float64
	}{
		// group 0: mean 0.5, population std 0.5 → ±1; group 1: mean 2, std √(2/3).
		{"std", []float64{1, 0, 1, 2, 3}, []int{0, 0, 1, 1, 1}, true, []float64{1, -1, -1 / math.Sqrt(2.0/3), 0, 1 / math.Sqrt(2.0/3)}},
		{"no std", []float64{1, 0, 1, 2, 3}, []int{0, 0, 1, 1, 1}, false, []float64{0.5, -0.5, -1, 0, 1}},
		{"equal rewards are zero", []float64{0.7, 0.7, 0.7}, []int{4, 4, 4}, true, []float64{0, 0, 0}},
	} {
		got, err := GRPO(tc.rewards, tc.groups, tc.divideStd, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !near(got[i], tc.want[i]) {
				t.Errorf("%s: got %v; want %v", tc.name, got, tc.want)
				break
			}
		}
	}
	if _, err := GRPO([]float64{1}, nil, true, 0); err == nil {
		t.Error("length mismatch accepted")
	}
}

func TestRLOO(t *testing.T) {
	got, _ := RLOO([]float64{1, 0, 0, 5}, []int{0, 0, 0, 1})
	want := []float64{1, -0.5, -0.5, 0} // 1 − (0+0)/2, 0 − (1+0)/2; a lone sample gets 0
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("got %v; want %v", got, want)
		}
	}
}

func TestGAE(t *testing.T) {
	// γ = 0.9, λ = 0.8, rewards only at the end; hand-computed backwards.
	r := []float64{0, 0, 1}
	v := []float64{0.5, 0.6, 0.7}
	adv, ret, err := GAE(r, v, 0.9, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	d2 := 1 + 0 - 0.7       // 0.3
	d1 := 0 + 0.9*0.7 - 0.6 // 0.03
	d0 := 0 + 0.9*0.6 - 0.5 // 0.04
	a2 := d2                // 0.3
	a1 := d1 + 0.72*a2      // 0.246
	a0 := d0 + 0.72*a1      // 0.21712
	want := []float64{a0, a1, a2}
	for i := range want {
		if !near(adv[i], want[i]) || !near(ret[i], want[i]+v[i]) {
			t.Fatalf("adv %v ret %v; want adv %v", adv, ret, want)
		}
	}
	// λ = 1, γ = 1: advantage = return-to-go − value.
	adv, _, _ = GAE([]float64{1, 2, 3}, []float64{0, 0, 0}, 1, 1)
	if !near(adv[0], 6) || !near(adv[1], 5) || !near(adv[2], 3) {
		t.Errorf("Monte Carlo case: %v", adv)
	}
}

func TestOPDAndHybrid(t *testing.T) {
	lp := []float32{-1, -2, -0.5, -3}
	mask := []bool{false, true, true, true}
	same, err := OPD(lp, lp, mask)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range same {
		if v != 0 {
			t.Fatalf("teacher = student must give exactly 0, got %v", same)
		}
	}
	teacher := []float32{0, -1, -1, -2}
	opd, _ := OPD(teacher, lp, mask)
	want := []float64{0, 1, -0.5, 1}
	for i := range want {
		if !near(opd[i], want[i]) {
			t.Fatalf("opd %v; want %v", opd, want)
		}
	}
	h := Hybrid(0.5, opd, mask, 0.2)
	wantH := []float64{0, 0.7, 0.4, 0.7}
	for i := range wantH {
		if !near(h[i], wantH[i]) {
			t.Fatalf("hybrid %v; want %v", h, wantH)
		}
	}
	if h := Hybrid(-1, nil, mask, 0.2); h[0] != 0 || h[1] != -1 || h[3] != -1 {
		t.Errorf("no hint: %v", h)
	}
	if _, err := OPD(teacher, lp[:2], mask); err == nil {
		t.Error("length mismatch accepted")
	}
}

func TestKLPenalty(t *testing.T) {
	k1, _ := KLPenalty(-1, -1.5, "k1")
	k3, _ := KLPenalty(-1, -1.5, "k3")
	if !near(k1, 0.5) || !near(k3, math.Exp(-0.5)+0.5-1) {
		t.Errorf("k1 %v k3 %v", k1, k3)
	}
	if z, _ := KLPenalty(-2, -2, "k3"); z != 0 {
		t.Errorf("k3 of equal log-probs = %v; want 0", z)
	}
	if _, err := KLPenalty(0, 0, "k2"); err == nil {
		t.Error("k2 accepted")
	}
}
