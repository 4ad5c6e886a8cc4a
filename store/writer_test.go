package store

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// startSleeper starts a child process that lives until the test ends (or kills it), and
// returns it with its writer record as the child would record it.
func startSleeper(t *testing.T) (*exec.Cmd, Writer) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to start: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, ok := procStat(cmd.Process.Pid)
	if !ok {
		t.Fatalf("no /proc/%d/stat", cmd.Process.Pid)
	}
	me := ThisProcess()
	return cmd, Writer{PID: cmd.Process.Pid, Start: st.start, Boot: me.Boot, Host: me.Host}
}

// TestWriterState: the writer record tells a live process from a gone one by pid, start time and
// boot: this process and a live child are live; the child's pid with another start time (a pid
// reused by another process), this process's pid and start on another boot, the child once it has
// exited (a zombie, before it is reaped) and once reaped (no such pid) are gone; a writer on
// another host cannot be told.
func TestWriterState(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	me := ThisProcess()
	if me.PID != os.Getpid() || me.Start == 0 || me.Boot == "" {
		t.Fatalf("ThisProcess() = %+v; want this pid, its start time and the boot id", me)
	}
	cmd, child := startSleeper(t)
	other := child
	other.Start++
	otherBoot := me
	otherBoot.Boot = "00000000-0000-0000-0000-000000000000"
	otherHost := child
	otherHost.Host = me.Host + "-elsewhere"
	for _, tc := range []struct {
		name string
		w    Writer
		want WriterState
	}{
		{"this process", me, WriterLive},
		{"a live child", child, WriterLive},
		{"the child's pid with another start time", other, WriterGone},
		{"this pid and start on another boot", otherBoot, WriterGone},
		{"pid 1 with this process's start", Writer{PID: 1, Start: me.Start, Boot: me.Boot, Host: me.Host}, WriterGone},
		{"another host", otherHost, WriterUnknown},
		{"no pid", Writer{Boot: me.Boot, Host: me.Host}, WriterGone},
	} {
		if got, why := tc.w.State(); got != tc.want {
			t.Errorf("%s: state %d (%s); want %d", tc.name, got, why, tc.want)
		}
	}
	// The child exits: a zombie until reaped, then no such pid. Both are gone.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if st, ok := procStat(child.PID); !ok || st.state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed child never became a zombie")
		}
	}
	if got, why := child.State(); got != WriterGone || !strings.Contains(why, "exited") {
		t.Errorf("a killed, unreaped child: state %d (%s); want gone, exited", got, why)
	}
	_ = cmd.Wait()
	if got, why := child.State(); got != WriterGone {
		t.Errorf("a reaped child: state %d (%s); want gone", got, why)
	}
}

// TestParseStat reads the state and start time after a command name holding spaces and
// parentheses.
func TestParseStat(t *testing.T) {
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	st, ok := parseStat([]byte(line))
	if !ok || st.state != 'S' || st.start != 987654 {
		t.Errorf("parseStat = %+v, %v; want S, 987654", st, ok)
	}
	if _, ok := parseStat([]byte("4242 (x) S 1 2")); ok {
		t.Error("a short line parsed")
	}
}

// putRaw writes a run's record as given, writer included (PutRun records this process as the
// writer of a running run).
func putRaw(t *testing.T, s *Store, r Run) {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bRuns).Put([]byte(r.ID), data) }); err != nil {
		t.Fatal(err)
	}
}

