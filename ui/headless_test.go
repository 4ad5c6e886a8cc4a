package ui

import (
	"bytes"
	"strings"
	"testing"

	"agentrl/engine/event"
)

func stream(es ...event.Event) <-chan event.Event {
	ch := make(chan event.Event, len(es))
	for _, e := range es {
		ch <- e
	}
	close(ch)
	return ch
}

func TestPlainAndJSON(t *testing.T) {
	es := []event.Event{
		event.RunStart{RunID: "r", Name: "n", Recipe: "retool.yaml", TotalSteps: 2, Backend: "go"},
		event.Phase{Step: 1, Phase: "rollout", Seconds: 1.25},
		event.Progress{Step: 1, Phase: "rollout", Done: 1, Total: 8},
		event.Progress{Step: 1, Phase: "rollout", Done: 2, Total: 8},
		event.Eval{Step: 1, PassAtK: map[int]float64{8: 0.5, 1: 0.25}, Best: true},
		event.Eval{Step: 2, PassAtK: map[int]float64{1: 0.5}, ByLevel: map[string]map[int]float64{"1": {1: 0.25}, "0": {1: 0.75}},
			Change: map[int]event.Delta{1: {Mean: 0.25, SE: 0.0625}}, Since: 1},
		event.Alarm{Step: 1, Kind: event.AlarmStaleWeights, Value: 0.2, Threshold: 0.001, Message: "stale"},
		event.Ledger{Backend: "cuda", Components: map[string]int64{"KV cache": 3 << 30, "policy weights": 1 << 29},
			DeviceUsed: 5 << 30, DeviceTotal: 80 << 30, UtilPct: 93},
		event.RunEnd{Status: "finished", BestStep: 1},
	}
	var b bytes.Buffer
	if err := Plain(&b, stream(es...)); err != nil {
		t.Fatal(err)
	}
	want := "run r (n): recipe retool.yaml, 2 steps, backend go\n" +
		"step 1  rollout     1.25s\n" +
		"step 1  rollout 2/8\n" +
		"step 1  eval pass@1=0.250 pass@8=0.500 (best)\n" +
		"step 2  eval pass@1=0.500\n" +
		"step 2  eval level 0: pass@1=0.750\n" +
		"step 2  eval level 1: pass@1=0.250\n" +
		"step 2  eval change since step 1 (± paired standard error): pass@1 +0.250 ± 0.062\n" +
		"step 1  ALARM stale_weights: stale (0.2 > 0.001)\n" +
		"memory 3.5 GiB held by the engine: KV cache 3.0 GiB, policy weights 512.0 MiB; device 5.0 GiB of 80.0 GiB used, 93% busy\n" +
		"run finished (best step 1)\n"
	if b.String() != want {
		t.Errorf("plain:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := JSONLines(&b, stream(es...)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(es) || !strings.Contains(lines[4], `"pass_at_k":{"1":0.25,"8":0.5}`) {
		t.Errorf("json lines:\n%s", b.String())
	}
}

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		in, out   bool
		want, err string
	}{
		{"auto", true, true, ModeTUI, ""}, {"auto", false, true, ModePlain, ""}, {"auto", true, false, ModePlain, ""},
		{"json", true, true, ModeJSON, ""}, {"fancy", true, true, "", `"fancy"`},
	} {
		got, err := Choose(tc.mode, tc.in, tc.out)
		if got != tc.want || (tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err))) {
			t.Errorf("Choose(%q, %v, %v) = %q, %v", tc.mode, tc.in, tc.out, got, err)
		}
	}
}
