package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/store"
)

// syncBuffer is a bytes.Buffer the workbench writes while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWaysOutInProcess runs the built-in recipe through Main, as the binary does, and leaves it
// the ways a user at the keyboard does: q and ctrl+c in the workbench (its keys through a pipe)
// during the start evaluation, and the end of a run without evaluations. Each must exit 0, say
// what the stop does and how the run ended, and leave the store with the run's end recorded.
func TestWaysOutInProcess(t *testing.T) {
	t.Setenv("GOMLX_BACKEND", device.GoConfig)
	for _, tc := range []struct {
		name   string
		args   []string
		key    string // pressed once the evaluation's ETA is on the screen; "" presses nothing
		want   []string
		status string
		reason string
		ckpt   int
	}{
		{name: "q during the start evaluation", args: []string{"--ui", "tui"}, key: "q",
			want:   []string{"stopping now: the evaluation of step 0 is dropped (", "run stopped: quit from the workbench; the evaluation of step 0 was dropped", "no checkpoint (no step was trained)"},
			status: "stopped", reason: "quit from the workbench"},
		{name: "ctrl+c during the start evaluation", args: []string{"--ui", "tui"}, key: "\x03",
			want:   []string{"stopping now: the evaluation of step 0 is dropped (", "run stopped: quit from the workbench"},
			status: "stopped", reason: "quit from the workbench"},
		{name: "a run without evaluations", args: []string{"--ui", "plain", "--max-steps", "1", "--set", "eval.every=0", "--set", "eval.at_start=false",
			"--set", "early_stop.patience=0", "--set", "early_stop.max_drop=0", "--set", "checkpoint.keep_best=0",
			"--set", "rollout.tasks_per_step=2", "--set", "rollout.group_size=2"},
			want:   []string{"all 1 steps done: finishing: saving step 1", "run finished: all 1 steps done; no evaluation ran, so no best step; last checkpoint: step 1"},
			status: "finished", reason: "all 1 steps done", ckpt: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "runs.db")
			in, keys := io.Pipe()
			defer keys.Close()
			var out, errb syncBuffer
			code := make(chan int, 1)
			go func() {
				args := append([]string{recipe("retool.yaml"), "--store", db, "--backend", "go"}, tc.args...)
				code <- Main(args, Env{Stdin: in, Stdout: &out, Stderr: &errb, Builtin: os.DirFS(filepath.Join("..", model.BuiltinSourceDir))})
			}()
			if tc.key != "" {
				for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), "ETA eval "); time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						o := out.String()
						t.Fatalf("the evaluation's ETA never showed:\n%s\n%q", errb.String(), o[max(len(o)-3000, 0):])
					}
				}
				if _, err := keys.Write([]byte(tc.key)); err != nil {
					t.Fatal(err)
				}
			}
			var c int
			select {
			case c = <-code:
			case <-time.After(5 * time.Minute):
				t.Fatal("the run did not end")
			}
			text := out.String()
			if i := strings.LastIndex(text, "\x1b[?1049l"); i >= 0 { // what follows the workbench's screen
				text = text[i:]
			}
			if c != 0 {
				t.Errorf("exit status %d; want 0\n%s\n%s", c, text, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("the output lacks %q:\n%s", w, text)
				}
			}
			st, err := store.Open(db, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			runs, err := st.Runs()
			if err != nil || len(runs) != 1 || runs[0].Status != tc.status || runs[0].StopReason != tc.reason || runs[0].Ended.IsZero() {
				t.Fatalf("stored runs %+v (%v); want one %s, %q, with its end time", runs, err, tc.status, tc.reason)
			}
			m, err := st.LatestCheckpoint(runs[0].ID)
			switch {
			case tc.ckpt == 0 && err == nil:
				t.Errorf("checkpoint %d stored; want none", m.Step)
			case tc.ckpt > 0 && (err != nil || m.Step != tc.ckpt):
				t.Errorf("latest checkpoint %d (%v); want %d", m.Step, err, tc.ckpt)
			case tc.ckpt > 0:
				if _, err := st.LoadCheckpoint(runs[0].ID, m.Step); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
