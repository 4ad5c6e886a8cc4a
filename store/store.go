// Package store keeps everything a run produces in one bbolt file: runs, per-step metrics,
// trajectories, eval results, and checkpoints whose tensors are stored as content-addressed
// chunks (a tensor unchanged between checkpoints — the frozen reference model — is stored once).
//
// Crash safety: bbolt commits are atomic, chunks are written before the manifest that names them,
// and a checkpoint becomes visible only when its manifest is committed; chunks left behind by a
// crash are unreferenced and removed by the next garbage collection.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout this build reads and writes.
const SchemaVersion = 1

// Bucket names.
var (
	bMeta    = []byte("meta")
	bRuns    = []byte("runs")
	bMetrics = []byte("metrics")      // run → step → JSON map
	bEvals   = []byte("evals")        // run → step → JSON Eval
	bPhases  = []byte("phases")       // run → step → JSON map of phase → seconds
	bTraj    = []byte("trajectories") // run → step|task|sample → record
	bCkpt    = []byte("checkpoints")  // run → step → JSON Manifest
	bBlobs   = []byte("blobs")        // sha256 → chunk bytes
	kSchema  = []byte("schema")
	// bEvalTraj holds evaluations' trajectories: run → step|task|sample → record, step the step
	// evaluated (a bucket added within schema 1: an older store gets it when opened for writing).
	bEvalTraj = []byte("eval_trajectories")
)

// ErrInUse is returned when another process holds the store open for writing.
var ErrInUse = errors.New("in use by another process")

// Store is an open store file. Its methods are safe for concurrent use (bbolt serialises writers).
type Store struct {
	db       *bolt.DB
	path     string
	readOnly bool
	pub      *publisher // the live snapshot's publisher (Options.Live), nil without
	liveAt   time.Time  // a live snapshot opened in the store's place: when it was written
}

// Options for Open.
type Options struct {
	ReadOnly bool
	// Timeout bounds the wait for the file lock (default 500ms): a store held by a running run
	// gives ErrInUse quickly instead of hanging (a read-only open then reads the run's live
	// snapshot where it has one: see live.go).
	Timeout time.Duration
	// Live publishes the live snapshot for readers in other processes while the store is open
	// for writing (a run's store).
	Live bool
}

// Open opens (creating, unless read-only) the store at path and checks its schema version.
func Open(path string, opts Options) (*Store, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 500 * time.Millisecond
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	db, err := bolt.Open(path, 0o644, &bolt.Options{
		Timeout: opts.Timeout, ReadOnly: opts.ReadOnly,
		// Checkpoints are hundreds of MB: a hashmap freelist that is not synced on every
		// commit, and growth in large steps, keep bbolt from dominating the write time.
		FreelistType: bolt.FreelistMapType, NoFreelistSync: true,
		// Reserve address space up front so growing the file does not remap (a remap copies
		// every value of the open transaction).
		InitialMmapSize: 4 << 30,
	})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			if opts.ReadOnly {
				if s := openLive(path, opts.Timeout); s != nil {
					return s, nil
				}
			}
			return nil, fmt.Errorf("store %s is %w (a run is writing to it); wait for it to finish, or view it from that run's own UI: %w", path, ErrInUse, err)
		}
		return nil, fmt.Errorf("store %s cannot be opened (corrupted or not a bbolt file?); it was not changed: %w", path, err)
	}
	db.AllocSize = 256 << 20
	s := &Store{db: db, path: path, readOnly: opts.ReadOnly}
	if err := s.checkSchema(); err != nil {
		db.Close()
		return nil, err
	}
	switch {
	case opts.Live && !opts.ReadOnly:
		s.startLive()
	case !opts.ReadOnly:
		// This process holds the lock: a snapshot beside the store is a dead writer's, which a
		// reader would otherwise take for this one's.
		_ = os.Remove(LivePath(path))
	}
	return s, nil
}

