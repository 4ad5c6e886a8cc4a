package event

import (
	"reflect"
	"strings"
	"testing"

	"agentrl/envs"
)

func TestRoundTrip(t *testing.T) {
	events := []Event{
		RunStart{RunID: "r1", Name: "hybrid", Recipe: "retool.yaml", TotalSteps: 30, Backend: "go", Model: "builtin"},
		Phase{Step: 1, Phase: "rollout", Seconds: 1.5},
		Trajectory{Step: 1, TaskID: "t", Prompt: "p", Group: 2, Sample: 3, Turns: []Turn{{Assistant: "a", Code: "print(1)", Observation: "1", ToolStatus: "ok"}},
			Reward: envs.Reward{Outcome: 1, Total: 1}, Correct: true, Hint: "h", Tokens: 40, Pieces: []string{"a"}, Advantages: []float32{0.5}},
		StepMetrics{Step: 1, Metrics: map[Metric]float64{"loss": 0.1}},
		Generation{Step: 1, Phase: "rollout", Slots: 16, Steps: 412, Occupancy: 0.71, TailSeconds: 2.5, ToolStallShare: 0.03, ToolQueueSeconds: 0.1,
			Trace: []float64{1, 0.9, 0.25}, TraceEvery: 14},
		Eval{Step: 2, PassAtK: map[int]float64{1: 0.41, 8: 0.77}, Best: true},
		Eval{Step: 4, PassAtK: map[int]float64{1: 0.5}, ByLevel: map[string]map[int]float64{"0": {1: 0.9}, "1": {1: 0.1}}},
		Eval{Step: 5, PassAtK: map[int]float64{1: 0.5}, BySet: map[string]map[int]float64{"aime24": {1: 0.2}, "math500": {1: 0.8}}},
		Eval{Step: 6, PassAtK: map[int]float64{1: 0.5}, Change: map[int]Delta{1: {Mean: 0.1, SE: 0.03}}, Since: 0},
		Eval{Step: 8, PassAtK: map[int]float64{1: 0.5}, Change: map[int]Delta{1: {Mean: -0.1, SE: 0.03}}, Since: 2},
		Checkpoint{Step: 2, ID: "r1/2", Bytes: 100, Metrics: map[string]float64{"best": 0.77}, Best: true},
		Ledger{Backend: "go", Components: map[string]int64{"kv_cache": 10}, Budget: 100},
		Ledger{Backend: "cuda", Components: map[string]int64{"weights": 10, "kv_cache": 20}, Budget: 100, DeviceUsed: 60, DeviceTotal: 80, UtilPct: 93},
		Engines{Weights: 2, Phase: EnginesSync, Engines: []EngineState{
			{URL: "http://10.0.0.5:30000", Kind: "sglang", Up: true, InFlight: 3, Done: 412, Tokens: 91000, TokensPerSec: 1250.5, Failovers: 1},
			{URL: "http://10.0.0.6:8000", Kind: "vllm", Down: "no reply within 5m0s (stalled)", Done: 12, Tokens: 3000, Failovers: 2, Errors: 1}}},
		Alarm{Step: 3, Kind: AlarmLogProbMismatch, Value: 0.2, Threshold: 0.05, Message: "m"},
		Progress{Step: 1, Phase: "rollout", Done: 3, Total: 64},
		Progress{Step: 0, Phase: "eval", Done: 40, Total: 64, ETA: 12.5, RunETA: 300, RunETAAtLeast: true, Tasks: 8, TasksDone: 5,
			PassAtK: map[int]float64{1: 0.25, 2: 0.4}},
		Trajectory{Step: 0, TaskID: "heldout-0001", Turns: []Turn{{Assistant: "a"}}, Eval: true},
		Stopping{Step: 3, Phase: "train", Reason: "terminated (SIGTERM)", Message: "stopping: finishing the update of step 3, then saving step 3", Save: 3},
		RunEnd{Status: "stopped", Reason: "early stop", BestStep: 2},
		RunEnd{Status: "stopped", Reason: "terminated (SIGTERM)", Detail: "the evaluation of step 4 was dropped", Step: 4, Checkpoint: 4, Evaluations: 2},
		Error{Message: "x"},
	}
	for _, e := range events {
		line, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(line), `{"type":"`+e.Type()+`"`) {
			t.Errorf("%s: line %s does not start with its type", e.Type(), line)
		}
		back, err := Unmarshal(line)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Errorf("%s: round trip\n got %#v\nwant %#v", e.Type(), back, e)
		}
	}
}

func TestEvalJSONShape(t *testing.T) {
	line, _ := Marshal(Eval{Step: 3, PassAtK: map[int]float64{1: 0.41, 8: 0.77}})
	if string(line) != `{"type":"eval","step":3,"pass_at_k":{"1":0.41,"8":0.77},"best":false}` {
		t.Errorf("got %s", line)
	}
	if _, err := Unmarshal([]byte(`{"type":"eval","pass_at_k":{"x":1}}`)); err == nil {
		t.Error("non-integer k accepted")
	}
	line, _ = Marshal(Eval{Step: 3, PassAtK: map[int]float64{1: 0.5}, ByLevel: map[string]map[int]float64{"1": {1: 0.25}, "0": {1: 0.75}}})
	if string(line) != `{"type":"eval","step":3,"pass_at_k":{"1":0.5},"best":false,"by_level":{"0":{"1":0.75},"1":{"1":0.25}}}` {
		t.Errorf("got %s", line)
	}
	line, _ = Marshal(Eval{Step: 5, PassAtK: map[int]float64{8: 0.5}, Change: map[int]Delta{8: {Mean: 0.25, SE: 0.125}}})
	if string(line) != `{"type":"eval","step":5,"pass_at_k":{"8":0.5},"best":false,"change":{"8":{"mean":0.25,"se":0.125}},"since":0}` {
		t.Errorf("got %s", line)
	}
	if _, err := Unmarshal([]byte(`{"type":"eval","pass_at_k":{"1":1},"change":{"x":{}}}`)); err == nil {
		t.Error("non-integer change key accepted")
	}
}

