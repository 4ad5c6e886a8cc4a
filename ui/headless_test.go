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
			BySet:  map[string]map[int]float64{"math500": {1: 0.625}, "aime24": {1: 0.125}},
			Change: map[int]event.Delta{1: {Mean: 0.25, SE: 0.0625}}, Since: 1},
		event.Alarm{Step: 1, Kind: event.AlarmStaleWeights, Value: 0.2, Threshold: 0.001, Message: "stale"},
		event.Ledger{Backend: "cuda", Components: map[string]int64{"KV cache": 3 << 30, "policy weights": 1 << 29},
			DeviceUsed: 5 << 30, DeviceTotal: 80 << 30, UtilPct: 93},
		event.Progress{Step: 0, Phase: "eval", Done: 10, Total: 100, ETA: 90, RunETA: 400, RunETAAtLeast: true, Tasks: 10, TasksDone: 0},
		event.Progress{Step: 0, Phase: "eval", Done: 11, Total: 100, ETA: 89, RunETA: 399, RunETAAtLeast: true, Tasks: 10, TasksDone: 1,
			PassAtK: map[int]float64{1: 0.5, 2: 0.75}},
		event.Progress{Step: 0, Phase: "eval", Done: 20, Total: 100, ETA: 80, RunETA: 390, RunETAAtLeast: true, Tasks: 10, TasksDone: 2,
			PassAtK: map[int]float64{1: 0.5, 2: 0.625}},
		event.Trajectory{Step: 0, TaskID: "heldout-0001", Eval: true},
		event.Stopping{Step: 0, Phase: "eval", Reason: "terminated (SIGTERM)", Save: 0,
			Message: "stopping now: the evaluation of step 0 is dropped (2 of 10 tasks done); no step is trained yet, so there is no checkpoint to save"},
		event.RunEnd{Status: "stopped", Reason: "terminated (SIGTERM)", Detail: "the evaluation of step 0 was dropped (2 of 10 tasks done)"},
		event.Generation{Step: 1, Phase: "rollout", Slots: 16, Steps: 300, Occupancy: 0.75, TailSeconds: 2.5, ToolStallShare: 0.0123, ToolQueueSeconds: 0.25,
			Trace: []float64{1, 1, 0.75, 0.25}, TraceEvery: 75},
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
		"step 2  eval set aime24: pass@1=0.125\n" +
		"step 2  eval set math500: pass@1=0.625\n" +
		"step 2  eval level 0: pass@1=0.750\n" +
		"step 2  eval level 1: pass@1=0.250\n" +
		"step 2  eval change since step 1 (± paired standard error): pass@1 +0.250 ± 0.062\n" +
		"step 1  ALARM stale_weights: stale (0.2 > 0.001)\n" +
		"memory 3.5 GiB held by the engine: KV cache 3.0 GiB, policy weights 512.0 MiB; device 5.0 GiB of 80.0 GiB used, 93% busy\n" +
		"step 0  eval 10/100  ETA eval 1m30s, run ≥ 6m40s\n" +
		"step 0  eval 20/100  pass@1 0.500 · pass@2 0.625 (2/10 tasks)  ETA eval 1m20s, run ≥ 6m30s\n" +
		"terminated (SIGTERM): stopping now: the evaluation of step 0 is dropped (2 of 10 tasks done); no step is trained yet, so there is no checkpoint to save\n" +
		"run stopped: terminated (SIGTERM); the evaluation of step 0 was dropped (2 of 10 tasks done); no evaluation ran, so no best step; no checkpoint (no step was trained)\n" +
		"step 1  rollout slots: occupancy 75% (16 slots, 300 steps) ██▆▂ · tail 2.50s · tool stall 1.2% · tool queue 0.25s\n"
	if b.String() != want {
		t.Errorf("plain:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := JSONLines(&b, stream(es...)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(es) || !strings.Contains(lines[4], `"pass_at_k":{"1":0.25,"8":0.5}`) ||
		!strings.Contains(lines[9], `"eta_s":89,"run_eta_s":399,"run_eta_at_least":true,"tasks":10,"tasks_done":1,"pass_at_k":{"1":0.5,"2":0.75}`) ||
		!strings.Contains(lines[11], `"eval":true`) || !strings.HasPrefix(lines[12], `{"type":"stopping","step":0,"phase":"eval"`) {
		t.Errorf("json lines:\n%s", b.String())
	}
}

// TestEndLine: how a run's end reads, with or without evaluations, a mark, a checkpoint.
func TestEndLine(t *testing.T) {
	for _, tc := range []struct {
		end  event.RunEnd
		want string
	}{
		{event.RunEnd{Status: "finished", Reason: "all 30 steps done", BestStep: 15, Step: 30, Checkpoint: 30, Evaluations: 3},
			"run finished: all 30 steps done; best step 15; last checkpoint: step 30"},
		{event.RunEnd{Status: "finished", Reason: "all 30 steps done", Step: 30, Checkpoint: 30},
			"run finished: all 30 steps done; no evaluation ran, so no best step; last checkpoint: step 30"},
		{event.RunEnd{Status: "stopped", Reason: "stopped by the user", BestStep: 2, Marked: true, Step: 4, Checkpoint: 4, Evaluations: 5},
			"run stopped: stopped by the user; best step 2, marked by hand; last checkpoint: step 4"},
		{event.RunEnd{Status: "stopped", Reason: "quit from the workbench", Detail: "step 3 was dropped during its rollout, before its update",
			Step: 2, Checkpoint: 2, Evaluations: 1},
			"run stopped: quit from the workbench; step 3 was dropped during its rollout, before its update; no trained step evaluated better than the start; last checkpoint: step 2"},
		{event.RunEnd{Status: "failed", Reason: "boom", Step: 2},
			"run failed: boom; no evaluation ran, so no best step; no checkpoint"},
	} {
		if got := EndLine(tc.end); got != tc.want {
			t.Errorf("EndLine(%+v)\n got %q\nwant %q", tc.end, got, tc.want)
		}
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

// TestPlainCheckpointSize: a checkpoint's line says what its size holds, weights and the
// optimizer state apart, so that it reads the same as the Checkpoints pane's size (the whole
// checkpoint) and an export's (the weights).
func TestPlainCheckpointSize(t *testing.T) {
	for _, tc := range []struct {
		e    event.Checkpoint
		want string
	}{
		{event.Checkpoint{Step: 3, Bytes: 7_300_000, WeightBytes: 2_600_000}, "step 3  checkpoint 7.3 MB (weights 2.6 MB, the rest optimizer state)"},
		{event.Checkpoint{Step: 4, Bytes: 2_600_000, WeightBytes: 2_600_000}, "step 4  checkpoint 2.6 MB (weights)"},
	} {
		if got := PlainLine(tc.e); got != tc.want {
			t.Errorf("PlainLine(%+v) = %q; want %q", tc.e, got, tc.want)
		}
	}
}
