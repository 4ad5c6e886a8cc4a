package diskspace

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/store"
)

// TestRoomFor is the space check's verdict at the edges: under the checkpoint refuses it, under
// the checkpoint and its margin warns, else it goes ahead; the pages free inside the store file
// count as free.
func TestRoomFor(t *testing.T) {
	const need = 100 << 20
	margin := Margin(need)
	if margin != need/10+64<<20 {
		t.Fatalf("margin %d", margin)
	}
	for _, c := range []struct {
		sp   store.Space
		want Room
	}{
		{store.Space{Disk: need - 1}, RoomNone},
		{store.Space{Disk: need/2 - 1, InFile: need / 2}, RoomNone},
		{store.Space{Disk: need}, RoomLow},
		{store.Space{Disk: need / 2, InFile: need / 2}, RoomLow},
		{store.Space{Disk: need + margin - 1}, RoomLow},
		{store.Space{Disk: need + margin}, RoomOK},
		{store.Space{Disk: 0, InFile: need + margin}, RoomOK},
	} {
		if got := For(need, c.sp); got != c.want {
			t.Errorf("For(%d, %+v) = %d; want %d", need, c.sp, got, c.want)
		}
	}
	if n := StoredBytes([]int64{0, 1, store.ChunkSize, store.ChunkSize + 1}); n != 2*store.ChunkSize+2+5*(bboltPage+72)+4*256 {
		t.Errorf("storedBytes = %d", n)
	}
	const mib = 1 << 20
	for _, c := range []struct {
		sizes  []int64
		stored int
		bytes  int64
		want   int64
	}{
		{[]int64{mib}, 0, 0, 0},                                       // nothing stored: nothing to rewrite
		{[]int64{mib, mib, mib}, 10, 100 * mib, 3 * 2 * 10 * mib},     // three chunks, each next to two of 10 MiB
		{[]int64{mib, mib, mib}, 2, 4 * mib, 4 * mib},                 // at most what is stored
		{[]int64{40 * store.ChunkSize}, 100, 400 * mib, 16 * 8 * mib}, // 4 MiB chunks: 16 in the largest transaction
		{[]int64{16 * mib, 1000}, 100, 400 * mib, 5 * 8 * mib},        // 4 chunks and one of 1000 bytes
	} {
		if got := RewriteBytes(c.sizes, c.stored, c.bytes); got != c.want {
			t.Errorf("RewriteBytes(%v, %d, %d) = %d; want %d", c.sizes, c.stored, c.bytes, got, c.want)
		}
	}
}

// TestCheck: the check's three outcomes on a played disk: room to spare says nothing, room for
// the checkpoint but not its margin warns naming the store and the step, too little refuses it
// with the store's one-line refusal; a disk that cannot be measured warns and lets it go ahead.
func TestCheck(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const need = 10 << 20
	disk := func(free int64) Measure {
		return func(*store.Store) (store.Space, error) {
			return store.Space{Dir: filepath.Dir(st.Path()), Disk: free}, nil
		}
	}
	if w, err := Check(st, disk(need+Margin(need)), "run", 3, need); w != "" || err != nil {
		t.Errorf("room to spare: %q, %v; want nothing", w, err)
	}
	if w, err := Check(st, disk(need), "run", 3, need); err != nil || !strings.Contains(w, "disk space low") || !strings.Contains(w, st.Path()) || !strings.Contains(w, "step 3") {
		t.Errorf("no margin: %q, %v; want a warning naming the store and step 3", w, err)
	}
	var we *store.WriteError
	if w, err := Check(st, disk(need-1), "run", 3, need); w != "" || !errors.As(err, &we) || !we.Refused || we.Need != need || we.Step != 3 {
		t.Errorf("no room: %q, %v; want a refusal of step 3 needing %d", w, err, need)
	}
	unknown := func(*store.Store) (store.Space, error) { return store.Space{}, errors.New("statfs failed") }
	if w, err := Check(st, unknown, "run", 3, need); err != nil || !strings.Contains(w, "unknown (statfs failed)") {
		t.Errorf("unmeasured: %q, %v; want a warning and no error", w, err)
	}
}
