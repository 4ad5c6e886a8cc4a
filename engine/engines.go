package engine

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/play"
	"agentrl/engine/remote"
	"agentrl/store/safetensors"
)

// openEngines, with rollout.engines set, makes the players generate on the remote engines
// (engine/remote's Link): the policy is written for them and each is told to load it, then
// checked to serve the policy (the probe's token ids and log-probs).
func (c *Controller) openEngines() error {
	r := c.recipe
	specs := r.EngineSpecs()
	if len(specs) == 0 {
		return nil
	}
	rm := r.Rollout.Remote
	var eps []remote.Endpoint
	for _, s := range specs {
		ep := remote.Endpoint{URL: s.URL, Kind: remote.Kind(s.Kind), Upload: rm.Push == "http"}
		if keyEnv := cmp.Or(s.KeyEnv, rm.APIKeyEnv); keyEnv != "" {
			ep.APIKey = os.Getenv(keyEnv)
		}
		eps = append(eps, ep)
	}
	dir := rm.WeightsDir
	switch {
	case dir != "":
	case c.opts.Store != nil:
		dir = filepath.Join(filepath.Dir(c.opts.Store.Path()), "engines", c.opts.RunID)
	default:
		var err error
		if dir, err = os.MkdirTemp("", "agentrl-engines-"); err != nil {
			return fmt.Errorf("engine: a folder for the engines' weights: %w", err)
		}
	}
	dt := safetensors.BF16
	if rm.WeightsDType == "f32" {
		dt = safetensors.F32
	}
	link, err := remote.Open(remote.LinkConfig{
		// A trajectory's context is bounded as the local generator's slot would be: the
		// evaluation's when it is longer (the engines evaluate too).
		Fleet: remote.Config{Endpoints: eps, MaxLen: model.Bucket(max(r.Rollout.MaxTotalTokens, r.EvalTotalTokens())), Timeout: rm.Timeout},
		Dir:   dir, Policy: c.opts.Policy.Params, ModelFiles: c.opts.ModelFiles, DType: dt, RunID: c.opts.RunID, Start: c.start,
		Encode: c.opts.Tokenizer.Encode, Tolerance: r.ProbeTolerance(), Emit: func(e event.Engines) { c.emit(e) },
		// The trainer's own log-probs, from the master weights the engines were just given
		// (before the sync sends offloaded ones to host memory).
		Score: func(ids []int32) ([]float32, error) { return c.opts.Policy.NextLogProbs(ids) },
	})
	if err != nil {
		return err
	}
	c.remote = link
	c.players.Engine = play.EngineFunc(func(ctx context.Context) (play.Session, error) {
		s, err := link.Fleet.Open(ctx)
		if err != nil {
			return nil, err
		}
		return s, nil
	})
	return nil
}

// syncEngines is the sync phase's part for rollout.engines: the updated policy pushed to the
// engines and probed; a probe past the tolerance, or an engine that fails and leaves the
// rotation, raises stale_weights, and the run goes on with the others.
func (c *Controller) syncEngines(step int, metrics map[event.Metric]float64) error {
	if c.remote == nil {
		return nil
	}
	s, err := c.remote.Sync(step)
	if err != nil {
		return err
	}
	metrics[event.MetricEngineProbeDiffMax] = s.MaxDiff
	metrics[event.MetricEnginesDown] = float64(s.Down)
	metrics[event.MetricEngineFailovers] = float64(s.Failovers)
	metrics[event.MetricEngineSyncSeconds] = s.Seconds
	if s.MaxDiff > s.Tolerance {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmStaleWeights, Value: s.MaxDiff, Threshold: s.Tolerance,
			Message: "after the weight push an engine's probe log-probs differ from the trainer's: it may serve stale weights"})
	}
	for _, ch := range s.Failed {
		c.emit(event.Alarm{Step: step, Kind: event.AlarmStaleWeights, Value: 1, Threshold: 0,
			Message: fmt.Sprintf("%s left the rotation: %v", ch.Engine, ch.Err)})
	}
	return nil
}
