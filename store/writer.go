package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// StatusRunning is a run's stored status from its start (or resume) until it records its end.
// A process that dies without recording an end (SIGKILL, a crash, power loss, a restart) leaves
// it; Interrupted tells such a run from a live one.
const StatusRunning = "running"

// StatusInterrupted is how a listing (Summaries, the view) shows a run stored as running whose
// writer is gone. It is never stored: the record keeps "running" until resume continues the run.
const StatusInterrupted = "interrupted"

// Writer identifies the process writing a run: PutRun records it in the run's record whenever the
// record is written with the status running, i.e. when the run starts and when it is resumed.
// A pid alone is not an identity: pids are reused, and a machine that restarted numbers its
// processes afresh; the pid with the process's start time and the boot's id is.
type Writer struct {
	PID int `json:"pid"`
	// Start is the process's start time in clock ticks after boot (/proc/PID/stat, field 22);
	// 0 where it cannot be read (not Linux).
	Start uint64 `json:"start,omitempty"`
	// Boot is the machine's boot id (/proc/sys/kernel/random/boot_id): another id on the same
	// host means the machine restarted since.
	Boot string `json:"boot,omitempty"`
	Host string `json:"host,omitempty"`
}

// WriterState is what can be told of a recorded writer from this process.
type WriterState int

const (
	// WriterLive: the recorded process exists (same host, same boot, same pid and start time).
	WriterLive WriterState = iota
	// WriterGone: it does not — no such pid, the pid is another process now (another start
	// time), the process has exited (a zombie), or the machine restarted since.
	WriterGone
	// WriterUnknown: it cannot be told from here (another host, or no start time to compare).
	WriterUnknown
)

var self struct {
	once sync.Once
	w    Writer
}

// ThisProcess is the writer record of the calling process.
func ThisProcess() Writer {
	self.once.Do(func() {
		pid := os.Getpid()
		self.w = Writer{PID: pid, Boot: bootID()}
		if st, ok := procStat(pid); ok {
			self.w.Start = st.start
		}
		self.w.Host, _ = os.Hostname()
	})
	return self.w
}

// State says whether w's process still exists, and why not when it does not.
func (w Writer) State() (WriterState, string) {
	me := ThisProcess()
	if w.Host != "" && me.Host != "" && w.Host != me.Host {
		return WriterUnknown, fmt.Sprintf("its process (pid %d) ran on host %s", w.PID, w.Host)
	}
	if w.Boot != "" && me.Boot != "" && w.Boot != me.Boot {
		return WriterGone, "the machine restarted since it started"
	}
	if w.PID <= 0 {
		return WriterGone, "no process recorded"
	}
	if w.PID == me.PID && (w.Start == 0 || w.Start == me.Start) {
		return WriterLive, ""
	}
	st, ok := procStat(w.PID)
	if !ok { // no such process, or no /proc to read it in: ask the kernel whether the pid exists
		if err := syscall.Kill(w.PID, 0); errors.Is(err, syscall.ESRCH) {
			return WriterGone, fmt.Sprintf("its process (pid %d) has exited", w.PID)
		}
		return WriterUnknown, fmt.Sprintf("pid %d exists, but its start time cannot be read here", w.PID)
	}
	switch {
	case st.state == 'Z' || st.state == 'X':
		return WriterGone, fmt.Sprintf("its process (pid %d) has exited", w.PID)
	case w.Start == 0:
		return WriterUnknown, fmt.Sprintf("pid %d exists, but no start time was recorded to compare", w.PID)
	case st.start != w.Start:
		return WriterGone, fmt.Sprintf("its process (pid %d) has exited; the pid is another process's now", w.PID)
	}
	return WriterLive, ""
}

// Interrupted reports whether r is stored as running but is not being written by any process:
// its writer is gone (SIGKILL, a crash, power loss, a restart), and why. Two witnesses decide,
// never the record's age:
//
//   - the writer record (Writer): the recorded process no longer exists on this machine, or the
//     pid now belongs to another process, or the machine restarted: interrupted;
//   - the store's file lock, which s holds: shared when s was opened read-only (which no writer's
//     exclusive lock allows at the same time), exclusive when s is open for writing. Either way no
//     other process can be writing the store now, so a run whose writer is not this very process
//     writing through s is interrupted, even when its record names no writer (a store written by
//     an older build) or a writer on another host. A live snapshot (Live) was opened because
//     another process holds the lock: there a run whose recorded writer is alive is running.
func (s *Store) Interrupted(r Run) (bool, string) {
	if r.Status != StatusRunning {
		return false, ""
	}
	if r.Writer == nil {
		return true, "its process is gone (no other process holds the store)"
	}
	state, why := r.Writer.State()
	if state == WriterGone {
		return true, why
	}
	if !s.readOnly && *r.Writer == ThisProcess() {
		return false, "" // this process writes it, through this store
	}
	if live, _ := s.Live(); live {
		// A live snapshot: a process holds the store's lock now, and the recorded writer is
		// alive (or cannot be told from here): it is the one writing.
		return false, ""
	}
	if state == WriterLive { // alive, yet not holding the store: it no longer writes this run
		return true, fmt.Sprintf("its process (pid %d) no longer holds the store", r.Writer.PID)
	}
	return true, "its process is gone (no other process holds the store)"
}

// InterruptedLine is how an interrupted run is shown: where it stood, and where it continues from.
func InterruptedLine(step, checkpoint int) string {
	if checkpoint > 0 {
		return fmt.Sprintf("interrupted at step %d (last checkpoint %d)", step, checkpoint)
	}
	return fmt.Sprintf("interrupted at step %d (no checkpoint)", step)
}

// ResumeLine is the command that continues run id of the store at path from its latest checkpoint.
func ResumeLine(path, id string) string {
	return "agentrl-tui resume --store " + shellWord(path) + " " + shellWord(id)
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r == '=' || r == ',' || r == '@' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// bootID is this boot's id, "" where the system has none.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

type stat struct {
	state byte
	start uint64
}

// procStat reads a process's state and start time from /proc/PID/stat; false when there is no
// such process (or no /proc).
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	return parseStat(b)
}

// parseStat reads /proc/PID/stat: "pid (comm) state ppid … starttime …", comm possibly holding
// spaces and parentheses, so the fields are counted after its last ')'; starttime is field 22.
func parseStat(b []byte) (stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return stat{}, false
	}
	return stat{state: f[0][0], start: start}, true
}