func (s *Store) checkSchema() error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("store %s is a bbolt file but not an agentrl store (no meta bucket); it was not changed", s.path)
			}
			return errNoMeta
		}
		v := meta.Get(kSchema)
		if len(v) != 8 {
			return fmt.Errorf("store %s has no readable schema version; it was not changed", s.path)
		}
		if got := binary.BigEndian.Uint64(v); got != SchemaVersion {
			return fmt.Errorf("store %s has schema version %d; this build reads version %d (use a matching agentrl-tui); it was not changed", s.path, got, SchemaVersion)
		}
		return nil
	}
	missing := false // a bucket added after the store was written (same schema: only additions)
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			missing = missing || tx.Bucket(b) == nil
		}
		return check(tx)
	})
	if err == nil && missing && !s.readOnly {
		return s.update(func(tx *bolt.Tx) error {
			for _, b := range allBuckets {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if !errors.Is(err, errNoMeta) {
		return err
	}
	if s.readOnly {
		return fmt.Errorf("store %s is empty", s.path)
	}
	return s.update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(kSchema, u64(SchemaVersion))
	})
}

var errNoMeta = errors.New("no meta bucket")

var allBuckets = [][]byte{bMeta, bRuns, bMetrics, bEvals, bPhases, bTraj, bEvalTraj, bCkpt, bBlobs}

// Close closes the file.
func (s *Store) Close() error {
	s.stopLive()
	return s.db.Close()
}

// update is db.Update, telling the live publisher of a change that committed.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	err := s.db.Update(fn)
	if err == nil {
		s.changed()
	}
	return err
}

// Path is the file's path.
func (s *Store) Path() string { return s.path }

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// Run kinds: a training run (the zero value) or an evaluation-only run.
const (
	KindTrain = ""
	KindEval  = "eval"
	// KindSFT is a supervised fine-tuning run (sft --data): its steps' metrics are the loss
	// (loss, eval_loss), its checkpoints the model and AdamW moments, its "recipe" the options
	// it was started with (RecipeYAML, as JSON), which resume continues with.
	KindSFT = "sft"
)

// Run describes one run: a training run, or an evaluation-only run (Kind KindEval: one
// evaluation of the model or checkpoint that Evaluated names, kept at the checkpoint's step,
// 0 for a model folder).
type Run struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Recipe     string    `json:"recipe"`      // recipe file name
	RecipeYAML string    `json:"recipe_yaml"` // its content
	RecipeHash string    `json:"recipe_hash"`
	Created    time.Time `json:"created"`
	Status     string    `json:"status"` // running | finished | stopped | failed | aborted
	StopReason string    `json:"stop_reason,omitempty"`
	StopDetail string    `json:"stop_detail,omitempty"` // what the stop dropped ("the evaluation of step 15 was dropped …")
	Ended      time.Time `json:"ended,omitzero"`        // when the run ended; zero while it runs
	BestStep   int       `json:"best_step"`
	BestPinned bool      `json:"best_pinned,omitempty"` // BestStep is the user's choice: kept by retention and across resume
	TotalSteps int       `json:"total_steps"`
	Kind       string    `json:"kind,omitempty"`      // KindTrain, KindEval or KindSFT
	Evaluated  string    `json:"evaluated,omitempty"` // an evaluation run's model: "model DIR" or "checkpoint RUN step N"
	EvalSet    string    `json:"eval_set,omitempty"`  // an evaluation run's evaluation set: "heldout", "validation"
	EvalStep   int       `json:"eval_step,omitempty"` // the step an evaluation run's evaluation is kept at
	Grader     string    `json:"grader,omitempty"`    // what judged its answers: reward.grader's name@version ("" before graders were recorded: the verifier)
	// Writer is the process that last wrote the run as running (its start or resume), which
	// Interrupted checks: nil in stores written before writers were recorded.
	Writer *Writer `json:"writer,omitempty"`
}

// PutRun creates or replaces a run's record. A record written with the status running names
// this process as the run's writer (Writer), whatever r says.
func (s *Store) PutRun(r Run) error {
	if r.ID == "" {
		return errors.New("store: run has no id")
	}
	if r.Status == StatusRunning {
		w := ThisProcess()
		r.Writer = &w
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error { return tx.Bucket(bRuns).Put([]byte(r.ID), data) })
}

// FreeRunID is base if the store has no run of that id, else base-2, base-3, … (the first free):
// run ids are a name and the start time to the second, and two runs started in the same second
// in one store (an evaluation right after another, a script's loop) must not share a record. The
// id is taken when the run's record is written (PutRun, as the run starts): two launches in one
// process that both ask before either writes would get the same one (the store's file lock keeps
// a second process out altogether).
func (s *Store) FreeRunID(base string) (string, error) {
	if base == "" {
		return "", errors.New("store: run has no id")
	}
	id := base
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bRuns)
		for n := 2; b.Get([]byte(id)) != nil; n++ {
			id = fmt.Sprintf("%s-%d", base, n)
		}
		return nil
	})
	return id, err
}

// GetRun returns a run by id.
func (s *Store) GetRun(id string) (Run, error) {
	var r Run
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bRuns).Get([]byte(id))
		if v == nil {
			return fmt.Errorf("store %s has no run %q (agentrl-tui runs --store %s lists them)", s.path, id, s.path)
		}
		return json.Unmarshal(v, &r)
	})
	return r, err
}

