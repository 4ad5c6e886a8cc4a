// Package train holds the learning half of the loop: advantage estimators (GRPO, RLOO, PPO-GAE,
// on-policy distillation and the hybrid of GRPO and OPD), the policy loss, PPO's value head
// (ValueLoss, TokenGAE, Trainer.Values) and the optimizer.
package train

import (
	"fmt"
	"math"
	"sort"
)

// GRPO returns group-normalised advantages: (r − mean(group)) / (std(group) + eps), or without
// the std division when divideStd is false. groups[i] is the group index of rewards[i]; a group of
// equal rewards gives zeros.
func GRPO(rewards []float64, groups []int, divideStd bool, eps float64) ([]float64, error) {
	if len(rewards) != len(groups) {
		return nil, fmt.Errorf("grpo: %d rewards but %d group labels", len(rewards), len(groups))
	}
	if math.IsNaN(eps) || eps < 0 {
		return nil, fmt.Errorf("grpo: eps %v; want ≥ 0", eps)
	}
	if err := finite("grpo", rewards); err != nil {
		return nil, err
	}
	stats := groupStats(rewards, groups)
	lo, hi := map[int]float64{}, map[int]float64{}
	for i, r := range rewards {
		g := groups[i]
		if l, ok := lo[g]; !ok || r < l {
			lo[g] = r
		}
		if h, ok := hi[g]; !ok || r > h {
			hi[g] = r
		}
	}
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		g := groups[i]
		if lo[g] == hi[g] { // a group of equal rewards carries no signal: exactly 0
			continue
		}
		adv := r - stats[g].mean()
		if divideStd {
			adv /= stats[g].std() + eps // population std, as GRPO implementations use
		}
		out[i] = adv
	}
	return out, nil
}

// BestOfK returns group advantages for the best of k samples rather than each sample alone
// (Chen et al. 2025, "Pass@k Training for Adaptively Balancing Exploration and Exploitation of
// Large Reasoning Models"): a k-subset of a group is scored by its highest reward, and a sample's
// advantage is the mean, over the k-subsets that contain it, of (subset score − mean subset
// score), divided by the subset scores' standard deviation when divideStd is set. Computed
// exactly from the sorted rewards: the subset whose highest is the j-th smallest of n occurs
// C(j−1, k−1) times in C(n, k). With binary rewards this is the paper's closed form; with k = 1
// it is GRPO. A group whose correct samples are many gives them little weight, so updates go to
// the tasks the policy rarely solves.
// A group smaller than k, or of equal rewards, gets zeros.
func BestOfK(rewards []float64, groups []int, k int, divideStd bool, eps float64) ([]float64, error) {
	if len(rewards) != len(groups) {
		return nil, fmt.Errorf("best-of-k advantages: %d rewards but %d group labels", len(rewards), len(groups))
	}
	if k < 1 {
		return nil, fmt.Errorf("best-of-k advantages: k = %d; want ≥ 1", k)
	}
	if math.IsNaN(eps) || eps < 0 {
		return nil, fmt.Errorf("best-of-k advantages: eps %v; want ≥ 0", eps)
	}
	if err := finite("best-of-k advantages", rewards); err != nil {
		return nil, err
	}
	members := map[int][]int{}
	var order []int
	for i, g := range groups {
		if _, ok := members[g]; !ok {
			order = append(order, g)
		}
		members[g] = append(members[g], i)
	}
	out := make([]float64, len(rewards))
	for _, g := range order {
		idx := members[g]
		n := len(idx)
		if n < k {
			continue
		}
		sort.SliceStable(idx, func(a, b int) bool { return rewards[idx[a]] < rewards[idx[b]] })
		r := make([]float64, n) // ascending
		for j, i := range idx {
			r[j] = rewards[i]
		}
		if r[0] == r[n-1] {
			continue
		}
		// p[j]: the chance that a random k-subset's highest is r[j] (0-based rank j).
		all := binom(n, k)
		var mean, sq float64
		p := make([]float64, n)
		for j := range r {
			p[j] = binom(j, k-1) / all
			mean += p[j] * r[j]
		}
		for j := range r {
			sq += p[j] * (r[j] - mean) * (r[j] - mean)
		}
		std := math.Sqrt(sq)
		// The k-subsets holding rank j: C(j, k−1) have it as their highest; for each m > j,
		// C(m−1, k−2) have rank m as highest. Suffix sums give every j in one pass.
		containing := binom(n-1, k-1)
		var above float64 // Σ_{m>j} r[m]·C(m−1, k−2)
		for j := n - 1; j >= 0; j-- {
			adv := (r[j]*binom(j, k-1)+above)/containing - mean
			if divideStd {
				adv /= std + eps
			}
			out[idx[j]] = adv
			if k >= 2 {
				above += r[j] * binom(j-1, k-2)
			}
		}
	}
	return out, nil
}

