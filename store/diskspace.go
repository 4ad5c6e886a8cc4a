package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// A store write can fail for the disk's sake: the file system is full (ENOSPC, or the user's quota,
// EDQUOT), was remounted read-only (EROFS), or the device failed (EIO). Each stops a run with one
// line (WriteError) naming the store's path, the bytes the write needed and the bytes free. The
// store stays as its last commit left it (bbolt commits are atomic and a checkpoint exists only
// once its manifest is committed); the chunks a failed checkpoint had already committed are
// dropped at once (GC), so that what they held is free inside the file for the next try.

// Space is the room a store has for what it writes next.
type Space struct {
	// Dir is the folder measured: the store file's.
	Dir string
	// Disk is the free space of the file system that holds it: statfs f_bavail × f_bsize, what an
	// unprivileged process may still write.
	Disk int64
	// InFile is the pages free inside the bbolt file (left by deleted checkpoints and collected
	// chunks), which bbolt reuses before it grows the file. Free pages are counted whole, though a
	// 4 MiB chunk needs 1,025 of them in a row: a fragmented file may have to grow anyway.
	InFile int64
}

// Free is the bytes the store can write before the disk is full: the disk's and the file's.
func (sp Space) Free() int64 { return sp.Disk + sp.InFile }

// DiskFree is the free space (statfs f_bavail × f_bsize) of the file system holding dir.
func DiskFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Space measures the room the store has now: the free space of its folder's file system and the
// free pages inside its file.
func (s *Store) Space() (Space, error) {
	dir := filepath.Dir(s.path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sp := Space{Dir: dir}
	var err error
	if sp.Disk, err = DiskFree(dir); err != nil {
		return sp, err
	}
	st := s.db.Stats()
	sp.InFile = int64(st.FreeAlloc)
	return sp, nil
}

// TxBytes bounds the chunk bytes SaveCheckpointFrom commits in one transaction.
const TxBytes = txBytes

// Chunks is the number and bytes of the chunks stored. bbolt keeps at least two values in a leaf
// and a transaction that adds a key rewrites the leaf it lands in, values and all (their old pages
// are free again from the next transaction): what a checkpoint's chunks make bbolt rewrite
// depends on these.
func (s *Store) Chunks() (n int, bytes int64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bBlobs).ForEach(func(_, v []byte) error {
			n++
			bytes += int64(len(v))
			return nil
		})
	})
	return n, bytes, err
}

// Cause of a failed write, as WriteError names it.
const (
	CauseNoSpace  = "no space left on device"
	CauseQuota    = "disk quota exceeded"
	CauseReadOnly = "read-only file system"
	CauseIO       = "input/output error"
)

// DiskCause says whether err is a failure of the disk under a write, and which: one of the
// Cause constants, or "" for any other error. It reads the errno where the error chain keeps it,
// else the message (bbolt reports a failed resize of its file as text).
func DiskCause(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range []struct {
		errno syscall.Errno
		cause string
	}{{syscall.ENOSPC, CauseNoSpace}, {syscall.EDQUOT, CauseQuota}, {syscall.EROFS, CauseReadOnly}, {syscall.EIO, CauseIO}} {
		if errors.Is(err, c.errno) || strings.Contains(err.Error(), c.errno.Error()) {
			return c.cause
		}
	}
	return ""
}

// WriteError is a store write the disk refused, or that the run refused before writing because
// the disk had no room for it. Its message is one line: what was written, the store's path, the
// bytes needed and the bytes free, what is intact, and what to do.
type WriteError struct {
	Path string // the store file
	Run  string // the run writing
	// Step is the step of the checkpoint written; 0 for another store write (metrics,
	// trajectories, the run's record).
	Step int
	// Need is the bytes the write needed (a checkpoint's: its estimate, see the engine's
	// checkpointNeed); 0 when not known.
	Need int64
	// Written is, when Need is not known, the bytes of the checkpoint handed to the store before
	// the failure: it needed more than that.
	Written int64
	// Space is the room measured after the failure (or at the refusal); SpaceErr says why it
	// could not be measured.
	Space    Space
	SpaceErr error
	// Cause is one of the Cause constants; "" for a refusal before the write. Injected says the
	// failure was a test's (FaultEnv).
	Cause    string
	Injected bool
	// Refused says the write was never begun: the space check before a checkpoint found too little.
	Refused bool
	// Last is the run's latest checkpoint, intact (0: none).
	Last int
	// Err is the write's own error (nil for a refusal).
	Err error
}

