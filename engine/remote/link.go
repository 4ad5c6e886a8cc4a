package remote

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/store/safetensors"
)

// LinkConfig is what a run's rollout on its engines needs: the fleet's configuration, the folder
// the policy is written into for the engines, the policy and its files, the label of its weights,
// the trainer's own log-probs of the probe, and where the engines event goes.
type LinkConfig struct {
	Fleet      Config
	Dir        string            // the folder the engines read the policy from
	Policy     *model.Params     // the weights written for them
	ModelFiles map[string][]byte // config.json and tokenizer files written beside them
	DType      safetensors.DType // the weights' dtype in the folder (bf16 unless f32 is asked)
	RunID      string            // labels each push: RUNID-stepN
	Start      int               // the run's first step: the weights pushed at the open are step Start-1's
	// Encode tokenizes the probe; Score gives the trainer's next-token log-probs of ids (the
	// first position has none).
	Encode    func(string) []int32
	Score     func(ids []int32) ([]float32, error)
	Tolerance float64
	// Emit receives the engines event while trajectories generate and after each push.
	Emit func(event.Engines)
}

// Link is a run's rollout on its engines: the fleet, the policy written for the engines and
// pushed to them after each update, each push probed, and the engines event's rates.
type Link struct {
	Fleet     *Fleet
	cfg       LinkConfig
	failovers int64
	weights   atomic.Int64 // the step whose update the engines were last given

	// mu guards the engines event's state: when the last went out, each engine's counters then
	// and the rate it showed.
	mu   sync.Mutex
	last time.Time
	prev []EngineStats
	rate []float64
}

// enginesTick is the most often an engines event goes out while trajectories generate.
const enginesTick = 2 * time.Second

// Open makes the fleet, writes the policy for it, tells each engine to load it and checks that
// each serves it (the probe's token ids and log-probs): an engine that does not stops the run
// before its first step, named.
func Open(cfg LinkConfig) (*Link, error) {
	l := &Link{cfg: cfg}
	fc := cfg.Fleet
	fc.Observe = l.tick // l.Fleet is set below, before any request
	fleet, err := New(fc)
	if err != nil {
		return nil, err
	}
	l.Fleet = fleet
	l.weights.Store(int64(cfg.Start - 1))
	ctx := context.Background()
	if err := fleet.ResolveModels(ctx); err != nil {
		return nil, err
	}
	if err := fleet.CheckReloadFolders(cfg.Dir); err != nil {
		return nil, fmt.Errorf("engine: rollout.engines: %w", err)
	}
	probe, err := l.probe()
	if err != nil {
		return nil, err
	}
	if err := l.write(); err != nil {
		return nil, err
	}
	rep := fleet.Push(ctx, cfg.Dir, l.version(cfg.Start-1), probe)
	for _, ch := range rep.Checks {
		if ch.Err != nil {
			return nil, fmt.Errorf("engine: rollout.engines: %s: %w", ch.Engine, ch.Err)
		}
	}
	if _, err := fleet.Verify(ctx, probe); err != nil {
		return nil, fmt.Errorf("engine: rollout.engines: %w", err)
	}
	return l, nil
}

// version labels the weights after step's update.
func (l *Link) version(step int) string { return fmt.Sprintf("%s-step%d", l.cfg.RunID, step) }

// write writes the policy into the engines' folder.
func (l *Link) write() error {
	return WriteWeights(l.cfg.Dir, l.cfg.Policy, l.cfg.ModelFiles, l.cfg.DType, 4<<30)
}

// probe is the probe with the trainer's own log-probs.
func (l *Link) probe() (Probe, error) {
	ids := l.cfg.Encode(ProbeText)
	next, err := l.cfg.Score(ids)
	if err != nil {
		return Probe{}, fmt.Errorf("engine: scoring the engines' probe: %w", err)
	}
	lps := []float64{math.NaN()}
	for _, v := range next[:len(ids)-1] {
		lps = append(lps, float64(v))
	}
	return Probe{Text: ProbeText, IDs: ids, LogProbs: lps, Tolerance: l.cfg.Tolerance}, nil
}

// Synced is what a push after an update found: the largest probe difference, the engines out of
// the rotation, the requests moved to another engine since the last push, the time it took, and
// each engine's failure.
type Synced struct {
	MaxDiff, Tolerance float64
	Down               int
	Failovers          int64
	Seconds            float64
	Failed             []Check
}

// Sync is the sync phase's part for the engines: the updated policy written, each engine told to
// load it and probed. An engine that fails leaves the rotation and the run goes on with the others.
func (l *Link) Sync(step int) (Synced, error) {
	t0 := time.Now()
	if err := l.write(); err != nil {
		return Synced{}, err
	}
	probe, err := l.probe()
	if err != nil {
		return Synced{}, err
	}
	rep := l.Fleet.Push(context.Background(), l.cfg.Dir, l.version(step), probe)
	l.weights.Store(int64(step))
	l.cfg.Emit(l.State(event.EnginesSync))
	st := l.Fleet.Stats()
	s := Synced{MaxDiff: rep.MaxDiff, Tolerance: probe.Tolerance, Down: rep.Down, Failovers: st.Failovers - l.failovers, Seconds: time.Since(t0).Seconds()}
	l.failovers = st.Failovers
	for _, ch := range rep.Checks {
		if ch.Err != nil {
			s.Failed = append(s.Failed, ch)
		}
	}
	return s, nil
}

// Generated is the tokens the engines have generated for the run so far (0 for a nil Link: the
// run generates locally).
func (l *Link) Generated() int64 {
	if l == nil {
		return 0
	}
	var n int64
	for _, e := range l.Fleet.Engines() {
		n += e.Tokens
	}
	return n
}

// State is the engines event for phase, each engine's rate over its busy time since the last
// event (over the run when that was under a second: the rate shown stays until one is measured).
func (l *Link) State(phase string) event.Engines {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.Fleet.Engines()
	if l.rate == nil {
		l.rate, l.prev = make([]float64, len(now)), make([]EngineStats, len(now))
	}
	ev := event.Engines{Weights: int(l.weights.Load()), Phase: phase}
	for i, s := range now {
		if busy := s.Busy - l.prev[i].Busy; busy >= time.Second {
			l.rate[i] = float64(s.Tokens-l.prev[i].Tokens) / busy.Seconds()
			l.prev[i] = s
		} else if l.rate[i] == 0 && s.Busy > 0 {
			l.rate[i] = float64(s.Tokens) / s.Busy.Seconds()
		}
		st := event.EngineState{URL: s.URL, Kind: string(s.Kind), Up: s.Down == nil, InFlight: s.InFlight, Done: s.Done, Tokens: s.Tokens,
			TokensPerSec: l.rate[i], Failovers: s.Failovers, Errors: s.Errors}
		if s.Down != nil {
			st.Down = s.Down.Error()
		}
		ev.Engines = append(ev.Engines, st)
	}
	l.last = time.Now()
	return ev
}

// tick emits the engines event while trajectories generate: as the first request ends, then at
// most every enginesTick (the fleet calls it as each request ends).
func (l *Link) tick() {
	l.mu.Lock()
	due := time.Since(l.last) >= enginesTick
	l.mu.Unlock()
	if due {
		l.cfg.Emit(l.State(event.EnginesGenerate))
	}
}
