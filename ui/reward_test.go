package ui

import (
	"strconv"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"

	"agentrl/engine/event"
	"agentrl/envs"
)

// TestRewardLinesAddUp: with the run's weights the Detail pane's reward parts show what each
// adds to the total, and those figures sum to it (the case: shaping 0.5 and a format
// penalty of 1 under weights 0.2 and 0.2 make -0.1); without weights the raw values show.
func TestRewardLinesAddUp(t *testing.T) {
	th := NewTheme(lipgloss.NewRenderer(nil), false)
	w := &event.RewardWeights{Outcome: 1, Process: 0, Shaping: 0.2, FormatPenalty: 0.2}
	for _, c := range []struct {
		name string
		r    envs.Reward
	}{
		{"shaping and a format penalty", envs.Reward{Shaping: 0.5, FormatPenalty: 1, Total: -0.1}},
		{"solved", envs.Reward{Outcome: 1, Shaping: 0.5, Total: 1.1}},
	} {
		tr := &event.Trajectory{Reward: c.r}
		lines := rewardLines(th, tr, w)
		var sum, total float64
		for _, l := range lines {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("%s: line %q does not end in a number", c.name, l)
			}
			if strings.HasPrefix(strings.TrimSpace(l), "total") {
				total = v
			} else {
				sum += v
			}
		}
		if diff := sum - total; diff > 1e-9 || diff < -1e-9 || total != c.r.Total {
			t.Errorf("%s: the parts add to %.3f, the total shown is %.3f (stored %.3f):\n%s", c.name, sum, total, c.r.Total, strings.Join(lines, "\n"))
		}
	}
	lines := rewardLines(th, &event.Trajectory{Reward: envs.Reward{Shaping: 0.5, FormatPenalty: 1, Total: -0.1}}, nil)
	if got := strings.Join(lines, "\n"); !strings.Contains(got, "shaping         +0.500") || !strings.Contains(got, "format penalty  -1.000") {
		t.Errorf("without weights:\n%s", got)
	}
}