func TestEvalLevelsOrder(t *testing.T) {
	e := Eval{ByLevel: map[string]map[int]float64{"10": nil, "2": nil, "0": nil}}
	if got := strings.Join(e.Levels(), " "); got != "0 2 10" {
		t.Errorf("Levels() = %q; want numeric order 0 2 10", got)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"type":"party"}`, `unknown type "party" (want one of run_start`},
		{`{"step":1}`, `no "type" field`},
		{`[1,2]`, `not a JSON object`},
		{`{"type":"phase","step":"one"}`, `event phase:`},
		{`{"type":"eval","pass_at_k":{"x":1}}`, `pass_at_k key "x" is not an integer`},
		{`{"type":"eval","pass_at_k":{},"by_level":{"2":{"y":1}}}`, `by_level "2": pass_at_k key "y" is not an integer`},
	} {
		_, err := Unmarshal([]byte(tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unmarshal(%s) = %v; want an error containing %q", tc.line, err, tc.want)
		}
	}
}

func TestPhasesOrder(t *testing.T) {
	got := strings.Join(Phases(), " ")
	if want := "rollout prm score reference advantage train sync eval save"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// TestAgentTurnJSON: an external agent's turns (tool calls, sent messages, opening messages)
// encode to the bytes they did when events had message types of their own (the line below was
// written by them), and read back to the same values.
func TestAgentTurnJSON(t *testing.T) {
	tr := Trajectory{Step: 3, TaskID: "t1", Prompt: "p", Turns: []Turn{{Assistant: "Let me run <it> & see.", Code: "print(1)",
		ToolCalls: []envs.ToolCall{{Name: "python", Arguments: envs.TextArguments(`{"code": "print(1)", "note": "<b>&"}`)}, {Name: "f", Arguments: envs.TextArguments("")}},
		Sent:      []envs.Message{{Role: "tool", Content: "1", ToolCallID: "call_0_0", Name: "python"}, {Role: "user", Content: "go on"}}, Finish: "tool_calls"}},
		Agent: &Agent{Requests: 2, Segments: 1, Opening: []envs.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "What is 6 * 7?"}}}}
	const want = `{"type":"trajectory","step":3,"task_id":"t1","prompt":"p","group":0,"sample":0,"turns":[{"assistant":"Let me run \u003cit\u003e \u0026 see.","code":"print(1)",` +
		`"tool_calls":[{"name":"python","arguments":"{\"code\": \"print(1)\", \"note\": \"\u003cb\u003e\u0026\"}"},{"name":"f","arguments":""}],` +
		`"sent":[{"role":"tool","content":"1","name":"python","tool_call_id":"call_0_0"},{"role":"user","content":"go on"}],"finish":"tool_calls"}],` +
		`"reward":{"outcome":0,"process":0,"shaping":0,"format_penalty":0,"total":0},"correct":false,"tokens":0,"tool_errors":0,` +
		`"agent":{"exit_code":0,"seconds":0,"requests":2,"segments":1,"opening":[{"role":"system","content":"s"},{"role":"user","content":"What is 6 * 7?"}]}}`
	b, err := Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	e, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	back, ok := e.(Trajectory)
	if !ok {
		t.Fatalf("read back a %T", e)
	}
	if again, err := Marshal(back); err != nil || string(again) != want {
		t.Errorf("re-encoded %s (%v); want %s", again, err, want)
	}
	if got := back.Turns[0].ToolCalls[0].Text(); got != `{"code": "print(1)", "note": "<b>&"}` {
		t.Errorf("arguments read back as %q", got)
	}
	if !reflect.DeepEqual(back.Turns[0].Sent, tr.Turns[0].Sent) || !reflect.DeepEqual(back.Agent.Opening, tr.Agent.Opening) {
		t.Errorf("messages read back as %+v, %+v", back.Turns[0].Sent, back.Agent.Opening)
	}
}

// TestEnginesJSONShape: an engines event's JSON, field by field (the json UI mode prints it).
func TestEnginesJSONShape(t *testing.T) {
	line, _ := Marshal(Engines{Weights: 3, Phase: EnginesGenerate, Engines: []EngineState{{URL: "http://h:1", Kind: "serve", Up: true, InFlight: 2, Done: 5, Tokens: 80, TokensPerSec: 40, Failovers: 1, Errors: 0}}})
	want := `{"type":"engines","weights":3,"phase":"generate","engines":[{"url":"http://h:1","kind":"serve","up":true,"in_flight":2,"done":5,"tokens":80,"tokens_per_s":40,"failovers":1,"errors":0}]}`
	if string(line) != want {
		t.Errorf("got  %s\nwant %s", line, want)
	}
}
