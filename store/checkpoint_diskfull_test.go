package store

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"agentrl/store/safetensors"
)

// randomTensor is n float32 values of noise from seed: chunks that no other seed's share.
func randomTensor(name string, n int, seed uint64) *safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 99))
	d := make([]byte, 4*n)
	for i := 0; i < len(d); i += 8 {
		v := rng.Uint64()
		for k := 0; k < 8 && i+k < len(d); k++ {
			d[i+k] = byte(v >> (8 * k))
		}
	}
	return &safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: []int{n}, Data: d}
}

// ckptOf is a checkpoint of step: two random tensors of 3 MiB (weights and a moment), 6 MiB in all.
func ckptOf(run string, step int) *Checkpoint {
	return &Checkpoint{Manifest: Manifest{Run: run, Step: step},
		Weights:  []*safetensors.Tensor{randomTensor("w", 3<<18, uint64(step))},
		Moments:  []*safetensors.Tensor{randomTensor("m.w", 3<<18, uint64(step)<<32)},
		FileData: map[string][]byte{"config.json": []byte(`{"step":` + fmt.Sprint(step) + `}`)}}
}

// mountTmpfs mounts a tmpfs of size bytes on a new folder for the test (unmounted at its end), or
// skips the test saying why when this process may not mount one (not root, no CAP_SYS_ADMIN, a
// container without the mount syscall).
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root; TestCheckpointInjectedDiskFull covers the same path with an injected ENOSPC")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("mount -t tmpfs -o size=%d tmpfs %s was refused (%v); TestCheckpointInjectedDiskFull covers the same path with an injected ENOSPC", size, dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// resizeTmpfs remounts the tmpfs at dir with a new size: space freed.
func resizeTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("remounting %s with size %d: %v", dir, size, err)
	}
}

// liveChunks is the number of distinct chunks the run's manifests name.
func liveChunks(t *testing.T, s *Store, run string) int {
	t.Helper()
	all, err := s.Checkpoints(run)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, m := range all {
		for _, h := range m.allChunks() {
			live[h] = true
		}
	}
	return len(live)
}

// checkFailedSave checks what a checkpoint write the disk refused leaves: a *WriteError for the
// step with cause, whose message is one line naming the path and the free space; the earlier
// checkpoints all there and loading; no chunk that no manifest names. It returns the error.
func checkFailedSave(t *testing.T, s *Store, path string, err error, step, last int, cause string) *WriteError {
	t.Helper()
	var we *WriteError
	if !errors.As(err, &we) {
		t.Fatalf("saving checkpoint %d: %v (%T); want a *WriteError", step, err, err)
	}
	msg := err.Error()
	t.Logf("the failed save says: %s", msg)
	if we.Step != step || we.Last != last || we.Path != path || we.Cause != cause || we.Refused {
		t.Errorf("write error: step %d, last %d, path %s, cause %q, refused %v; want %d, %d, %s, %q, false", we.Step, we.Last, we.Path, we.Cause, we.Refused, step, last, path, cause)
	}
	if strings.Contains(msg, "\n") || !strings.Contains(msg, path) || !strings.Contains(msg, "free") ||
		!strings.Contains(msg, fmt.Sprintf("checkpoint of step %d is intact", last)) || !strings.Contains(msg, "agentrl-tui resume --store "+path+" r") {
		t.Errorf("the message is not one line naming the path, the free space, the intact checkpoint and resume: %q", msg)
	}
	all, lerr := s.Checkpoints("r")
	if lerr != nil || len(all) != last || all[len(all)-1].Step != last {
		t.Fatalf("after the failure the store lists %d checkpoints (%v); want steps 1 … %d", len(all), lerr, last)
	}
	if err := s.Verify("r", last); err != nil {
		t.Errorf("the last good checkpoint does not verify: %v", err)
	}
	if n, _ := s.BlobCount(); n != liveChunks(t, s, "r") {
		t.Errorf("the store holds %d chunks, its manifests name %d: the failed checkpoint's were not collected", n, liveChunks(t, s, "r"))
	}
	return we
}

