package train

import (
	"fmt"
	"math"
)

// stdEps keeps a division by a group's (or a step's) standard deviation finite.
const stdEps = 1e-6

// Estimator is the recipe's choice of sequence advantage (algorithm.*): which baseline a
// trajectory's reward is compared with, and whether the difference is divided by the group's
// standard deviation.
type Estimator struct {
	Algorithm    string // grpo, hybrid, opd (no sequence advantage: the teacher alone), ppo (GAE, not here)
	Baseline     string // mean (GRPO) or rloo (leave-one-out)
	PassK        int    // > 0: the best of k samples is scored (BestOfK)
	StdNormalize bool   // ÷ the group's reward standard deviation
}

// SequenceAdvantages is the advantage of each trajectory's reward (rewards[i], in group
// groups[i]) under e: zero for opd, BestOfK for pass@k training, RLOO or GRPO otherwise, each
// divided by its group's standard deviation (population, + 1e-6) when e.StdNormalize is set.
func (e Estimator) SequenceAdvantages(rewards []float64, groups []int) ([]float64, error) {
	switch {
	case e.Algorithm == "opd":
		return make([]float64, len(rewards)), nil // the teacher alone
	case e.PassK > 0:
		return BestOfK(rewards, groups, e.PassK, e.StdNormalize, stdEps)
	case e.Baseline == "rloo":
		adv, err := RLOO(rewards, groups)
		if err != nil || !e.StdNormalize {
			return adv, err
		}
		stats := groupStats(rewards, groups)
		for i := range adv {
			adv[i] /= stats[groups[i]].std() + stdEps
		}
		return adv, nil
	default:
		return GRPO(rewards, groups, e.StdNormalize, stdEps)
	}
}

// moments is a sample's count, sum and sum of squared deviations from its mean.
type moments struct{ n, sum, sq float64 }

func (m moments) mean() float64 { return m.sum / m.n }

// std is the population standard deviation (÷ n, as GRPO implementations use).
func (m moments) std() float64 { return math.Sqrt(m.sq / m.n) }

// groupStats is each group's moments, in two passes (the mean, then the squared deviations from
// it): GRPO's and RLOO's normalisation and the whitening of GAE advantages share it.
func groupStats(xs []float64, groups []int) map[int]*moments {
	stats := map[int]*moments{}
	for i, x := range xs {
		m := stats[groups[i]]
		if m == nil {
			m = &moments{}
			stats[groups[i]] = m
		}
		m.n++
		m.sum += x
	}
	for i, x := range xs {
		m := stats[groups[i]]
		d := x - m.mean()
		m.sq += d * d
	}
	return stats
}

// Whiten rescales the masked entries of every sequence of adv to zero mean and unit standard
// deviation (+ 1e-6) over all of them together: ppo's std_normalize over a step's policy tokens.
// Fewer than two masked entries leave adv as it is.
func Whiten(adv [][]float32, masks [][]bool) error {
	if len(adv) != len(masks) {
		return fmt.Errorf("whiten: %d sequences but %d masks", len(adv), len(masks))
	}
	var xs []float64
	for i := range adv {
		for j, m := range masks[i] {
			if m {
				xs = append(xs, float64(adv[i][j]))
			}
		}
	}
	if len(xs) < 2 {
		return nil
	}
	s := groupStats(xs, make([]int, len(xs)))[0]
	mean, std := s.mean(), s.std()
	for i := range adv {
		for j, m := range masks[i] {
			if m {
				adv[i][j] = float32((float64(adv[i][j]) - mean) / (std + stdEps))
			}
		}
	}
	return nil
}
