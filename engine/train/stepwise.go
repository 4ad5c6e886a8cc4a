package train

import (
	"fmt"
	"math"
)

// StepWise is the step_wise estimator's process part (algorithm.estimator step_wise): the PRM's
// per-step rewards (its verdicts, 1 correct and 0 wrong, averaged over its replies) turned into
// per-step advantages as in DeepSeekMath's process supervision (Shao et al. 2024, §4.1.3):
//
//	r̃_{i,k} = (r_{i,k} − mean_g) / (std_g + eps)   mean and population std over every judged step
//	                                              of every trajectory of i's group g (÷ std only
//	                                              with divideStd; a group whose judged steps all
//	                                              have one reward gives 0)
//	P_{i,k}  = Σ_{j ≥ k, j judged} r̃_{i,j}          a step's advantage is its own and the later steps'
//
// steps[i] holds trajectory i's reward per step, NaN for a step without a verdict (left out of
// the PRM's prompt): it adds nothing, and its P is the sum over the judged steps after it. A nil
// steps[i] (a trajectory the PRM did not judge, or judged only with malformed replies) gets nil
// and counts in no group's statistics. The token advantage is then (StepTokens)
//
//	A_{i,t} = Â_i + w · P_{i,k(t)}   (+ λ · OPD_t for hybrid)
//
// with Â_i the group advantage of the trajectory's reward (GRPO or RLOO) and w = reward.process.
func StepWise(steps [][]float64, groups []int, divideStd bool, eps float64) ([][]float64, error) {
	if len(steps) != len(groups) {
		return nil, fmt.Errorf("step-wise advantages: %d trajectories but %d group labels", len(steps), len(groups))
	}
	var xs []float64
	var gs []int
	for i, s := range steps {
		for _, r := range s {
			if math.IsInf(r, 0) {
				return nil, fmt.Errorf("step-wise advantages: trajectory %d has a step reward %v; want a finite number or NaN (no verdict)", i, r)
			}
			if !math.IsNaN(r) {
				xs, gs = append(xs, r), append(gs, groups[i])
			}
		}
	}
	stats := groupStats(xs, gs)
	lo, hi := map[int]float64{}, map[int]float64{}
	for j, x := range xs {
		g := gs[j]
		if l, ok := lo[g]; !ok || x < l {
			lo[g] = x
		}
		if h, ok := hi[g]; !ok || x > h {
			hi[g] = x
		}
	}
	out := make([][]float64, len(steps))
	for i, s := range steps {
		if s == nil {
			continue
		}
		g := groups[i]
		out[i] = make([]float64, len(s))
		var sum float64
		for k := len(s) - 1; k >= 0; k-- {
			if r := s[k]; !math.IsNaN(r) && lo[g] != hi[g] {
				n := r - stats[g].mean()
				if divideStd {
					n /= stats[g].std() + eps
				}
				sum += n
			}
			out[i][k] = sum
		}
	}
	return out, nil
}

// StepTokens adds w × proc[k] to adv on the tokens of step k, in place: step k is the k-th
// maximal run of masked (policy) tokens, the stretch the policy wrote between two tool outputs.
// Runs beyond proc (a trajectory with more stretches than the PRM saw steps) and a nil proc add
// nothing. It returns adv.
func StepTokens(adv, proc []float64, mask []bool, w float64) []float64 {
	k := -1
	for j, m := range mask {
		if !m {
			continue
		}
		if j == 0 || !mask[j-1] {
			k++
		}
		if k < len(proc) {
			adv[j] += w * proc[k]
		}
	}
	return adv
}

// Steps counts the maximal runs of masked tokens, the steps StepTokens lays proc over.
func Steps(mask []bool) int {
	n := 0
	for j, m := range mask {
		if m && (j == 0 || !mask[j-1]) {
			n++
		}
	}
	return n
}