// TestCheckpointDiskFullTmpfs fills a 20 MiB tmpfs with 6 MiB checkpoints of noise until bbolt
// fails a write with ENOSPC (the third or fourth: the file's pages and its growth take their
// share). The save returns a WriteError naming the path and the space left; the store lists and
// loads the checkpoints before it, holds no chunk of the failed one, reopens after being closed,
// and once the tmpfs is remounted larger (space freed) takes the failed step's checkpoint.
func TestCheckpointDiskFullTmpfs(t *testing.T) {
	dir := mountTmpfs(t, 20<<20)
	path := filepath.Join(dir, "runs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	step := 1
	for ; ; step++ {
		if step > 8 {
			t.Fatal("8 checkpoints of 6 MiB fitted a 20 MiB tmpfs")
		}
		if err = s.SaveCheckpoint(ckptOf("r", step)); err != nil {
			break
		}
	}
	if step < 2 {
		t.Fatalf("the first checkpoint failed: %v", err)
	}
	we := checkFailedSave(t, s, path, err, step, step-1, CauseNoSpace)
	if we.SpaceErr != nil || we.Space.Disk > 6<<20 {
		t.Errorf("measured %+v (%v) after ENOSPC; want under one checkpoint free on the disk", we.Space, we.SpaceErr)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{}); err != nil {
		t.Fatalf("the store does not reopen after the disk filled: %v", err)
	}
	if _, err := s.LoadCheckpoint("r", step-1); err != nil {
		t.Fatalf("the last good checkpoint does not load after reopening: %v", err)
	}
	resizeTmpfs(t, dir, 64<<20)
	if err := s.SaveCheckpoint(ckptOf("r", step)); err != nil {
		t.Fatalf("with room again, checkpoint %d: %v", step, err)
	}
	if err := s.Verify("r", step); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointInjectedDiskFull is the same on any machine: an injected ENOSPC (the store's
// FaultEnv hook, here InjectFault) fails the second checkpoint's first transaction that would
// pass 8 MiB of chunk bytes. Then an EIO and a read-only file system (EROFS) name their own
// cause; with the fault gone, the step saves.
func TestCheckpointInjectedDiskFull(t *testing.T) {
	s, path := openTemp(t)
	restore := InjectFault(syscall.ENOSPC, 8<<20)
	defer func() { restore() }()
	if err := s.SaveCheckpoint(ckptOf("r", 1)); err != nil {
		t.Fatal(err)
	}
	err := s.SaveCheckpoint(ckptOf("r", 2))
	we := checkFailedSave(t, s, path, err, 2, 1, CauseNoSpace)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "injected by "+FaultEnv) {
		t.Errorf("the error %q does not unwrap to ENOSPC or say it was injected", err)
	}
	if we.SpaceErr != nil || we.Space.Disk <= 0 {
		t.Errorf("space after the failure: %+v, %v", we.Space, we.SpaceErr)
	}
	for _, c := range []struct {
		errno syscall.Errno
		cause string
	}{{syscall.EIO, CauseIO}, {syscall.EROFS, CauseReadOnly}} {
		restore()
		restore = InjectFault(c.errno, 1<<20)
		checkFailedSave(t, s, path, s.SaveCheckpoint(ckptOf("r", 2)), 2, 1, c.cause)
	}
	restore()
	if err := s.SaveCheckpoint(ckptOf("r", 2)); err != nil {
		t.Fatalf("with the fault gone: %v", err)
	}
	if err := s.Verify("r", 2); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointSourceErrorIsNotADiskError: a tensor that fails to be made (the caller's error)
// comes back as it is, not as a disk failure, and leaves no chunk behind.
func TestCheckpointSourceErrorIsNotADiskError(t *testing.T) {
	s, _ := openTemp(t)
	boom := errors.New("the device lost the tensor")
	n := 0
	src := func() (*safetensors.Tensor, error) {
		n++
		if n == 3 {
			return nil, boom
		}
		return randomTensor(fmt.Sprint("t", n), 1<<20, uint64(n)), nil
	}
	err := s.SaveCheckpointFrom(Manifest{Run: "r", Step: 1}, src, nil, nil)
	var we *WriteError
	if !errors.Is(err, boom) || errors.As(err, &we) {
		t.Fatalf("got %v; want the source's own error", err)
	}
	if c, _ := s.BlobCount(); c != 0 {
		t.Errorf("%d chunks left behind by a failed checkpoint", c)
	}
}

// TestDiskCause classifies the errors a full, read-only or failing disk gives, wrapped as the
// os and bbolt packages wrap them, and as text alone (bbolt's failed resize).
func TestDiskCause(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "write", Path: "/x/runs.db", Err: syscall.ENOSPC}, CauseNoSpace},
		{fmt.Errorf("store: %w", &fs.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}), CauseQuota},
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.EROFS}, CauseReadOnly},
		{fmt.Errorf("fdatasync: %w", syscall.EIO), CauseIO},
		{errors.New("file resize error: truncate /x/runs.db: no space left on device"), CauseNoSpace},
		{errors.New("tensor w: shape mismatch"), ""},
		{nil, ""},
	} {
		if got := DiskCause(c.err); got != c.want {
			t.Errorf("DiskCause(%v) = %q; want %q", c.err, got, c.want)
		}
	}
}

