// Package batch is the trajectory every phase of a step passes along: what rollout sampled
// (tokens, loss mask, behaviour log-probs, turns), what scoring, hindsight and the reference
// forward added (reward, hint, teacher and reference log-probs), the advantages and value
// targets the update trains on, a partial rollout's state across phases (its segments and
// group), a trajectory's later segments, and a player's own state, which batch carries unread
// (an external agent's run, engine/play's).
package batch

import (
	"agentrl/engine/event"
	"agentrl/envs"
	"context"
)

// Trajectory is one trajectory in flight and its results.
type Trajectory struct {
	Task            envs.Task
	Group           int
	Sample          int
	Tokens          []int32
	Mask            []bool
	LogProbs        []float32
	PromptLen       int
	Turns           []event.Turn
	Reward          envs.Reward
	Summary         envs.Summary
	Hint            string
	HintCut         string // hintShortened or hintDropped when the hinter's text did not fit, else ""
	Advantages      []float32
	RefLogProbs     []float32  // the reference model's log-prob of each token (KL term), nil without one
	TeacherLogProbs []float32  // the teacher's log-prob of each response token given the hint, nil unhinted
	Returns         []float32  // ppo: the value head's targets (GAE returns) per token
	OldValues       []float32  // ppo: the value head's predictions before the update
	Drift           string     // a token-drift finding, "" when the context matched the chat rendering
	PRM             *event.PRM // the model PRM's judgement (prm.kind model), nil otherwise
	// Chat is the conversation a ReTool episode left, in its format (TurnPieces lays it out):
	// the opening, then the assistant messages and observations, or in env.format retool the
	// one assistant message holding the response with its <interpreter> blocks. nil for agents.
	Chat     []envs.Message
	Versions []int32  // partial rollouts: the policy version (updates applied) of each token's weights
	Partial  *Partial // partial rollouts: the trajectory's state across phases; nil otherwise
	// LaterSegments are the trajectory's later segments (an external agent's that rewrote its
	// history) as sequences of their own, which a step trains while it expands them
	// (ExpandSegments); SegmentOf is set on those: the trajectory they belong to.
	LaterSegments []*Trajectory
	SegmentOf     *Trajectory
	// Agent is an external agent's run, kept by its player (engine/play's AgentRun, read with
	// play.AgentRunOf); nil for a ReTool trajectory and for a later segment.
	Agent any
}

// Segment is the stretch of a trajectory's tokens from start on, sampled in step's rollout phase
// by the weights of policy version version (the updates applied to them).
type Segment struct{ Start, Version, Step int }

// Partial is a trajectory's state across the partial phases it runs in.
type Partial struct {
	Group    *Group
	Seed     uint64
	Version  int // the version of the weights sampling it now
	Resumes  int
	State    int
	Err      error
	Segments []Segment
	Resume   chan ResumeOrder
	Settle   func() // the current phase's: the trajectory paused or ended in it
}

// ResumeOrder resumes a paused trajectory in a phase: its context (with the phase's lockstep
// ticket), or a nil ctx when it is dropped.
type ResumeOrder struct {
	Ctx           context.Context
	Version, Step int
}

// Group is a task's group of samples in flight across phases.
type Group struct {
	ID      int
	Task    envs.Task
	Samples []*Trajectory
}

// ResumeSalt varies a resumed request's sampling stream (0 for a trajectory never paused, so
// the sampled tokens are those of a whole rollout).
func (t *Trajectory) ResumeSalt() uint64 {
	if t.Partial == nil {
		return 0
	}
	return uint64(t.Partial.Resumes) * 0x9e3779b97f4a7c15
}

// MinVersion is the oldest policy version among t's sampled tokens (ok false when it has none).
func (t *Trajectory) MinVersion() (v int, ok bool) {
	for i, m := range t.Mask {
		if m && i < len(t.Versions) && (!ok || int(t.Versions[i]) < v) {
			v, ok = int(t.Versions[i]), true
		}
	}
	return v, ok
}
