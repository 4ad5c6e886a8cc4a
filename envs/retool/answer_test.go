package retool

import (
	"testing"

	"agentrl/envs"
	"agentrl/envs/mathverify"
)

// TestScoreAnswer: an external agent's answer is scored as the ReTool loop scores its own.
func TestScoreAnswer(t *testing.T) {
	for _, tc := range []struct {
		answer, ref string
		want        envs.Reward
	}{
		{"92", "92", envs.Reward{Outcome: 1}},
		{" 92. ", "92", envs.Reward{Outcome: 1}},
		{`\boxed{92}`, "92", envs.Reward{Outcome: 1}},
		{`so \boxed{91}, no: \boxed{92}`, "92", envs.Reward{Outcome: 1}},
		{"1/2", "0.5", envs.Reward{Outcome: 1}},
		{"93", "92", envs.Reward{}},
		{"", "92", envs.Reward{FormatPenalty: 1}},
		{`\boxed{}`, "92", envs.Reward{FormatPenalty: 1}},
	} {
		if got := ScoreAnswer(tc.answer, tc.ref, mathverify.Options{}); got != tc.want {
			t.Errorf("ScoreAnswer(%q, %q) = %+v; want %+v", tc.answer, tc.ref, got, tc.want)
		}
	}
	// The answer is read as mathverify.Extract reads it; the last-number fallback is the recipe's.
	fallback := mathverify.Options{LastNumberFallback: true}
	for _, tc := range []struct {
		answer, ref string
		opts        mathverify.Options
		want        envs.Reward
	}{
		{"work\nAnswer: 92", "92", mathverify.Options{}, envs.Reward{Outcome: 1}},
		{"<answer>92</answer>", "92", mathverify.Options{}, envs.Reward{Outcome: 1}},
		{`\boxed{3, 92}`, "92", mathverify.Options{}, envs.Reward{}},
		{"The answer is 92.", "92", mathverify.Options{}, envs.Reward{}},
		{"The answer is 92.", "92", fallback, envs.Reward{Outcome: 1}},
		{"$$", "92", fallback, envs.Reward{FormatPenalty: 1}},
	} {
		if got := ScoreAnswer(tc.answer, tc.ref, tc.opts); got != tc.want {
			t.Errorf("ScoreAnswer(%q, %q, %+v) = %+v; want %+v", tc.answer, tc.ref, tc.opts, got, tc.want)
		}
	}
	w := Weights{Outcome: 1, FormatPenalty: 0.1}
	if got := w.Compose(ScoreAnswer("", "92", mathverify.Options{})).Total; got != -0.1 {
		t.Errorf("no answer composes to %v; want -0.1 (the format penalty)", got)
	}
}
