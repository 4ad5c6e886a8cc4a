package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"agentrl/store"
)

// TestOutStreamNeverBlocks: a writer nobody reads (a pipe left full) does not hold up the writes:
// every Write returns at once, whole lines are dropped past the limit, and when the reader comes
// back it gets whole lines only — the ones kept, in order, and a note of how many were dropped
// where they were.
func TestOutStreamNeverBlocks(t *testing.T) {
	r, w := io.Pipe()
	s := newOutStream(w, func(n int) string { return fmt.Sprintf("DROPPED %d\n", n) })
	s.limit = 4 << 10
	const lines = 20000
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range lines {
			fmt.Fprintf(s, "line %05d %s\n", i, strings.Repeat("x", 40))
			if i == lines/2 { // a line written in pieces
				s.Write([]byte("piece "))
				s.Write([]byte("by piece\n"))
			}
		}
	}()
	select {
	case <-wrote:
	case <-time.After(time.Minute): // only against a hang: the writes take milliseconds
		t.Fatal("writes to a stream nobody reads blocked")
	}
	read := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			read <- sc.Text()
		}
		close(read)
	}()
	go func() { s.close(time.Minute); w.Close() }() // the end: what waits is written, then EOF
	last, kept, dropped := -1, 0, 0
	for l := range read {
		var i, n int
		switch {
		case l == "piece by piece":
		case strings.HasPrefix(l, "DROPPED "):
			fmt.Sscanf(l, "DROPPED %d", &n)
			dropped += n
		default:
			if _, err := fmt.Sscanf(l, "line %05d", &i); err != nil || len(l) != len("line 00000 ")+40 || i <= last {
				t.Fatalf("line %q after line %d: want whole lines, in order", l, last)
			}
			kept, last = kept+1, i
		}
	}
	if dropped == 0 || kept+dropped != lines {
		t.Errorf("kept %d and dropped %d of %d lines; want some dropped and all accounted for", kept, dropped, lines)
	}
	t.Logf("a reader away: %d lines kept, %d dropped (limit %d bytes)", kept, dropped, s.limit)
}

// brokenPipe is a writer whose reader has gone.
type brokenPipe struct {
	mu     sync.Mutex
	writes int
}

func (b *brokenPipe) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return 0, &os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}
}

// TestOutStreamStopsAtEPIPE: the first failed write stops the stream for good: later writes
// succeed without reaching the writer, and the stream says once that it is gone.
func TestOutStreamStopsAtEPIPE(t *testing.T) {
	var b brokenPipe
	gone := make(chan error, 4)
	s := newOutStream(&b, func(int) string { return "" })
	s.gone = func(err error) { gone <- err }
	if n, err := s.Write([]byte("one\n")); n != 4 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	err := <-gone
	if !strings.Contains(err.Error(), "broken pipe") || !outputGone(s) {
		t.Fatalf("gone with %v (outputGone %v)", err, outputGone(s))
	}
	for range 100 {
		if n, err := s.Write([]byte("more\n")); n != 5 || err != nil {
			t.Fatalf("Write after EPIPE = %d, %v", n, err)
		}
	}
	s.close(time.Minute)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.writes != 1 || len(gone) != 0 {
		t.Errorf("%d writes reached the broken pipe, gone told %d more times; want 1 and 0", b.writes, len(gone))
	}
}

// TestOutStreamCloseWrites: close writes everything to a reader that takes it, and gives up on one
// that takes nothing once it has been idle that long.
func TestOutStreamCloseWrites(t *testing.T) {
	var buf syncBuffer
	s := newOutStream(&buf, func(int) string { return "" })
	for i := range 1000 {
		fmt.Fprintf(s, "line %d\n", i)
	}
	s.close(time.Minute)
	if got := strings.Count(buf.String(), "\n"); got != 1000 {
		t.Errorf("close wrote %d lines of 1000", got)
	}
	_, w := io.Pipe() // never read
	s = newOutStream(w, func(int) string { return "" })
	s.Write([]byte("stuck\n"))
	done := make(chan struct{})
	go func() { s.close(50 * time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("close waited on a reader that takes nothing")
	}
}

// TestGuardOutputSharesOneFile: standard output and error on the same file (2>&1) share one
// stream, so their lines keep their order.
func TestGuardOutputSharesOneFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env, flush := guardOutput(Env{Stdout: f, Stderr: f}, "plain")
	if env.Stdout != env.Stderr {
		t.Fatal("stdout and stderr on one file got two streams")
	}
	for i := range 100 {
		fmt.Fprintf(env.Stdout, "out %d\n", i)
		fmt.Fprintf(env.Stderr, "err %d\n", i)
	}
	flush(time.Minute)
	var want bytes.Buffer
	for i := range 100 {
		fmt.Fprintf(&want, "out %d\nerr %d\n", i, i)
	}
	if got, _ := os.ReadFile(f.Name()); string(got) != want.String() {
		t.Errorf("the log's lines are out of order:\n%s", got)
	}
	env, flush = guardOutput(Env{Stdout: &syncBuffer{}, Stderr: &syncBuffer{}}, "tui")
	defer flush(time.Minute)
	if _, ok := env.Stdout.(*syncBuffer); !ok {
		t.Error("the workbench's output was wrapped")
	}
}

// TestViewEndOfInterruptedRun: view shows a run stored as running whose process is gone with
// the end interruptedEnd gives it (status interrupted, where it stood, the resume command), and
// runs lists it as interrupted at its step with its last checkpoint and the command.
func TestViewEndOfInterruptedRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	st, err := store.Open(db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutRun(store.Run{ID: "r1", Name: "killed", Status: store.StatusRunning, TotalSteps: 20}); err != nil {
		t.Fatal(err)
	}
	if _, ok := interruptedEnd(st, "r1"); ok {
		t.Error("a run this process writes is shown as interrupted")
	}
	for step := 1; step <= 10; step++ {
		if err := st.PutMetrics("r1", step, map[string]float64{"loss": 1}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	// Read back as view and runs read it: nobody holds the store, so nobody writes the run.
	ro, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	end, ok := interruptedEnd(ro, "r1")
	ro.Close()
	if !ok || end.Status != store.StatusInterrupted || end.Step != 10 || end.Checkpoint != 0 || !strings.Contains(end.Detail, "start it again") {
		t.Errorf("interruptedEnd = %+v, %v", end, ok)
	}
	out, err := runCmd(t, "runs", "--store", db)
	if err != nil || !strings.Contains(out, "interrupted at step 10 (no checkpoint)") || !strings.Contains(out, "10/20") {
		t.Errorf("runs: %v\n%s", err, out)
	}
}