// TestWriteErrorMessage: each kind of failure is one line with the path, the bytes needed and
// free (in both units), what is intact and the command that continues.
func TestWriteErrorMessage(t *testing.T) {
	sp := Space{Dir: "/data", Disk: 1258291, InFile: 4096}
	for _, c := range []struct {
		name string
		e    WriteError
		want []string
	}{
		{"refused", WriteError{Path: "/data/runs.db", Run: "r1", Step: 3, Need: 8283136, Space: sp, Refused: true, Last: 2},
			[]string{"no room for the checkpoint of step 3 in the store /data/runs.db", "it needs 7.9 MiB (8283136 bytes)",
				"the disk has 1.2 MiB (1262387 bytes) free (4.0 KiB of it inside the store file)", "nothing was written and the checkpoint of step 2 is intact",
				"keep fewer checkpoints", "agentrl-tui resume --store /data/runs.db r1"}},
		{"enospc", WriteError{Path: "/data/runs.db", Run: "r1", Step: 3, Need: 8283136, Space: Space{}, Cause: CauseNoSpace, Last: 2},
			[]string{"the checkpoint of step 3 failed in the store /data/runs.db: no space left on device", "it needs 7.9 MiB (8283136 bytes)",
				"the disk has 0 B (0 bytes) free", "its partial chunks were dropped and the checkpoint of step 2 is intact", "free space there, then agentrl-tui resume"}},
		{"erofs, no checkpoint yet", WriteError{Path: "/data/runs.db", Run: "r1", Step: 1, Need: 100, Space: sp, Cause: CauseReadOnly},
			[]string{"read-only file system", "the run has no checkpoint yet", "remount that file system read-write"}},
		{"eio, another write", WriteError{Path: "/data/runs.db", Run: "r1", Space: sp, Cause: CauseIO, Last: 4},
			[]string{"a store write failed in the store /data/runs.db: input/output error", "it needs more than is free", "check the disk (dmesg)", "checkpoint of step 4 is intact"}},
		{"space unknown", WriteError{Path: "/data/runs.db", Run: "r1", Step: 2, Need: 5 << 30, SpaceErr: errors.New("statfs /data:\nno such file"), Refused: true, Last: 1},
			[]string{"it needs 5.0 GiB (5368709120 bytes)", "the free space is unknown (statfs /data: no such file)"}},
	} {
		msg := c.e.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: the message spans lines: %q", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q\nlacks %q", c.name, msg, w)
			}
		}
	}
}

// TestSpace: the store's folder's free space is statfs's, and the pages a deleted checkpoint's
// chunks leave are counted free inside the file.
func TestSpace(t *testing.T) {
	s, path := openTemp(t)
	sp, err := s.Space()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		t.Fatal(err)
	}
	if want := int64(st.Bavail) * int64(st.Bsize); sp.Dir != filepath.Dir(path) || sp.Disk <= 0 || abs(sp.Disk-want) > 64<<20 {
		t.Errorf("Space() = %+v; statfs says %d free in %s", sp, want, filepath.Dir(path))
	}
	for step := 1; step <= 2; step++ {
		if err := s.SaveCheckpoint(ckptOf("r", step)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.Space()
	if _, err := s.Retain("r", "best", 0, 1); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Space()
	t.Logf("free inside the file: %s before dropping a 6 MiB checkpoint, %s after", HumanBytes(before.InFile), HumanBytes(after.InFile))
	if after.InFile-before.InFile < 6<<20 {
		t.Errorf("dropping a 6 MiB checkpoint freed %d bytes inside the file; want at least 6 MiB", after.InFile-before.InFile)
	}
	if _, err := DiskFree(filepath.Join(path, "no", "such")); err == nil {
		t.Error("DiskFree of a missing folder gave no error")
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestParseFault reads the fault-injection hook's values.
func TestParseFault(t *testing.T) {
	for v, want := range map[string]syscall.Errno{"enospc@100": syscall.ENOSPC, "EIO@0": syscall.EIO, " erofs@5 ": syscall.EROFS} {
		if errno, _, err := ParseFault(v); err != nil || errno != want {
			t.Errorf("ParseFault(%q) = %v, %v; want %v", v, errno, err, want)
		}
	}
	for _, v := range []string{"enospc", "enospc@-1", "full@10", "enospc@1k"} {
		if _, _, err := ParseFault(v); err == nil {
			t.Errorf("ParseFault(%q) took it", v)
		}
	}
}
