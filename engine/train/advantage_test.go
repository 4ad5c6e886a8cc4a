package train

import (
	"math"
	"math/bits"
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

func TestCenterClip(t *testing.T) {
	mask := []bool{false, true, true, true, true}
	tests := []struct {
		name string
		clip float64
		opd  []float64
		want []float64
	}{
		// masked mean of (−3, −1, −2, −6) is −3.
		{"centre only", 0, []float64{9, -3, -1, -2, -6}, []float64{0, 0, 2, 1, -3}},
		{"centre and clip", 1.5, []float64{9, -3, -1, -2, -6}, []float64{0, 0, 1.5, 1, -1.5}},
		{"a uniform shift vanishes", 1, []float64{0, -4, -4, -4, -4}, []float64{0, 0, 0, 0, 0}},
	}
	for _, tc := range tests {
		got := CenterClip(tc.opd, mask, tc.clip)
		for i := range tc.want {
			if !near(got[i], tc.want[i]) {
				t.Errorf("%s: got %v; want %v", tc.name, got, tc.want)
				break
			}
		}
	}
	if got := CenterClip([]float64{1, 2}, []bool{false, false}, 1); got[0] != 0 || got[1] != 0 {
		t.Errorf("no masked token: %v", got)
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

func TestAdvantageErrors(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"grpo NaN reward", func() error { _, err := GRPO([]float64{1, nan}, []int{0, 0}, true, 1e-6); return err }()},
		{"grpo negative eps", func() error { _, err := GRPO([]float64{1, 0}, []int{0, 0}, true, -1); return err }()},
		{"rloo Inf reward", func() error { _, err := RLOO([]float64{math.Inf(1)}, []int{0}); return err }()},
		{"rloo lengths", func() error { _, err := RLOO([]float64{1, 2}, []int{0}); return err }()},
		{"gae lengths", func() error { _, _, err := GAE([]float64{1}, nil, 1, 1); return err }()},
		{"kl penalty estimator", func() error {
			_, err := KLRewardPenalty([]float64{1}, []float32{0}, []float32{0}, []bool{true}, 1, "k9")
			return err
		}()},
		{"kl penalty lengths", func() error {
			_, err := KLRewardPenalty([]float64{1, 2}, []float32{0}, []float32{0}, []bool{true}, 1, "k1")
			return err
		}()},
		{"token rewards lengths", func() error { _, err := TokenRewards(1, []float32{0}, nil, []bool{true}, 1, "k1"); return err }()},
	} {
		if tc.err == nil {
			t.Errorf("%s: accepted; want an error", tc.name)
		}
	}
}

func TestKLRewardPenalty(t *testing.T) {
	adv := []float64{9, 1, 1, -1}
	logp := []float32{0, -1, -2, -0.5}
	ref := []float32{0, -1.5, -2, -1}
	mask := []bool{false, true, true, true}
	// k1 = logp − ref: 0.5, 0, 0.5; with coef 0.2 the advantages drop by 0.1, 0, 0.1.
	got, err := KLRewardPenalty(adv, logp, ref, mask, 0.2, "k1")
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 0.9, 1, -1.1}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("k1 penalty %v; want %v", got, want)
		}
	}
	if adv[1] != 1 {
		t.Errorf("the input advantages were modified: %v", adv)
	}
	// k3 with ref = logp everywhere is exactly 0: advantages pass through on masked tokens.
	same, _ := KLRewardPenalty(adv, logp, logp, mask, 5, "k3")
	if same[0] != 0 || same[1] != 1 || same[2] != 1 || same[3] != -1 {
		t.Errorf("k3 with ref = policy: %v", same)
	}
}

func TestTokenRewards(t *testing.T) {
	logp := []float32{0, -1, -2, -0.5, 0}
	ref := []float32{0, -1.5, -2, -1, 0}
	mask := []bool{false, true, true, true, false}
	got, err := TokenRewards(1, logp, ref, mask, 0.2, "k1")
	if err != nil {
		t.Fatal(err)
	}
	// −0.2·k1 per policy token, the outcome on the last policy token (index 3), not on padding.
	want := []float64{0, -0.1, 0, 1 - 0.1, 0}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Fatalf("token rewards %v; want %v", got, want)
		}
	}
	// Compacted to policy tokens with γ = λ = 1 and zero values, GAE gives the return to go.
	adv, _, _ := GAE([]float64{got[1], got[2], got[3]}, []float64{0, 0, 0}, 1, 1)
	if !near(adv[0], 0.8) || !near(adv[2], 0.9) {
		t.Errorf("GAE over token rewards: %v; want [0.8 0.9 0.9]", adv)
	}
	if f := Float32s([]float64{0.5, -2}); f[0] != 0.5 || f[1] != -2 {
		t.Errorf("Float32s: %v", f)
	}
}