// binom is C(n, k) as a float64, 0 outside 0 ≤ k ≤ n.
func binom(n, k int) float64 {
	if k < 0 || n < 0 || k > n {
		return 0
	}
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(n-k+i) / float64(i)
	}
	return c
}

// RLOO returns leave-one-out advantages: r_i − mean of the other rewards of its group. A group
// of one sample gets 0.
func RLOO(rewards []float64, groups []int) ([]float64, error) {
	if len(rewards) != len(groups) {
		return nil, fmt.Errorf("rloo: %d rewards but %d group labels", len(rewards), len(groups))
	}
	if err := finite("rloo", rewards); err != nil {
		return nil, err
	}
	sum, n := map[int]float64{}, map[int]float64{}
	for i, r := range rewards {
		sum[groups[i]] += r
		n[groups[i]]++
	}
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		g := groups[i]
		if n[g] > 1 {
			out[i] = r - (sum[g]-r)/(n[g]-1)
		}
	}
	return out, nil
}

// GAE computes per-token advantages and returns for one sequence of policy tokens: δ_t = r_t +
// γ·V_{t+1} − V_t (V after the last token is 0), A_t = δ_t + γλ·A_{t+1}, return_t = A_t + V_t.
func GAE(rewards, values []float64, gamma, lambda float64) (adv, ret []float64, err error) {
	if len(rewards) != len(values) {
		return nil, nil, fmt.Errorf("gae: %d rewards but %d values", len(rewards), len(values))
	}
	n := len(rewards)
	adv, ret = make([]float64, n), make([]float64, n)
	next, running := 0.0, 0.0
	for t := n - 1; t >= 0; t-- {
		delta := rewards[t] + gamma*next - values[t]
		running = delta + gamma*lambda*running
		adv[t] = running
		ret[t] = running + values[t]
		next = values[t]
	}
	return adv, ret, nil
}

// TokenGAE is GAE over the policy tokens of one trajectory, for PPO with a value head. The time
// steps are the positions where mask is true, in order: prompt and observation tokens are not
// actions and are skipped (γ discounts policy tokens only, and an observation span between two
// policy spans is transparent). values[j] is the critic's V before token j is emitted
// (Trainer.Values); the reward of a step is tokenRewards[j] (nil: none, e.g. TokenRewards' KL
// penalty; entries off the mask are ignored) plus finalReward at the last policy token, and the
// value after the last policy token is 0. It returns advantages and returns (advantage + V) per
// token position, 0 off the mask, ready for Sequence.Advantages and Sequence.Returns. A
// trajectory without a policy token gets zeros. gamma and lambda must lie in [0, 1].
func TokenGAE(mask []bool, values []float32, finalReward float64, tokenRewards []float64, gamma, lambda float64) (adv, ret []float32, err error) {
	n := len(mask)
	if len(values) != n || (tokenRewards != nil && len(tokenRewards) != n) {
		return nil, nil, fmt.Errorf("token gae: lengths mask %d, values %d, token rewards %d differ", n, len(values), len(tokenRewards))
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"gamma", gamma}, {"lambda", lambda}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return nil, nil, fmt.Errorf("token gae: %s %v; want a value in [0, 1]", p.name, p.v)
		}
	}
	if math.IsNaN(finalReward) || math.IsInf(finalReward, 0) {
		return nil, nil, fmt.Errorf("token gae: final reward %v; want a finite number", finalReward)
	}
	var steps []int
	var r, v []float64
	for j, m := range mask {
		if !m {
			continue
		}
		vj, rj := float64(values[j]), 0.0
		if tokenRewards != nil {
			rj = tokenRewards[j]
		}
		if math.IsNaN(vj) || math.IsInf(vj, 0) || math.IsNaN(rj) || math.IsInf(rj, 0) {
			return nil, nil, fmt.Errorf("token gae: token %d: value %v, reward %v; want finite numbers on every policy token", j, vj, rj)
		}
		steps, r, v = append(steps, j), append(r, rj), append(v, vj)
	}
	adv, ret = make([]float32, n), make([]float32, n)
	if len(steps) == 0 {
		return adv, ret, nil
	}
	r[len(r)-1] += finalReward
	a, g, err := GAE(r, v, gamma, lambda)
	if err != nil {
		return nil, nil, err
	}
	for k, j := range steps {
		adv[j], ret[j] = float32(a[k]), float32(g[k])
	}
	return adv, ret, nil
}

