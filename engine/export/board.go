// Package export writes a run's numbers in the formats the field reads: TensorBoard event files
// (Board, fed a live run's event stream through Tee, or a stored run's replay by WriteBoard), and
// tables of a stored run, one row per step of its metrics (CSV, Parquet) and one row per trajectory
// (Parquet, JSON Lines). docs/export.md is the schema of each, and a contract: a later version
// adds tags and columns, and renames or removes none.
package export

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/record"
	"agentrl/store"
	"agentrl/store/tfevents"
)

// HistogramBuckets is how many buckets a step's reward and length histograms have at most.
const HistogramBuckets = 30

// The tags of the values a Board writes: every step metric as train/NAME, the step's phase
// times as time/PHASE (seconds), the training trajectories' reward and lengths as histograms, and
// each evaluation's pass@k, over all its sets, per set, per task level and on the validation tasks.
const (
	TagMetric       = "train/"                // + the metric's name
	TagPhase        = "time/"                 // + the phase's name
	TagReward       = "rollout/reward"        // histogram of the trained trajectories' total reward
	TagTokens       = "rollout/tokens"        // histogram of their lengths: prompt, response and tool outputs
	TagPolicyTokens = "rollout/policy_tokens" // histogram of the tokens the policy wrote (the trained ones)
	tagPassAtK      = "eval/pass@"
	tagSetPassAtK   = "eval_set/"   // + set + /pass@k
	tagLevelPassAtK = "eval_level/" // + level + /pass@k
	tagValidPassAtK = "validation/pass@"
)

// Board writes a run's events as TensorBoard scalars and histograms into ROOT/RUN_ID/, RUN_ID
// the run's id from its RunStart event. What the folder's event files already hold is kept: a
// value is written only at a step past the last its tag has there, so a resumed run (or a stored
// run written again) appends without repeating a step. A step's phase times and histograms are
// written when the stream moves to another step, or at Close.
type Board struct {
	root string
	now  func(step int) time.Time // the wall time of a value at step
	dir  string
	w    *tfevents.Writer
	last map[string]int64
	// The step whose phase times and trajectories are being gathered.
	step    int
	pending bool
	phases  map[string]float64
	rewards []float64
	tokens  []float64
	policy  []float64
	written int
}

// NewBoard writes under root; now gives the wall time of a value at a step (nil: the time it is
// written).
func NewBoard(root string, now func(step int) time.Time) *Board {
	if now == nil {
		now = func(int) time.Time { return time.Now() }
	}
	return &Board{root: root, now: now}
}

// Dir is the run's folder, "" before the run's start.
func (b *Board) Dir() string { return b.dir }

// Written counts the values written (each scalar and each histogram one).
func (b *Board) Written() int { return b.written }

// Observe writes what e adds; events before the run's RunStart are ignored.
func (b *Board) Observe(e event.Event) error {
	if s, ok := e.(event.RunStart); ok {
		return b.start(s.RunID)
	}
	if b.dir == "" {
		return nil
	}
	switch e := e.(type) {
	case event.Phase:
		if err := b.at(e.Step); err != nil {
			return err
		}
		b.phases[e.Phase] += e.Seconds
	case event.Trajectory:
		if e.Eval || e.Paused || e.IsDropped() {
			return nil // not trained in this step
		}
		if err := b.at(e.Step); err != nil {
			return err
		}
		b.rewards = append(b.rewards, e.Reward.Total)
		b.tokens = append(b.tokens, float64(e.Tokens))
		if len(e.Pieces) > 0 {
			b.policy = append(b.policy, float64(len(e.Pieces)))
		}
	case event.StepMetrics:
		if err := b.at(e.Step); err != nil {
			return err
		}
		names := make([]string, 0, len(e.Metrics))
		for m := range e.Metrics {
			names = append(names, string(m))
		}
		sort.Strings(names)
		vs := make([]tfevents.Value, len(names))
		for i, n := range names {
			vs[i] = tfevents.Scalar(TagMetric+n, e.Metrics[event.Metric(n)])
		}
		return b.write(e.Step, vs)
	case event.Eval:
		if err := b.at(e.Step); err != nil {
			return err
		}
		return b.write(e.Step, evalValues(e))
	case event.RunEnd:
		return b.flushStep()
	}
	return nil
}

// evalValues are an evaluation's pass@k, k ascending: over all its sets, then per set, per level
// and on the validation tasks.
func evalValues(e event.Eval) []tfevents.Value {
	var vs []tfevents.Value
	add := func(prefix, suffix string, p map[int]float64) {
		for _, k := range sortedKs(p) {
			vs = append(vs, tfevents.Scalar(prefix+strconv.Itoa(k)+suffix, p[k]))
		}
	}
	add(tagPassAtK, "", e.PassAtK)
	for _, set := range e.Sets() {
		add(tagSetPassAtK+set+"/pass@", "", e.BySet[set])
	}
	for _, l := range e.Levels() {
		add(tagLevelPassAtK+l+"/pass@", "", e.ByLevel[l])
	}
	add(tagValidPassAtK, "", e.Validation)
	return vs
}