// bestOfKBrute enumerates every k-subset of one group: the mean subset score (its highest
// reward), the subset scores' population std, and each sample's mean subset score over the
// subsets holding it.
func bestOfKBrute(r []float64, k int) (mean, std float64, per []float64) {
	n := len(r)
	var scores []float64
	sum, cnt := make([]float64, n), make([]float64, n)
	for mask := 0; mask < 1<<n; mask++ {
		if bits.OnesCount(uint(mask)) != k {
			continue
		}
		best := math.Inf(-1)
		for i := 0; i < n; i++ {
			if mask&(1<<i) != 0 {
				best = math.Max(best, r[i])
			}
		}
		scores = append(scores, best)
		for i := 0; i < n; i++ {
			if mask&(1<<i) != 0 {
				sum[i] += best
				cnt[i]++
			}
		}
	}
	for _, s := range scores {
		mean += s / float64(len(scores))
	}
	for _, s := range scores {
		std += (s - mean) * (s - mean) / float64(len(scores))
	}
	per = make([]float64, n)
	for i := range per {
		per[i] = sum[i] / cnt[i]
	}
	return mean, math.Sqrt(std), per
}

func TestBestOfK(t *testing.T) {
	// The paper's closed form, n = 8, k = 4, one correct: mean group score 1 − C(7,4)/C(8,4) = 1/2,
	// std 1/2; the correct sample (1 − 1/2)/(1/2) = 1, each wrong one (1/2 − C(6,3)/C(7,3))/(1/2) = −1/7.
	one := []float64{0, 0, 1, 0, 0, 0, 0, 0}
	g8 := make([]int, 8)
	got, err := BestOfK(one, g8, 4, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range got {
		want := -1.0 / 7
		if one[i] == 1 {
			want = 1
		}
		if math.Abs(a-want) > 1e-12 {
			t.Errorf("one correct of 8, k = 4: sample %d advantage %v; want %v", i, a, want)
		}
	}
	// k = 1 is GRPO.
	rs := []float64{0.2, 1.2, -0.1, 0.2, 1.2, 0, 0.7, 0.2, 5, 5, 5}
	gs := []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}
	a1, _ := BestOfK(rs, gs, 1, true, 1e-6)
	grpo, _ := GRPO(rs, gs, true, 1e-6)
	for i := range a1 {
		if math.Abs(a1[i]-grpo[i]) > 1e-12 {
			t.Errorf("k = 1, sample %d: %v; GRPO gives %v", i, a1[i], grpo[i])
		}
	}
	// Any k, real-valued rewards with ties, against enumeration of every subset.
	for k := 1; k <= 8; k++ {
		for _, divide := range []bool{false, true} {
			got, err := BestOfK(rs, gs, k, divide, 0)
			if err != nil {
				t.Fatal(err)
			}
			mean, std, per := bestOfKBrute(rs[:8], k)
			for i := 0; i < 8; i++ {
				want := per[i] - mean
				if divide {
					want /= std
				}
				if math.Abs(got[i]-want) > 1e-9 {
					t.Errorf("k = %d divide %v, sample %d: %v; enumeration gives %v", k, divide, i, got[i], want)
				}
			}
			for i := 8; i < 11; i++ {
				if got[i] != 0 {
					t.Errorf("k = %d: a group of equal rewards (or smaller than k) got advantage %v", k, got[i])
				}
			}
		}
	}
	for _, bad := range []struct {
		r   []float64
		g   []int
		k   int
		eps float64
	}{{one, g8[:7], 4, 0}, {one, g8, 0, 0}, {one, g8, 4, -1}, {[]float64{math.NaN(), 1}, []int{0, 0}, 1, 0}} {
		if _, err := BestOfK(bad.r, bad.g, bad.k, true, bad.eps); err == nil {
			t.Errorf("BestOfK(%v, %v, k=%d, eps=%v) accepted", bad.r, bad.g, bad.k, bad.eps)
		}
	}
}