// TestInterrupted: a run stored as running is live only while this process writes it through its
// store; one whose writer is gone, whose pid is another process now, whose machine restarted, whose
// writer lives but does not hold the store, or which names no writer (an older store) is
// interrupted, and is listed as "interrupted at step N (last checkpoint M)" with the resume command
// (none without a checkpoint); runs that recorded their end are left as they are. Opened read-only
// (as runs and view open it, which no writer's lock allows), this process's own running run is
// interrupted too.
func TestInterrupted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s, path := openTemp(t)
	me := ThisProcess()
	_, child := startSleeper(t)
	gone := child
	gone.Start++
	reboot := me
	reboot.Boot = "00000000-0000-0000-0000-000000000000"

	if err := s.PutRun(Run{ID: "live", Status: StatusRunning, TotalSteps: 5, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetRun("live"); r.Writer == nil || *r.Writer != me {
		t.Fatalf("PutRun of a running run recorded writer %+v; want %+v", r.Writer, me)
	}
	putRaw(t, s, Run{ID: "killed", Status: StatusRunning, TotalSteps: 5, Writer: &gone, Created: time.Now().Add(time.Second)})
	putRaw(t, s, Run{ID: "rebooted", Status: StatusRunning, TotalSteps: 5, Writer: &reboot, Created: time.Now().Add(2 * time.Second)})
	putRaw(t, s, Run{ID: "elsewhere", Status: StatusRunning, TotalSteps: 5, Writer: &child, Created: time.Now().Add(3 * time.Second)})
	putRaw(t, s, Run{ID: "old", Status: StatusRunning, TotalSteps: 5, Created: time.Now().Add(4 * time.Second)})
	if err := s.PutRun(Run{ID: "done", Status: "stopped", StopReason: "interrupted (Ctrl-C)", TotalSteps: 5, Created: time.Now().Add(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		for _, id := range []string{"live", "killed", "old"} {
			if err := s.PutMetrics(id, step, map[string]float64{"loss": float64(step)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.SaveCheckpoint(checkpoint("killed", 2, 2)); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"live": false, "killed": true, "rebooted": true, "elsewhere": true, "old": true, "done": false}
	check := func(s *Store, want map[string]bool) {
		t.Helper()
		runs, err := s.Runs()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if got, why := s.Interrupted(r); got != want[r.ID] || got != (why != "") {
				t.Errorf("read-only %v: run %s interrupted %v (%q); want %v", s.readOnly, r.ID, got, why, want[r.ID])
			}
		}
	}
	check(s, want)
	sums, err := s.Summaries()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sums {
		if (r.Status == StatusInterrupted) != want[r.ID] {
			t.Errorf("summary of %s: status %q", r.ID, r.Status)
		}
		if r.ID == "killed" && (r.LastStep != 3 || r.LastCheckpoint != 2 || r.Resume != ResumeLine(path, "killed") || r.StatusLine() != "interrupted at step 3 (last checkpoint 2)") {
			t.Errorf("summary of the killed run: %+v", r)
		}
		if r.ID == "old" && (r.Resume != "" || r.StatusLine() != "interrupted at step 3 (no checkpoint)") {
			t.Errorf("summary of the run without a checkpoint: %+v", r)
		}
	}
	var b bytes.Buffer
	if err := WriteTable(&b, sums); err != nil {
		t.Fatal(err)
	}
	table := b.String()
	for _, w := range []string{
		"interrupted at step 3 (last checkpoint 2)",
		"killed: interrupted at step 3 (last checkpoint 2): its process (pid " + strconv.Itoa(gone.PID) + ") has exited; the pid is another process's now; continue it with: " + ResumeLine(path, "killed"),
		"old: interrupted at step 3 (no checkpoint)",
		"rebooted: interrupted at step 0 (no checkpoint): the machine restarted since it started",
		"elsewhere: interrupted at step 0 (no checkpoint): its process (pid " + strconv.Itoa(child.PID) + ") no longer holds the store",
		"stopped (interrupted (Ctrl-C))",
	} {
		if !strings.Contains(table, w) {
			t.Errorf("runs table lacks %q:\n%s", w, table)
		}
	}
	if strings.Contains(table, "live: interrupted") {
		t.Errorf("the live run is listed as interrupted:\n%s", table)
	}
	// As runs and view read it: this process no longer writes the store, so its run is interrupted.
	s.Close()
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	want["live"] = true
	check(ro, want)
}
