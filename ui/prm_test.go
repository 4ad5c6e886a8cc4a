package ui

import (
	"strings"
	"testing"

	"agentrl/engine/event"
)

// A run with the model PRM shows its phase in the timeline, each trajectory's verdicts, the
// PRM's hint rate and malformed replies; a run without one shows no prm phase.
func TestPRMShown(t *testing.T) {
	if v := screen(t, testModel(sampleRun(), &fakeCtrl{}, 120, 40), 120, 40); strings.Contains(v, " prm ") {
		t.Fatalf("a run without a PRM shows a prm phase:\n%s", v)
	}
	evs := sampleRun()
	var withPRM []event.Event
	for _, e := range evs {
		switch v := e.(type) {
		case event.Phase:
			if v.Phase == event.PhaseScore {
				withPRM = append(withPRM, event.Phase{Step: v.Step, Phase: event.PhasePRM, Seconds: 7.5})
			}
		case event.StepMetrics:
			v.Metrics[event.MetricHintRate], v.Metrics[event.MetricPRMJudged], v.Metrics[event.MetricPRMMalformed] = 0.375, 8, 3
			v.Metrics[event.MetricPRMAgreementFinal], v.Metrics[event.MetricPRMAgreementSteps] = 0.875, 0.75
			e = v
		case event.Trajectory:
			v.PRM = &event.PRM{Status: event.PRMJudged, Verdicts: []float64{1, 0, -1}, Replies: 2, Malformed: 1, Hint: v.Hint != ""}
			e = v
		}
		withPRM = append(withPRM, e)
	}
	m := testModel(withPRM, &fakeCtrl{}, 120, 40)
	v := screen(t, m, 120, 40)
	for _, want := range []string{"prm", "7.50s", "hint_rate              0.375", "prm_malformed              3"} {
		if !strings.Contains(v, want) {
			t.Errorf("status lacks %q:\n%s", want, v)
		}
	}
	press(m, "3", "g", "enter", "G")
	v = screen(t, m, 120, 40)
	for _, want := range []string{"PRM: judged (2 replies, 1 malformed)", "step 1 ✓  step 2 ✗  step 3 –"} {
		if !strings.Contains(v, want) {
			t.Errorf("detail lacks %q:\n%s", want, v)
		}
	}
	press(m, "5")
	if v = screen(t, m, 120, 40); !strings.Contains(v, "PRM 38% of 8 · 3 malformed") {
		t.Errorf("hints pane lacks the PRM's hint rate:\n%s", v)
	}
	wide := testModel(withPRM, &fakeCtrl{}, 200, 40) // the agreement follows on a wide terminal
	press(wide, "5")
	if v = screen(t, wide, 200, 40); !strings.Contains(v, "PRM 38% of 8 · 3 malformed · agree 88% final 75% steps") {
		t.Errorf("hints pane lacks the PRM's agreement with the checked steps:\n%s", v)
	}
}
