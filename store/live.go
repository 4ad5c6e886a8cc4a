package store

import (
	"bytes"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The live snapshot: bbolt gives the process writing a store an exclusive lock, so no other
// process can open the store while a run writes it. A store opened with Options.Live (a run's)
// therefore publishes, after each change and at most once every LiveInterval, a copy of
// everything but the checkpoint chunks — runs, metrics, evaluations, phases, trajectories,
// checkpoint manifests — to LivePath(path): written whole to a temporary file, then renamed over
// the last, so a reader always opens a complete one. A read-only Open that finds the store locked
// opens that snapshot instead (Store.Live says so), and `runs`, `view` and `compare` read a live
// run from another terminal while it trains; checkpoint tensors stay in the store and load once
// the run has stopped. The writer removes the snapshot when it closes the store.

// LiveInterval is the least time between two live snapshots; a store whose snapshot takes long
// to write waits nine times as long as the last one took, so publishing costs at most a tenth of
// the writer's time.
const LiveInterval = time.Second

// LivePath is the live snapshot of the store at path.
func LivePath(path string) string { return path + ".live" }

// publisher writes the live snapshot when told (kick) and stops on stop.
type publisher struct {
	kick, stop, done chan struct{}
}

func (s *Store) startLive() {
	s.pub = &publisher{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.publish()
	s.changed()
}

// changed tells the publisher the store changed (nothing without one).
func (s *Store) changed() {
	if s.pub == nil {
		return
	}
	select {
	case s.pub.kick <- struct{}{}:
	default:
	}
}

func (s *Store) publish() {
	defer close(s.pub.done)
	for {
		select {
		case <-s.pub.stop:
			return
		case <-s.pub.kick:
		}
		t0 := time.Now()
		_ = s.PublishLive() // a snapshot not written leaves the last one: watchers see less, the run goes on
		took := time.Since(t0)
		select {
		case <-s.pub.stop:
			return
		case <-time.After(max(LiveInterval, 9*took)): // a tenth of the time at most, however big the store
		}
	}
}

// stopLive stops the publisher and removes the snapshot: a reader that has it open keeps reading
// it; a new one opens the store itself, now unlocked.
func (s *Store) stopLive() {
	if s.pub == nil {
		return
	}
	close(s.pub.stop)
	<-s.pub.done
	_ = os.Remove(LivePath(s.path))
	s.pub = nil
}

// PublishLive writes the live snapshot now (see LivePath): every bucket, the checkpoint chunks'
// left empty, in one read transaction of the store, so the snapshot is the store at one commit.
func (s *Store) PublishLive() error {
	if s.readOnly {
		return nil
	}
	dst := LivePath(s.path)
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	out, err := bolt.Open(tmp, 0o644, &bolt.Options{Timeout: time.Second, NoSync: true, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return fmt.Errorf("store %s: live snapshot: %w", s.path, err)
	}
	err = s.db.View(func(src *bolt.Tx) error {
		return out.Update(func(tx *bolt.Tx) error {
			return src.ForEach(func(name []byte, b *bolt.Bucket) error {
				nb, err := tx.CreateBucket(name)
				if err != nil || bytes.Equal(name, bBlobs) {
					return err
				}
				return copyBucket(b, nb)
			})
		})
	})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store %s: live snapshot: %w", s.path, err)
	}
	return nil
}

// copyBucket copies src's keys and nested buckets into dst (keys come in order: pages filled).
func copyBucket(src, dst *bolt.Bucket) error {
	dst.FillPercent = 1
	return src.ForEach(func(k, v []byte) error {
		if v != nil {
			return dst.Put(k, v)
		}
		nb, err := dst.CreateBucket(k)
		if err != nil {
			return err
		}
		return copyBucket(src.Bucket(k), nb)
	})
}

// Live reports whether this store is a running run's live snapshot (a read-only Open of a locked
// store) and when the snapshot was written.
func (s *Store) Live() (bool, time.Time) { return s.liveAt != (time.Time{}), s.liveAt }

// LiveNote is a line for a person reading a live snapshot ("" otherwise).
func (s *Store) LiveNote() string {
	if live, at := s.Live(); live {
		return fmt.Sprintf("store %s is being written by a running run: reading its live snapshot of %s (%s ago; checkpoint tensors load once the run has stopped)",
			s.path, at.Format("15:04:05"), time.Since(at).Round(time.Second))
	}
	return ""
}

// openLive opens the live snapshot of the locked store at path (read-only), or returns nil.
func openLive(path string, timeout time.Duration) *Store {
	lp := LivePath(path)
	st, err := os.Stat(lp)
	if err != nil {
		return nil
	}
	db, err := bolt.Open(lp, 0o644, &bolt.Options{Timeout: timeout, ReadOnly: true})
	if err != nil {
		return nil
	}
	s := &Store{db: db, path: path, readOnly: true, liveAt: st.ModTime()}
	if err := s.checkSchema(); err != nil {
		db.Close()
		return nil
	}
	return s
}
