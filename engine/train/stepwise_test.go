package train

import (
	"math"
	"testing"
)

// The step_wise estimator against values worked out by hand (see StepWise's formula).
func TestStepWiseByHand(t *testing.T) {
	nan := math.NaN()
	// Group 0: A judged [correct, wrong], B [correct, correct, correct]: the five step rewards
	// 1,0,1,1,1 have mean 0.8 and std 0.4, so correct → +0.5 and wrong → −2.
	// A: P = [0.5 − 2, −2] = [−1.5, −2]; B: [1.5, 1, 0.5].
	// Group 1: C unjudged (nil), D one wrong step, E a step left out then a correct one: the
	// judged rewards 0 and 1 have mean 0.5, std 0.5: D [−1], E [1, 1] (the left-out step takes
	// the sum after it).
	// Group 2: one reward only: 0.
	steps := [][]float64{{1, 0}, {1, 1, 1}, nil, {0}, {nan, 1}, {1, 1}}
	groups := []int{0, 0, 1, 1, 1, 2}
	got, err := StepWise(steps, groups, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{-1.5, -2}, {1.5, 1, 0.5}, nil, {-1}, {1, 1}, {0, 0}}
	for i := range want {
		if len(got[i]) != len(want[i]) || (got[i] == nil) != (want[i] == nil) {
			t.Fatalf("trajectory %d: got %v; want %v", i, got[i], want[i])
		}
		for k := range want[i] {
			if math.Abs(got[i][k]-want[i][k]) > 1e-12 {
				t.Errorf("trajectory %d step %d: got %v; want %v", i, k+1, got[i][k], want[i][k])
			}
		}
	}
	// Without the std: A's rewards − 0.8: [0.2, −0.8] → P = [−0.6, −0.8].
	got, _ = StepWise(steps, groups, false, 0)
	if math.Abs(got[0][0]+0.6) > 1e-12 || math.Abs(got[0][1]+0.8) > 1e-12 {
		t.Errorf("no std: A got %v; want [-0.6 -0.8]", got[0])
	}
	// Tokens: prompt, step 1 (2 tokens), tool output, step 2 (3 tokens), a trailing unmasked
	// token. Â = 0.25, w = 0.5: step 1 0.25 + 0.5·(−1.5) = −0.5, step 2 0.25 + 0.5·(−2) = −0.75.
	mask := []bool{false, false, true, true, false, true, true, true, false}
	adv := Hybrid(0.25, nil, mask, 0)
	StepTokens(adv, []float64{-1.5, -2}, mask, 0.5)
	wantTok := []float64{0, 0, -0.5, -0.5, 0, -0.75, -0.75, -0.75, 0}
	for j := range wantTok {
		if math.Abs(adv[j]-wantTok[j]) > 1e-12 {
			t.Errorf("token %d: got %v; want %v", j, adv[j], wantTok[j])
		}
	}
	if Steps(mask) != 2 {
		t.Errorf("Steps = %d; want 2", Steps(mask))
	}
	if _, err := StepWise([][]float64{{math.Inf(1)}}, []int{0}, true, 0); err == nil {
		t.Errorf("an infinite step reward was accepted")
	}
}
