package event

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"agentrl/envs"
)

func sample() Recording {
	return Recording{
		RunStart{RunID: "r", Name: "n", Recipe: "retool.yaml", TotalSteps: 2, Backend: "go", Model: "m"},
		Progress{Step: 1, Phase: PhaseRollout, Done: 1, Total: 4},
		Trajectory{Step: 1, TaskID: "t1", Turns: []Turn{{Assistant: "a", Code: "print(1)", Observation: "1"}},
			Reward: envs.Reward{Outcome: 1, Total: 1}, Correct: true, Tokens: 9},
		Eval{Step: 1, PassAtK: map[int]float64{1: 0.5, 4: 0.75}},
		RunEnd{Status: "finished", BestStep: 1},
	}
}

func TestRecordingRoundTrip(t *testing.T) {
	rec := sample()
	path := filepath.Join(t.TempDir(), "run.jsonl")
	var b bytes.Buffer
	n, err := rec.WriteTo(&b)
	if err != nil || n != int64(b.Len()) {
		t.Fatalf("WriteTo = %d, %v; buffer holds %d", n, err, b.Len())
	}
	if got := strings.Count(b.String(), "\n"); got != len(rec) {
		t.Errorf("got %d lines; want %d", got, len(rec))
	}
	// blank lines are allowed between events
	if err := os.WriteFile(path, bytes.ReplaceAll(b.Bytes(), []byte("\n"), []byte("\n\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rec) {
		t.Errorf("round trip\n got %#v\nwant %#v", back, rec)
	}
}

func TestRecordingErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"type":"run_start"}`+"\n"+`{"type":"phase","seconds":"x"}`+"\n"), 0o644)
	for _, tc := range []struct{ path, want string }{
		{bad, "bad.jsonl line 2: event phase:"},
		{filepath.Join(dir, "missing.jsonl"), "missing.jsonl: no such file"},
	} {
		_, err := ReadRecording(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadRecording(%s) = %v; want an error containing %q", tc.path, err, tc.want)
		}
	}
}

func TestReplay(t *testing.T) {
	rec := sample()
	ch := make(chan Event, len(rec))
	if err := rec.Replay(context.Background(), ch); err != nil {
		t.Fatal(err)
	}
	close(ch)
	var got Recording
	for e := range ch {
		got = append(got, e)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("replayed %d events; want %d in order", len(got), len(rec))
	}
	// a reader that never comes: Replay returns when the context ends
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := rec.Replay(ctx, make(chan Event)); err != context.Canceled {
		t.Errorf("Replay on a cancelled context = %v; want context.Canceled", err)
	}
}
