package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"agentrl/engine/event"
	"agentrl/engine/play"
	"agentrl/engine/remote"
	"agentrl/store/safetensors"
)

// engines is the rollout on rollout.engines (engine/remote): the fleet the players generate on,
// the folder the policy is written into for them, and the failovers counted at the last step.
type engines struct {
	fleet     *remote.Fleet
	dir       string
	failovers int64
	// weights is the step whose update the engines were last given.
	weights atomic.Int64

	// mu guards the engines event's state: when the last went out, each engine's counters then
	// and the rate it showed.
	mu   sync.Mutex
	last time.Time
	prev []remote.EngineStats
	rate []float64
}

// enginesTick is the most often an engines event goes out while trajectories generate.
const enginesTick = 2 * time.Second

// state is the engines event for phase, each engine's rate over its busy time since the last
// event (over the run when that was under a second: the rate shown stays until one is measured).
func (e *engines) state(phase string) event.Engines {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.fleet.Engines()
	if e.rate == nil {
		e.rate, e.prev = make([]float64, len(now)), make([]remote.EngineStats, len(now))
	}
	ev := event.Engines{Weights: int(e.weights.Load()), Phase: phase}
	for i, s := range now {
		if busy := s.Busy - e.prev[i].Busy; busy >= time.Second {
			e.rate[i] = float64(s.Tokens-e.prev[i].Tokens) / busy.Seconds()
			e.prev[i] = s
		} else if e.rate[i] == 0 && s.Busy > 0 {
			e.rate[i] = float64(s.Tokens) / s.Busy.Seconds()
		}
		st := event.EngineState{URL: s.URL, Kind: string(s.Kind), Up: s.Down == nil, InFlight: s.InFlight, Done: s.Done, Tokens: s.Tokens,
			TokensPerSec: e.rate[i], Failovers: s.Failovers, Errors: s.Errors}
		if s.Down != nil {
			st.Down = s.Down.Error()
		}
		ev.Engines = append(ev.Engines, st)
	}
	e.last = time.Now()
	return ev
}

// tickEngines emits the engines event while trajectories generate: as the first request ends,
// then at most every enginesTick (the fleet calls it as each request ends). (None goes out while
// the controller is built: nothing reads its events yet.)
func (c *Controller) tickEngines() {
	e := c.remote
	e.mu.Lock()
	due := time.Since(e.last) >= enginesTick
	e.mu.Unlock()
	if due {
		c.emit(e.state(event.EnginesGenerate))
	}
}

// openEngines, with rollout.engines set, makes the players generate on the remote engines:
// the policy is written for them and each is told to load it, then checked to serve the
// policy (the probe's token ids and log-probs).
func (c *Controller) openEngines() error {
	r := c.recipe
	specs := r.EngineSpecs()
	if len(specs) == 0 {
		return nil
	}
	rm := r.Rollout.Remote
	var eps []remote.Endpoint
	for _, s := range specs {
		keyEnv := s.KeyEnv
		if keyEnv == "" {
			keyEnv = rm.APIKeyEnv
		}
		ep := remote.Endpoint{URL: s.URL, Kind: remote.Kind(s.Kind)}
		if keyEnv != "" {
			ep.APIKey = os.Getenv(keyEnv)
		}
		eps = append(eps, ep)
	}
	fleet, err := remote.New(remote.Config{Endpoints: eps, MaxLen: c.gen.Config().MaxLen, Timeout: rm.Timeout,
		Observe: c.tickEngines}) // c.remote is set below, before any request
	if err != nil {
		return err
	}
	dir := rm.WeightsDir
	switch {
	case dir != "":
	case c.opts.Store != nil:
		dir = filepath.Join(filepath.Dir(c.opts.Store.Path()), "engines", c.opts.RunID)
	default:
		if dir, err = os.MkdirTemp("", "agentrl-engines-"); err != nil {
			return fmt.Errorf("engine: a folder for the engines' weights: %w", err)
		}
	}
	c.remote = &engines{fleet: fleet, dir: dir}
	c.remote.weights.Store(int64(c.start - 1))
	ctx := context.Background()
	if err := fleet.ResolveModels(ctx); err != nil {
		return err
	}
	probe, err := c.engineProbe()
	if err != nil {
		return err
	}
	if err := c.writeEngineWeights(); err != nil {
		return err
	}
	rep := fleet.Push(ctx, dir, c.weightVersion(c.start-1), probe)
	for _, ch := range rep.Checks {
		if ch.Err != nil {
			return fmt.Errorf("engine: rollout.engines: %s: %w", ch.Engine, ch.Err)
		}
	}
	if _, err := fleet.Verify(ctx, probe); err != nil {
		return fmt.Errorf("engine: rollout.engines: %w", err)
	}
	c.players.Engine = play.EngineFunc(func(ctx context.Context) (play.Session, error) {
		s, err := fleet.Open(ctx)
		if err != nil {
			return nil, err
		}
		return s, nil
	})
	return nil
}