func (e *WriteError) Unwrap() error { return e.Err }

// Error is the one line a run stops with, e.g. "no room for the checkpoint of step 3 in the store
// /data/runs.db: it needs 7.9 MiB (8283136 bytes), the disk has 1.2 MiB (1258291 bytes) free
// (0 B of it inside the store file); nothing was written and the checkpoint of step 2 is intact:
// free space there, or lower checkpoint.keep_last, then agentrl-tui resume --store /data/runs.db RUN".
func (e *WriteError) Error() string {
	what := "a store write"
	if e.Step > 0 {
		what = fmt.Sprintf("the checkpoint of step %d", e.Step)
	}
	var b strings.Builder
	if e.Refused {
		fmt.Fprintf(&b, "no room for %s in the store %s: ", what, e.Path)
	} else {
		fmt.Fprintf(&b, "%s failed in the store %s: %s", what, e.Path, e.Cause)
		if e.Injected {
			b.WriteString(" (" + errInjected.Error() + ")")
		}
		b.WriteString(": ")
	}
	switch {
	case e.Need > 0:
		fmt.Fprintf(&b, "it needs %s, ", Bytes(e.Need))
	case e.Written > 0:
		fmt.Fprintf(&b, "it needs more than the %s written when it failed, ", Bytes(e.Written))
	default:
		b.WriteString("it needs more than is free, ")
	}
	if e.SpaceErr != nil {
		fmt.Fprintf(&b, "the free space is unknown (%s)", oneLine(e.SpaceErr.Error()))
	} else {
		fmt.Fprintf(&b, "the disk has %s free", Bytes(e.Space.Free()))
		if e.Space.InFile > 0 {
			fmt.Fprintf(&b, " (%s of it inside the store file)", HumanBytes(e.Space.InFile))
		}
	}
	switch {
	case e.Refused:
		b.WriteString("; nothing was written")
	case e.Step > 0:
		b.WriteString("; its partial chunks were dropped")
	}
	if e.Last > 0 {
		fmt.Fprintf(&b, " and the checkpoint of step %d is intact", e.Last)
	} else {
		b.WriteString(" and the run has no checkpoint yet")
	}
	fix := "free space there"
	switch e.Cause {
	case CauseReadOnly:
		fix = "remount that file system read-write (or move the store)"
	case CauseIO:
		fix = "check the disk (dmesg) or move the store"
	case CauseQuota:
		fix = "free space within your quota there"
	}
	if e.Refused && e.Step > 0 {
		fix += ", or keep fewer checkpoints (checkpoint.keep_last, keep_best)"
	}
	fmt.Fprintf(&b, ": %s, then agentrl-tui resume --store %s %s", fix, e.Path, e.Run)
	return b.String()
}

// Bytes writes a byte count for people and exactly: "7.9 MiB (8283136 bytes)".
func Bytes(n int64) string { return HumanBytes(n) + " (" + strconv.FormatInt(n, 10) + " bytes)" }

// HumanBytes writes a byte count in binary units: "512 B", "7.9 MiB", "44.7 GiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for ; (v >= unit || v <= -unit) && i < 4; i++ {
		v /= unit
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// NoRoom is the refusal of run's checkpoint of step before it is written: it needs need bytes and
// the store has sp (measured by the caller, spErr when it could not be).
func (s *Store) NoRoom(run string, step int, need int64, sp Space, spErr error) *WriteError {
	return &WriteError{Path: s.path, Run: run, Step: step, Need: need, Space: sp, SpaceErr: spErr, Refused: true, Last: s.lastCheckpoint(run)}
}

// WriteFailed turns err, from a write of run to the store, into a WriteError when the disk failed
// under it (DiskCause), measuring the room left; other errors, and WriteErrors, come back as they
// are.
func (s *Store) WriteFailed(run string, err error) error {
	var we *WriteError
	if err == nil || errors.As(err, &we) {
		return err
	}
	cause := DiskCause(err)
	if cause == "" {
		return err
	}
	sp, spErr := s.Space()
	return &WriteError{Path: s.path, Run: run, Cause: cause, Injected: errors.Is(err, errInjected), Space: sp, SpaceErr: spErr,
		Last: s.lastCheckpoint(run), Err: err}
}

