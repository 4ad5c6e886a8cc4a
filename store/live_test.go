package store

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestLiveSnapshot: while a store opened with Live is written, a read-only open (here a second
// open file, which bbolt's lock refuses as it would another process's) reads its live snapshot:
// the runs, metrics and checkpoint manifests as of the last publish, said by Live and LiveNote; a
// checkpoint's tensors are refused with a line that says why. The publisher writes a snapshot by
// itself after a change; closing the writer removes the snapshot, and the store itself opens.
func TestLiveSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	w, err := Open(path, Options{Live: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.PutRun(Run{ID: "r1", Name: "live", Status: StatusRunning, TotalSteps: 3, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := w.SaveCheckpoint(checkpoint("r1", 1, 1)); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"loss": 0.5, "reward_mean": 0.25}
	if err := w.PutMetrics("r1", 1, want); err != nil {
		t.Fatal(err)
	}
	// The publisher publishes by itself after a change: wait for a snapshot holding step 1.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := Open(path, Options{ReadOnly: true, Timeout: 50 * time.Millisecond})
		if err == nil {
			got, _ := r.Metrics("r1")
			live, _ := r.Live()
			r.Close()
			if !live {
				t.Fatal("a read-only open of a store held by its writer did not read the live snapshot")
			}
			if len(got) == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no live snapshot with step 1 after 30 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.PutMetrics("r1", 2, want); err != nil {
		t.Fatal(err)
	}
	if err := w.PublishLive(); err != nil { // at once, rather than within LiveInterval
		t.Fatal(err)
	}
	r, err := Open(path, Options{ReadOnly: true, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if note := r.LiveNote(); !strings.Contains(note, "being written by a running run") {
		t.Errorf("LiveNote = %q", note)
	}
	runs, err := r.Runs()
	if err != nil || len(runs) != 1 || runs[0].Name != "live" {
		t.Errorf("runs in the snapshot: %+v, %v", runs, err)
	}
	ms, err := r.Metrics("r1")
	if err != nil || len(ms) != 2 || !reflect.DeepEqual(ms[2], want) {
		t.Errorf("metrics in the snapshot: %+v, %v", ms, err)
	}
	if cps, err := r.Checkpoints("r1"); err != nil || len(cps) != 1 {
		t.Errorf("checkpoint manifests in the snapshot: %v, %v", cps, err)
	}
	if _, err := r.LoadCheckpoint("r1", 1); err == nil || !strings.Contains(err.Error(), "once the run has stopped") {
		t.Errorf("a checkpoint's tensors from the snapshot: %v", err)
	}
	if err := r.PutMetrics("r1", 3, want); err == nil {
		t.Error("the snapshot took a write")
	}
	r.Close()

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(LivePath(path)); !os.IsNotExist(err) {
		t.Errorf("the snapshot is still there after its writer closed: %v", err)
	}
	r, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if live, _ := r.Live(); live {
		t.Error("the closed store opened as a live snapshot")
	}
	if _, err := r.LoadCheckpoint("r1", 1); err != nil {
		t.Errorf("the checkpoint after the writer closed: %v", err)
	}
}

// TestStaleLiveSnapshotRemoved: a snapshot left by a writer that died is removed by the next
// process that opens the store for writing, so a reader never takes it for that writer's.
func TestStaleLiveSnapshotRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.WriteFile(LivePath(path), []byte("a dead writer's"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := os.Stat(LivePath(path)); !os.IsNotExist(err) {
		t.Errorf("the stale snapshot is still there: %v", err)
	}
	if r, err := Open(path, Options{ReadOnly: true, Timeout: 50 * time.Millisecond}); err == nil {
		r.Close()
		t.Error("a read-only open of the locked store opened something")
	}
}
