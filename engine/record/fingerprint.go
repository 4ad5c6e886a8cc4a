package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"agentrl/engine/event"
	"agentrl/store"
)

// Fingerprint is what a stored run computed, with its timings left out, as one hash: two runs
// of the same recipe and seed on the same machine have equal fingerprints whatever the machine's
// load, so a change that must not move a run's numbers (a refactoring) is checked by comparing
// the fingerprint of a run made before it with one made after it.
type Fingerprint struct {
	Hash                                          string   // hex SHA-256 of Lines, one per line
	Lines                                         []string // the normalised records, sorted
	Steps, Trajectories, Evaluations, Checkpoints int
	// EvalTrajectories counts the evaluations' stored trajectories, which are not hashed: an
	// evaluation is hashed by its pass@k and per-task counts, as before they were stored, so a
	// run's fingerprint does not depend on eval.store_trajectories.
	EvalTrajectories int
}

// FingerprintOf reads run runID from st: every step's metrics but its timings (names ending in
// _s, and tool_stall_share), every trajectory with its tools' seconds zeroed, every evaluation's
// pass@k and per-task counts, every checkpoint's metrics and the content hashes of its weights
// and moments (their chunks' SHA-256), and how the run ended. Phase times, the run's id, the
// times of day and the evaluations' trajectories (counted in EvalTrajectories) are left out.
func FingerprintOf(st *store.Store, runID string) (Fingerprint, error) {
	var f Fingerprint
	evs, err := Replay(st, runID)
	if err != nil {
		return f, err
	}
	add := func(kind string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		f.Lines = append(f.Lines, kind+" "+string(b))
		return nil
	}
	for _, e := range evs {
		var err error
		switch v := e.(type) {
		case event.StepMetrics:
			f.Steps++
			m := map[string]float64{}
			for k, x := range v.Metrics {
				if !strings.HasSuffix(string(k), "_s") && k != event.MetricToolStallShare {
					m[string(k)] = x
				}
			}
			err = add(fmt.Sprintf("metrics %d", v.Step), m)
		case event.Trajectory:
			if v.Eval {
				f.EvalTrajectories++
				continue
			}
			f.Trajectories++
			v.Turns = slices.Clone(v.Turns)
			for i := range v.Turns {
				v.Turns[i].ToolSeconds = 0
			}
			err = add("trajectory", v)
		case event.Eval:
			f.Evaluations++
			err = add(fmt.Sprintf("eval %d", v.Step), v)
		case event.Checkpoint:
			f.Checkpoints++
			m, merr := st.Manifest(runID, v.Step)
			if merr != nil {
				return f, merr
			}
			err = add(fmt.Sprintf("checkpoint %d", v.Step), struct {
				Metrics          map[string]float64
				Tensors, Moments []store.TensorRef
				DataPosition     int64
				Bytes            int64
				Best             bool
			}{m.Metrics, m.Tensors, m.Optimizer, m.DataPosition, m.Bytes, v.Best})
		case event.RunEnd:
			err = add("end", v)
		}
		if err != nil {
			return f, err
		}
	}
	slices.Sort(f.Lines)
	h := sha256.New()
	for _, l := range f.Lines {
		h.Write([]byte(l + "\n"))
	}
	f.Hash = hex.EncodeToString(h.Sum(nil))
	return f, nil
}