// Runs lists all runs, oldest first.
func (s *Store) Runs() ([]Run, error) {
	var runs []Run
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bRuns).ForEach(func(_, v []byte) error {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			runs = append(runs, r)
			return nil
		})
	})
	sort.Slice(runs, func(i, j int) bool { return runs[i].Created.Before(runs[j].Created) })
	return runs, err
}

// NewestRun returns the run created last, or an error naming the file when it holds none.
func (s *Store) NewestRun() (Run, error) {
	runs, err := s.Runs()
	if err != nil {
		return Run{}, err
	}
	if len(runs) == 0 {
		return Run{}, fmt.Errorf("the store %s holds no runs", s.path)
	}
	return runs[len(runs)-1], nil
}

// stepBucket returns (creating when writing) the per-run sub-bucket of a top-level bucket.
func stepBucket(tx *bolt.Tx, top []byte, run string, create bool) (*bolt.Bucket, error) {
	b := tx.Bucket(top)
	if b == nil { // a read-only store written before this bucket existed
		if !create {
			return nil, nil
		}
		return nil, fmt.Errorf("store: no %s bucket", top)
	}
	if !create {
		return b.Bucket([]byte(run)), nil
	}
	return b.CreateBucketIfNotExists([]byte(run))
}

// PutMetrics records one step's metrics.
func (s *Store) PutMetrics(run string, step int, m map[string]float64) error {
	return s.putJSON(bMetrics, run, u64(uint64(step)), m)
}

// Metrics returns every step's metrics of a run, by step.
func (s *Store) Metrics(run string) (map[int]map[string]float64, error) {
	return s.stepMaps(bMetrics, run)
}

// PutPhases records how long each phase of one step took, in seconds (rollout, score, …, save).
func (s *Store) PutPhases(run string, step int, seconds map[string]float64) error {
	return s.putJSON(bPhases, run, u64(uint64(step)), seconds)
}

// Phases returns every step's phase times of a run, by step; runs stored before phase times
// were kept have none.
func (s *Store) Phases(run string) (map[int]map[string]float64, error) {
	return s.stepMaps(bPhases, run)
}

// stepMaps reads a bucket of per-step JSON maps.
func (s *Store) stepMaps(top []byte, run string) (map[int]map[string]float64, error) {
	out := map[int]map[string]float64{}
	err := s.forEach(top, run, func(k, v []byte) error {
		var m map[string]float64
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		out[int(binary.BigEndian.Uint64(k))] = m
		return nil
	})
	return out, err
}

// Eval is one evaluation: pass@k by k on the held-out tasks, plus other figures.
type Eval struct {
	Step    int                `json:"step"`
	PassAtK map[int]float64    `json:"pass_at_k"`
	Extra   map[string]float64 `json:"extra,omitempty"`
	// Counts are each held-out task's (samples, correct), in evaluation order, so a later
	// evaluation of the same tasks (a resumed run's, say) can be compared task by task.
	Counts [][2]int `json:"counts,omitempty"`
	// ByLevel is pass@k over the tasks of each difficulty level, when the tasks have levels.
	ByLevel map[string]map[int]float64 `json:"by_level,omitempty"`
	// BySet is pass@k over each evaluation set (data.eval), when there were several.
	BySet map[string]map[int]float64 `json:"by_set,omitempty"`
	// Tasks fingerprints the evaluated tasks (their prompts and answers, in order), so counts are
	// compared only between evaluations of the same tasks.
	Tasks string `json:"tasks,omitempty"`
	// Validation is pass@k on the validation tasks, which chose the best checkpoint and when to
	// stop; absent when the run had none.
	Validation map[int]float64 `json:"validation,omitempty"`
}

// PutEval records an evaluation.
func (s *Store) PutEval(run string, e Eval) error {
	return s.putJSON(bEvals, run, u64(uint64(e.Step)), e)
}

// Evals returns a run's evaluations in step order.
func (s *Store) Evals(run string) ([]Eval, error) {
	var out []Eval
	err := s.forEach(bEvals, run, func(_, v []byte) error {
		var e Eval
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

func (s *Store) putJSON(top []byte, run string, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b, err := stepBucket(tx, top, run, true)
		if err != nil {
			return err
		}
		return b.Put(key, data)
	})
}

func (s *Store) forEach(top []byte, run string, fn func(k, v []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b, _ := stepBucket(tx, top, run, false)
		if b == nil {
			return nil
		}
		return b.ForEach(fn)
	})
}
