package store

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// TrajectoryRecord is one finished trajectory as the store keeps it: index fields for browsing
// and the engine's own JSON (Data), stored gzip-compressed. A training step's trajectories and an
// evaluation's (Eval; Step is the step evaluated) are kept apart, so that the same step, task and
// sample never name two of them.
type TrajectoryRecord struct {
	Step    int     `json:"step"`
	TaskID  string  `json:"task_id"`
	Sample  int     `json:"sample"`
	Reward  float64 `json:"reward"`
	Correct bool    `json:"correct"`
	Hinted  bool    `json:"hinted"`
	Eval    bool    `json:"eval,omitempty"`
	Data    []byte  `json:"-"`
}

// trajKey orders trajectories by step, then task, then sample.
func trajKey(step int, task string, sample int) []byte {
	k := make([]byte, 0, 16+len(task))
	k = binary.BigEndian.AppendUint64(k, uint64(step))
	k = append(k, task...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(sample))
}

type storedTraj struct {
	TrajectoryRecord
	Gz []byte `json:"gz"`
}

// PutTrajectories stores a step's trajectories in one transaction: the training ones where
// Trajectories reads them, the evaluation ones (Eval) where EvalTrajectories does.
func (s *Store) PutTrajectories(run string, recs []TrajectoryRecord) error {
	type kv struct {
		top  []byte
		k, v []byte
	}
	rows := make([]kv, 0, len(recs))
	for _, r := range recs {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(r.Data)
		zw.Close()
		v, err := json.Marshal(storedTraj{TrajectoryRecord: r, Gz: buf.Bytes()})
		if err != nil {
			return err
		}
		top := bTraj
		if r.Eval {
			top = bEvalTraj
		}
		rows = append(rows, kv{top, trajKey(r.Step, r.TaskID, r.Sample), v})
	}
	return s.update(func(tx *bolt.Tx) error {
		for _, r := range rows {
			b, err := stepBucket(tx, r.top, run, true)
			if err != nil {
				return err
			}
			if err := b.Put(r.k, r.v); err != nil {
				return err
			}
		}
		return nil
	})
}

func decodeTraj(v []byte) (TrajectoryRecord, error) {
	var st storedTraj
	if err := json.Unmarshal(v, &st); err != nil {
		return TrajectoryRecord{}, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(st.Gz))
	if err != nil {
		return TrajectoryRecord{}, fmt.Errorf("trajectory %s/%d: %w", st.TaskID, st.Sample, err)
	}
	st.Data, err = io.ReadAll(zr)
	return st.TrajectoryRecord, err
}

// Trajectories returns the training trajectories of one step (step < 0: all steps), in key order.
func (s *Store) Trajectories(run string, step int) ([]TrajectoryRecord, error) {
	return s.trajectories(bTraj, run, step)
}

// EvalTrajectories returns the trajectories of the evaluation of one step (step < 0: of every
// evaluation), in key order; runs stored before evaluations kept theirs, or with
// eval.store_trajectories off, have none.
func (s *Store) EvalTrajectories(run string, step int) ([]TrajectoryRecord, error) {
	return s.trajectories(bEvalTraj, run, step)
}

func (s *Store) trajectories(top []byte, run string, step int) ([]TrajectoryRecord, error) {
	var out []TrajectoryRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		b, _ := stepBucket(tx, top, run, false)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var prefix []byte
		if step >= 0 {
			prefix = binary.BigEndian.AppendUint64(nil, uint64(step))
		}
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodeTraj(v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// TrajectoriesByTask returns one task's trajectories across all steps.
func (s *Store) TrajectoriesByTask(run, task string) ([]TrajectoryRecord, error) {
	all, err := s.Trajectories(run, -1)
	if err != nil {
		return nil, err
	}
	var out []TrajectoryRecord
	for _, r := range all {
		if r.TaskID == task {
			out = append(out, r)
		}
	}
	return out, nil
}

// ForEachTrajectory calls fn with each stored trajectory of run from step from to step to (to < 0:
// to the last), in key order, decoding one at a time: the training ones, or with eval the
// evaluations' (their step the step evaluated). An export reads a run this way without holding
// all of its trajectories in memory.
func (s *Store) ForEachTrajectory(run string, eval bool, from, to int, fn func(TrajectoryRecord) error) error {
	top := bTraj
	if eval {
		top = bEvalTraj
	}
	return s.db.View(func(tx *bolt.Tx) error {
		b, _ := stepBucket(tx, top, run, false)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, uint64(max(from, 0)))); k != nil; k, v = c.Next() {
			if to >= 0 && binary.BigEndian.Uint64(k) > uint64(to) {
				break
			}
			r, err := decodeTraj(v)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
}