// weightVersion labels the weights after step's update.
func (c *Controller) weightVersion(step int) string {
	return fmt.Sprintf("%s-step%d", c.opts.RunID, step)
}

// writeEngineWeights writes the policy into the engines' folder, in rollout.remote.weights_dtype.
func (c *Controller) writeEngineWeights() error {
	dt := safetensors.BF16
	if c.recipe.Rollout.Remote.WeightsDType == "f32" {
		dt = safetensors.F32
	}
	return remote.WriteWeights(c.remote.dir, c.opts.Policy.Params, c.opts.ModelFiles, dt, 4<<30)
}

// engineProbe is the probe with the trainer's own log-probs: the inference copy's, which the
// sync has just made equal to the cast master weights.
func (c *Controller) engineProbe() (remote.Probe, error) {
	ids := c.opts.Tokenizer.Encode(remote.ProbeText)
	sc, err := c.dev.Infer.Model().Score([][]int32{ids})
	if err != nil {
		return remote.Probe{}, fmt.Errorf("engine: scoring the engines' probe: %w", err)
	}
	lps := []float64{math.NaN()}
	for _, v := range sc.NextLogProbs[0][:len(ids)-1] {
		lps = append(lps, float64(v))
	}
	return remote.Probe{Text: remote.ProbeText, IDs: ids, LogProbs: lps, Tolerance: c.recipe.ProbeTolerance()}, nil
}

// syncEngines is the sync phase's part for rollout.engines: the updated policy written for the
// engines, each told to load it and probed; a probe past the tolerance raises stale_weights.
// An engine that fails leaves the rotation (engines_down) and the run goes on with the others.
func (c *Controller) syncEngines(step int, metrics map[event.Metric]float64) error {
	if c.remote == nil {
		return nil
	}
	t0 := time.Now()
	if err := c.writeEngineWeights(); err != nil {
		return err
	}
	probe, err := c.engineProbe()
	if err != nil {
		return err
	}
	rep := c.remote.fleet.Push(context.Background(), c.remote.dir, c.weightVersion(step), probe)
	c.remote.weights.Store(int64(step))
	c.emit(c.remote.state(event.EnginesSync))
	st := c.remote.fleet.Stats()
	metrics[event.MetricEngineProbeDiffMax] = rep.MaxDiff
	metrics[event.MetricEnginesDown] = float64(rep.Down)
	metrics[event.MetricEngineFailovers] = float64(st.Failovers - c.remote.failovers)
	metrics[event.MetricEngineSyncSeconds] = time.Since(t0).Seconds()
	c.remote.failovers = st.Failovers
	if rep.MaxDiff > probe.Tolerance {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmStaleWeights, Value: rep.MaxDiff, Threshold: probe.Tolerance,
			Message: "after the weight push an engine's probe log-probs differ from the trainer's: it may serve stale weights"})
	}
	for _, ch := range rep.Checks {
		if ch.Err != nil {
			c.emit(event.Alarm{Step: step, Kind: event.AlarmStaleWeights, Value: 1, Threshold: 0,
				Message: fmt.Sprintf("%s left the rotation: %v", ch.Engine, ch.Err)})
		}
	}
	return nil
}
