package advantage

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/recipes"
)

// TestAdvantagesPassK: with algorithm.pass_k the advantages are best-of-k ones
// (one correct of 8, k = 4: +1 and −1/7, the paper's closed form), and without it GRPO's.
func TestAdvantagesPassK(t *testing.T) {
	for _, tc := range []struct {
		passK         int
		right, wrongs float64
	}{{4, 1, -1.0 / 7}, {0, math.Sqrt(7), -1 / math.Sqrt(7)}} {
		r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool-baseline.yaml"), recipes.Options{IgnoreEnv: true,
			Overrides: map[string]string{"algorithm.pass_k": fmt.Sprint(tc.passK)}})
		if err != nil {
			t.Fatal(err)
		}
		var trajs []*batch.Trajectory
		for i := range 8 {
			tr := &batch.Trajectory{Mask: []bool{false, true, true}}
			if i == 3 {
				tr.Reward.Total = 1
			}
			trajs = append(trajs, tr)
		}
		if _, err := Of(r, trajs, nil); err != nil {
			t.Fatal(err)
		}
		for i, tr := range trajs {
			want := tc.wrongs
			if i == 3 {
				want = tc.right
			}
			if tr.Advantages[0] != 0 || math.Abs(float64(tr.Advantages[1])-want) > 1e-5 || tr.Advantages[1] != tr.Advantages[2] {
				t.Errorf("pass_k %d, sample %d: advantages %v; want 0 on the prompt, %.5f on the response", tc.passK, i, tr.Advantages, want)
			}
		}
	}
}

// The step_wise estimator in the advantage phase, against values worked out by hand: the group
// advantage of the outcome (±1 for rewards 1 and 0) plus reward.process (0.5) × the step's
// process advantage. Step rewards 1,0 (A) and 1,1 (B): mean 0.75, std √3/4, so correct →
// +1/√3 and wrong → −√3; A: P = [1/√3 − √3, −√3], B: P = [2/√3, 1/√3].
func TestStepWiseAdvantages(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: map[string]string{
		"algorithm.name": "grpo", "algorithm.estimator": "step_wise", "reward.process": "0.5", "hinter.kind": "none",
		"prm.kind": "model", "prm.model": "policy"}})
	if err != nil {
		t.Fatal(err)
	}
	a := &batch.Trajectory{Mask: []bool{false, true, true, false, true}, PRM: &event.PRM{Status: event.PRMJudged, Verdicts: []float64{1, 0}}}
	a.Reward.Total = 1
	b := &batch.Trajectory{Mask: []bool{false, true, false, true}, PRM: &event.PRM{Status: event.PRMJudged, Verdicts: []float64{1, 1}}}
	u := &batch.Trajectory{Mask: []bool{false, true}, PRM: &event.PRM{Status: event.PRMUnjudged}, Group: 1}
	if _, err := Of(r, []*batch.Trajectory{a, b, u}, nil); err != nil {
		t.Fatal(err)
	}
	s3 := math.Sqrt(3)
	for _, tc := range []struct {
		name string
		got  []float32
		want []float64
	}{
		{"A", a.Advantages, []float64{0, 1 + 0.5*(1/s3-s3), 1 + 0.5*(1/s3-s3), 0, 1 - 0.5*s3}},
		{"B", b.Advantages, []float64{0, -1 + 0.5*2/s3, 0, -1 + 0.5/s3}},
		{"unjudged, alone in its group", u.Advantages, []float64{0, 0}},
	} {
		for j := range tc.want {
			if math.Abs(float64(tc.got[j])-tc.want[j]) > 1e-4 {
				t.Errorf("%s: advantages %v; want %v", tc.name, tc.got, tc.want)
				break
			}
		}
	}
}