// checkpointFailed is SaveCheckpointFrom's failed write of m: the chunks already committed are
// collected (nothing names them), then err is returned as a WriteError when the disk failed,
// else wrapped with the store's path and the checkpoint.
func (s *Store) checkpointFailed(m *Manifest, err error) error {
	_, _ = s.GC() // best effort: on a full disk bbolt may have no page for it; the next save's GC tries again
	if cause := DiskCause(err); cause != "" {
		sp, spErr := s.Space()
		return &WriteError{Path: s.path, Run: m.Run, Step: m.Step, Written: m.Bytes, Cause: cause, Injected: errors.Is(err, errInjected),
			Space: sp, SpaceErr: spErr, Last: s.lastCheckpoint(m.Run), Err: err}
	}
	return fmt.Errorf("store %s: writing checkpoint %s/%d: %w", s.path, m.Run, m.Step, err)
}

// lastCheckpoint is run's latest checkpoint step, 0 when it has none (or it cannot be read).
func (s *Store) lastCheckpoint(run string) int {
	m, err := s.LatestCheckpoint(run)
	if err != nil {
		return 0
	}
	return m.Step
}

// FaultEnv names a fault-injection hook for testing full disks end to end: with
// AGENTRL_STORE_FAULT=enospc@BYTES (or eio@BYTES, erofs@BYTES) in its environment, a process's
// checkpoint chunk writes fail with that error, as a full disk (an I/O error, a read-only remount)
// would make bbolt's, once BYTES chunk bytes have been written (the transaction that would pass
// BYTES fails whole, as bbolt's would). The failure names itself as injected.
const FaultEnv = "AGENTRL_STORE_FAULT"

var fault struct {
	once    sync.Once
	mu      sync.Mutex
	set     bool
	after   int64 // chunk bytes written before the fault
	written int64
	errno   syscall.Errno
}

// errInjected marks an injected failure in the error chain.
var errInjected = errors.New("injected by " + FaultEnv)

type injectedError struct{ errno syscall.Errno }

func (e injectedError) Error() string        { return e.errno.Error() + " (" + errInjected.Error() + ")" }
func (e injectedError) Is(target error) bool { return target == e.errno || target == errInjected }

// ParseFault reads a FaultEnv value: enospc@BYTES, eio@BYTES or erofs@BYTES.
func ParseFault(v string) (syscall.Errno, int64, error) {
	kind, n, ok := strings.Cut(strings.TrimSpace(v), "@")
	after, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || after < 0 {
		return 0, 0, fmt.Errorf("%s=%q: want enospc@BYTES, eio@BYTES or erofs@BYTES", FaultEnv, v)
	}
	switch strings.ToLower(kind) {
	case "enospc":
		return syscall.ENOSPC, after, nil
	case "eio":
		return syscall.EIO, after, nil
	case "erofs":
		return syscall.EROFS, after, nil
	}
	return 0, 0, fmt.Errorf("%s=%q: want enospc@BYTES, eio@BYTES or erofs@BYTES", FaultEnv, v)
}

// InjectFault makes this process's checkpoint chunk writes fail with errno once after bytes have
// been written from now on (FaultEnv, for tests in the process); restore removes the fault.
func InjectFault(errno syscall.Errno, after int64) (restore func()) {
	fault.once.Do(func() {}) // the environment is not read after this
	fault.mu.Lock()
	defer fault.mu.Unlock()
	fault.set, fault.errno, fault.after, fault.written = true, errno, after, 0
	return func() {
		fault.mu.Lock()
		defer fault.mu.Unlock()
		fault.set = false
	}
}

// writeFault is the injected failure of a transaction writing n chunk bytes, nil when none is
// injected or the bytes fit; the bytes count as written when it is nil.
func (s *Store) writeFault(n int) error {
	fault.once.Do(func() {
		if v := os.Getenv(FaultEnv); v != "" {
			errno, after, err := ParseFault(v)
			if err != nil {
				fmt.Fprintln(os.Stderr, "agentrl-tui: ignoring", err)
				return
			}
			fault.set, fault.errno, fault.after = true, errno, after
		}
	})
	fault.mu.Lock()
	defer fault.mu.Unlock()
	if !fault.set {
		return nil
	}
	if fault.written+int64(n) > fault.after {
		return &os.PathError{Op: "write", Path: s.path, Err: injectedError{fault.errno}}
	}
	fault.written += int64(n)
	return nil
}
