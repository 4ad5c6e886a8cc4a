package recipes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Hash identifies the effective recipe for checkpoints: the SHA-256, in hex, of the canonical JSON
// of every field (struct fields in declaration order, durations in nanoseconds). The ui section
// is left out, because how a run is watched does not change what it computes.
func (r *Recipe) Hash() string {
	sum := sha256.Sum256(r.CanonicalJSON())
	return hex.EncodeToString(sum[:])
}

// CanonicalJSON is the recipe as the JSON that Hash digests.
func (r *Recipe) CanonicalJSON() []byte {
	c := *r
	c.UI = UI{}
	c.Rollout.Stop = nonNil(c.Rollout.Stop)
	c.Eval.Ks = nonNil(c.Eval.Ks)
	c.Env.Tasks.Synthetic.Levels = nonNil(c.Env.Tasks.Synthetic.Levels)
	c.Env.External.Command = nonNil(c.Env.External.Command)
	if c.Data.Train == "" { // unused: left out, so recipes from before data hash as they did
		c.Data = Data{}
	} else {
		c.Data.Eval = nonNil(c.Data.Eval)
		if c.Data.Fields == nil {
			c.Data.Fields = map[string]string{}
		}
	}
	if c.PRM.Kind != "model" { // unused: left out, so recipes from before prm.kind model hash as they did
		c.PRM = PRM{Kind: c.PRM.Kind}
	}
	if len(c.Rollout.Engines) == 0 { // the local engine: left out, so recipes from before rollout.engines hash as they did
		c.Rollout.Engines, c.Rollout.Remote = nil, Remote{}
	}
	if c.Rollout.Remote.Push == "disk" { // the default: left out, so recipes from before push hash as they did
		c.Rollout.Remote.Push = ""
	}
	if c.Reward.Grader == "verifier" { // the default: left out, so recipes from before reward.grader hash as they did
		c.Reward.Grader = ""
	}
	if c.Hinter.Gate == "none" { // the default: left out, as above
		c.Hinter.Gate = ""
	}
	if c.Algorithm.Estimator == "group" { // the default: left out, as above
		c.Algorithm.Estimator = ""
	}
	if c.Env.External.Env == nil {
		c.Env.External.Env = map[string]string{}
	}
	data, err := json.Marshal(&c)
	if err != nil {
		// A Recipe holds only strings, numbers, booleans, slices of them and maps of strings:
		// Marshal cannot fail (it sorts map keys, so the JSON is canonical).
		return []byte(err.Error())
	}
	return data
}

// nonNil makes an absent list and an empty one hash alike.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