// OPD returns the on-policy-distillation advantage per token: teacher log-prob − student
// log-prob on masked (policy) tokens, 0 elsewhere.
func OPD(teacher, student []float32, mask []bool) ([]float64, error) {
	if len(teacher) != len(student) || len(student) != len(mask) {
		return nil, fmt.Errorf("opd: lengths teacher %d, student %d, mask %d differ", len(teacher), len(student), len(mask))
	}
	out := make([]float64, len(mask))
	for i, m := range mask {
		if m {
			out[i] = float64(teacher[i]) - float64(student[i])
		}
	}
	return out, nil
}

// CenterClip removes a trajectory's mean OPD advantage over its masked tokens and clips the rest
// to [−clip, clip] (clip ≤ 0: no clipping). The mean is mostly the teacher's reaction to the hint
// in its prompt — a shift over every token, large for a model that never saw hints — not a
// judgement of particular tokens; what is left says which tokens the hint favours or disfavours.
func CenterClip(opd []float64, mask []bool, clip float64) []float64 {
	var sum float64
	n := 0
	for i, m := range mask {
		if m {
			sum += opd[i]
			n++
		}
	}
	out := make([]float64, len(opd))
	if n == 0 {
		return out
	}
	mean := sum / float64(n)
	for i, m := range mask {
		if !m {
			continue
		}
		v := opd[i] - mean
		if clip > 0 {
			v = math.Max(-clip, math.Min(clip, v))
		}
		out[i] = v
	}
	return out
}

// Hybrid is the ReTool-RL advantage: the sequence's GRPO advantage on every masked token plus
// λ times the OPD advantage (nil opd: none, e.g. a trajectory without a hint).
func Hybrid(seqAdv float64, opd []float64, mask []bool, lambda float64) []float64 {
	out := make([]float64, len(mask))
	for i, m := range mask {
		if !m {
			continue
		}
		out[i] = seqAdv
		if opd != nil {
			out[i] += lambda * opd[i]
		}
	}
	return out
}

// KLPenalty estimates the per-token KL to the reference from log-probs: k1 = logp − ref,
// k3 = exp(ref − logp) − (ref − logp) − 1 (unbiased, always ≥ 0).
func KLPenalty(logp, ref float64, estimator string) (float64, error) {
	switch estimator {
	case "k1":
		return logp - ref, nil
	case "k3":
		d := ref - logp
		return math.Exp(d) - d - 1, nil
	}
	return 0, fmt.Errorf("kl estimator %q is not one of k1, k3", estimator)
}

// finite reports the first reward that is NaN or infinite.
func finite(what string, rewards []float64) error {
	for i, r := range rewards {
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return fmt.Errorf("%s: reward %d is %v; want a finite number", what, i, r)
		}
	}
	return nil
}

// KLRewardPenalty applies the KL to the reference as a reward penalty instead of a loss term:
// adv_t − coef·KL_t on masked tokens (KL_t by KLPenalty's estimator), 0 elsewhere. adv is not
// modified.
func KLRewardPenalty(adv []float64, logp, ref []float32, mask []bool, coef float64, estimator string) ([]float64, error) {
	n := len(mask)
	if len(adv) != n || len(logp) != n || len(ref) != n {
		return nil, fmt.Errorf("kl penalty: lengths advantages %d, log-probs %d, reference %d, mask %d differ", len(adv), len(logp), len(ref), n)
	}
	out := make([]float64, n)
	for i, m := range mask {
		if !m {
			continue
		}
		kl, err := KLPenalty(float64(logp[i]), float64(ref[i]), estimator)
		if err != nil {
			return nil, err
		}
		out[i] = adv[i] - coef*kl
	}
	return out, nil
}

// TokenRewards builds the per-token rewards GAE consumes when the KL is a reward penalty:
// −coef·KL_t on every masked token plus the outcome reward on the last masked token; 0 on other
// tokens. Compact the masked entries before GAE so that γ discounts policy tokens only.
func TokenRewards(outcome float64, logp, ref []float32, mask []bool, coef float64, estimator string) ([]float64, error) {
	n := len(mask)
	if len(logp) != n || len(ref) != n {
		return nil, fmt.Errorf("token rewards: lengths log-probs %d, reference %d, mask %d differ", len(logp), len(ref), n)
	}
	out := make([]float64, n)
	last := -1
	for i, m := range mask {
		if !m {
			continue
		}
		last = i
		if coef != 0 {
			kl, err := KLPenalty(float64(logp[i]), float64(ref[i]), estimator)
			if err != nil {
				return nil, err
			}
			out[i] = -coef * kl
		}
	}
	if last >= 0 {
		out[last] += outcome
	}
	return out, nil
}

// Float32s converts per-token advantages to the float32 the trainer takes.
func Float32s(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}