func sortedKs(p map[int]float64) []int {
	ks := make([]int, 0, len(p))
	for k := range p {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// start reads what the run's folder holds already.
func (b *Board) start(runID string) error {
	dir := filepath.Join(b.root, runID)
	if dir == b.dir {
		return nil
	}
	if err := b.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	last, err := tfevents.LastSteps(dir)
	if err != nil {
		return fmt.Errorf("the event files already in %s: %w (move them away to start the run's logs afresh)", dir, err)
	}
	b.dir, b.last = dir, last
	return nil
}

// at moves the gathering of phase times and trajectories to step, writing the previous step's.
func (b *Board) at(step int) error {
	if b.pending && b.step == step {
		return nil
	}
	if err := b.flushStep(); err != nil {
		return err
	}
	b.step, b.pending, b.phases = step, true, map[string]float64{}
	return nil
}

// flushStep writes the gathered step's phase times and histograms.
func (b *Board) flushStep() error {
	if !b.pending {
		return nil
	}
	var vs []tfevents.Value
	for _, name := range phaseOrder(b.phases) {
		vs = append(vs, tfevents.Scalar(TagPhase+name, b.phases[name]))
	}
	for _, h := range []struct {
		tag    string
		values []float64
	}{{TagReward, b.rewards}, {TagTokens, b.tokens}, {TagPolicyTokens, b.policy}} {
		if hist := tfevents.NewHistogram(h.values, HistogramBuckets); hist != nil {
			vs = append(vs, tfevents.Value{Tag: h.tag, Histo: hist})
		}
	}
	step := b.step
	b.pending, b.phases, b.rewards, b.tokens, b.policy = false, nil, nil, nil, nil
	return b.write(step, vs)
}

// phaseOrder is the names of phases in the order a step runs them, any other after them sorted.
func phaseOrder(phases map[string]float64) []string {
	var out []string
	for _, name := range event.Phases() {
		if _, ok := phases[name]; ok {
			out = append(out, name)
		}
	}
	var rest []string
	for name := range phases {
		if !contains(event.Phases(), name) {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// write writes the values of vs whose tag has no value at step or later yet, as one event.
func (b *Board) write(step int, vs []tfevents.Value) error {
	kept := vs[:0:0]
	for _, v := range vs {
		if last, ok := b.last[v.Tag]; !ok || int64(step) > last {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	if b.w == nil {
		w, err := tfevents.Create(b.dir, time.Now())
		if err != nil {
			return err
		}
		b.w = w
	}
	if err := b.w.Write(tfevents.Event{WallTime: tfevents.Seconds(b.now(step)), Step: int64(step), Values: kept}); err != nil {
		return fmt.Errorf("%s: %w", b.w.Path(), err)
	}
	for _, v := range kept {
		b.last[v.Tag] = int64(step)
	}
	b.written += len(kept)
	return nil
}

// Flush makes what was written readable by TensorBoard.
func (b *Board) Flush() error {
	if b.w == nil {
		return nil
	}
	if err := b.w.Flush(); err != nil {
		return fmt.Errorf("%s: %w", b.w.Path(), err)
	}
	return nil
}

// Close writes the gathered step and closes the event file.
func (b *Board) Close() error {
	err := b.flushStep()
	if b.w != nil {
		if cerr := b.w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%s: %w", b.w.Path(), cerr)
		}
		b.w = nil
	}
	return err
}

// WriteBoard writes a stored run's TensorBoard logs into root/RUN_ID/ from its replay (what the
// workbench shows of it), each value at the time its step ended: the run's start plus the phase
// times up to it. Steps already in the folder's event files are kept as they are (a second export
// writes nothing). It returns the board, for its folder and count.
func WriteBoard(st *store.Store, runID, root string) (*Board, error) {
	run, err := st.GetRun(runID)
	if err != nil {
		return nil, err
	}
	evs, err := record.Replay(st, runID)
	if err != nil {
		return nil, err
	}
	evals, err := st.Evals(runID)
	if err != nil {
		return nil, err
	}
	validation := map[int]map[int]float64{} // the replay's evaluations carry no validation pass@k
	for _, e := range evals {
		validation[e.Step] = e.Validation
	}
	clock, err := storedClock(st, run)
	if err != nil {
		return nil, err
	}
	b := NewBoard(root, clock)
	for _, e := range evs {
		if ev, ok := e.(event.Eval); ok && ev.Validation == nil {
			ev.Validation = validation[ev.Step]
			e = ev
		}
		if err := b.Observe(e); err != nil {
			b.Close()
			return b, err
		}
	}
	return b, b.Close()
}

// storedClock is the time each step of a stored run ended: its start plus the phase times of the
// steps up to it (the time between a stop and its resume is not kept).
func storedClock(st *store.Store, run store.Run) (func(int) time.Time, error) {
	phases, err := st.Phases(run.ID)
	if err != nil {
		return nil, err
	}
	steps := make([]int, 0, len(phases))
	for s := range phases {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	ends := make([]float64, len(steps)) // seconds from the start to the end of steps[i]
	var total float64
	for i, s := range steps {
		for _, sec := range phases[s] {
			total += sec
		}
		ends[i] = total
	}
	return func(step int) time.Time {
		i := sort.SearchInts(steps, step+1) // the steps up to step
		var sec float64
		if i > 0 {
			sec = ends[i-1]
		}
		return run.Created.Add(time.Duration(sec * float64(time.Second)))
	}, nil
}
