package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"agentrl/engine/rollout"
	"agentrl/envs"
)

// TrajectoryOptions configure one trajectory (see Begin).
type TrajectoryOptions struct {
	// Seed derives the sampling seed of each request that gives none: the same trajectory
	// options and requests sample the same tokens.
	Seed uint64
	// Sampling is the trajectory's sampling policy (nil: Options.Sampling).
	Sampling *Sampling
	// Override makes Sampling and Seed win over a request's temperature, top_p, top_k and seed:
	// an RL run samples at the temperature its trainer's log-probs assume, and the samples of a
	// group differ even when the agent sends a fixed seed. Without it a request's values win
	// where it gives them.
	Override bool
	// MaxTotalTokens bounds the trajectory's context (0: Options.MaxTotalTokens; never more).
	MaxTotalTokens int
}

// Trajectory is what one key's requests left: the token-exact segments and a transcript.
type Trajectory struct {
	ID string
	// Segments are the trajectory's contexts in order. A request whose messages extend the
	// previous request's conversation (those messages, then the reply, then new ones) continues
	// the current segment; any other request starts a new one.
	Segments []Segment
	// Turns has one entry per answered request.
	Turns []Turn
	// Drift is the first token-drift finding: a request whose kept tokens (the sampled ids and
	// the added messages' tokens) do not decode to what the chat template renders for its
	// conversation. "" when every extension matched.
	Drift string
	// Requests counts the requests the key made, answered or refused.
	Requests int
}

// Segment is one context: its tokens, which were sampled (Mask true: the only tokens to train
// on) with the log-probability each was sampled with (0 where Mask is false), and the length
// of the prompt that opened it.
type Segment struct {
	Tokens    []int32
	Mask      []bool
	LogProbs  []float32
	PromptLen int
}

// add appends tokens to the segment, sampled (with their log-probs) or not.
func (g *Segment) add(ids []int32, sampled bool, lps []float32) {
	g.Tokens = append(g.Tokens, ids...)
	for i := range ids {
		g.Mask = append(g.Mask, sampled)
		lp := float32(0)
		if sampled {
			lp = lps[i]
		}
		g.LogProbs = append(g.LogProbs, lp)
	}
}

// Turn is one answered request.
type Turn struct {
	Request  int    // the request's index among the trajectory's requests (0-based)
	Segment  int    // the segment it continued or started
	Endpoint string // "chat.completions" or "completions"
	// Messages are the messages the request added: those after the previous reply when it
	// continued the segment, all of them when it started one. A completion's added prompt text
	// is one user message.
	Messages []envs.Message
	// PromptTokens is the context the reply was sampled after; Reused of them were already in
	// the KV cache.
	PromptTokens, Reused int
	Content              string          // the reply as returned (stop string and tool calls left out)
	ToolCalls            []envs.ToolCall // the calls parsed from the reply
	Finish               string          // stop, length, tool_calls
	CompletionTokens     int
	Seed                 uint64
	Temperature          float32
	TopP                 float32
	TopK                 int
	Duration             time.Duration
}

// trajectory is one key's state. lock serialises its requests: a request holds it from its
// prompt to its reply's record.
type trajectory struct {
	id, key string
	opts    TrajectoryOptions
	ctx     context.Context // cancelled by Finish and Close: the key's requests end
	cancel  context.CancelFunc
	// inflight counts authorised requests; Add happens under Server.mu with the key still valid.
	inflight sync.WaitGroup
	lock     chan struct{}
	requests atomic.Int64 // authorised requests
	stopped  sync.Once

	// guarded by lock
	sess     *rollout.Session
	cur      *segState // the current segment's conversation; nil before the first reply
	rec      Trajectory
	answered int

	// guarded by Server.mu
	lastUsed time.Time
	holding  bool // sess != nil
}

func newTrajectory(parent context.Context, id, key string, o TrajectoryOptions) *trajectory {
	t := &trajectory{id: id, key: key, opts: o, lock: make(chan struct{}, 1), lastUsed: time.Now()}
	t.ctx, t.cancel = context.WithCancel(parent)
	t.rec.ID = id
	return t
}

// acquire takes the trajectory's request lock, or gives up when ctx ends.
func (t *trajectory) acquire(ctx context.Context) error {
	select {
	case t.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *trajectory) release() { <-t.lock }

// stop ends the trajectory: its requests are cancelled and waited for, its slot given back. It
// keeps the lock, so that nothing touches the trajectory again; stopping it again (Finish after
// Close) does nothing.
func (t *trajectory) stop() {
	t.stopped.Do(func() {
		t.cancel()
		t.inflight.Wait()
		t.lock <- struct{}{}
		if t.sess != nil {
			t.sess.Close()
			t.sess = nil
		}
	})
}

// Begin starts a trajectory named id and returns its API key: requests with it (Authorization:
// Bearer KEY) belong to the trajectory until Finish.
func (s *Server) Begin(id string, o TrajectoryOptions) string {
	var b [18]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on a supported OS
	key := "agentrl-" + hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key] = newTrajectory(s.ctx, id, key, o)
	return key
}

// Finish ends the trajectory of key: the key is refused from now on (401), a request still in
// flight is cancelled (its client gets an error and the reply is not recorded) and waited for,
// and its KV slot is given back. It returns what the trajectory recorded.
func (s *Server) Finish(key string) (*Trajectory, error) {
	s.mu.Lock()
	t := s.keys[key]
	if t == nil {
		revoked := s.revoked[key]
		s.mu.Unlock()
		if revoked {
			return nil, fmt.Errorf("serve: the trajectory of key %s has already finished", redact(key))
		}
		return nil, fmt.Errorf("serve: unknown key %s (Begin hands keys out)", redact(key))
	}
	delete(s.keys, key)
	s.revoked[key] = true
	s.mu.Unlock()
	t.stop()
	rec := t.rec
	rec.Requests = int(t.requests.Load())
	return &rec, nil
}

// keySeed is an open server's trajectory seed: a hash of its key.
func keySeed(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// requestSeed derives request i's seed from the trajectory's (SplitMix64 of the pair).
func requestSeed(seed uint64, i int) uint64 {
	z := seed + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// session returns the trajectory's session for a prompt: its own when the plan continues the
// segment in it, else a fresh one (the old one closed), prefilled with the segment's kept
// tokens when the plan continues a segment whose slot was taken. It returns the tokens to
// append and how many of the context were already in the cache; t.lock held.
func (s *Server) session(ctx context.Context, t *trajectory, p *plan) ([]int32, int, error) {
	if p.extend && t.sess != nil && t.sess.Len() == len(p.kept) {
		return p.add, len(p.kept), nil
	}
	s.closeSession(t)
	var sess *rollout.Session
	var err error
	if s.o.Preempt {
		sess, err = s.openPreempting(ctx, t)
	} else {
		sess, err = s.gen.Open(ctx)
	}
	if err != nil {
		return nil, 0, err
	}
	t.sess = sess
	s.mu.Lock()
	t.holding = true
	s.mu.Unlock()
	if p.extend {
		return append(slices.Clone(p.kept), p.add...), 0, nil
	}
	return p.add, 0, nil
}

// closeSession gives the trajectory's slot back; t.lock held.
func (s *Server) closeSession(t *trajectory) {
	if t.sess == nil {
		return
	}
	t.sess.Close()
	t.sess = nil
	s.mu.Lock()
	t.holding = false
	s.mu.Unlock()
}

// openPreempting opens a session, taking the slot of the least recently used idle trajectory
// whenever every slot is held while it waits.
func (s *Server) openPreempting(ctx context.Context, t *trajectory) (*rollout.Session, error) {
	type opened struct {
		sess *rollout.Session
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		sess, err := s.gen.Open(ctx)
		done <- opened{sess, err}
	}()
	full := func() bool { return s.gen.Stats().Busy >= s.gen.Config().Slots }
	if full() {
		s.evictIdle(t)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case o := <-done:
			return o.sess, o.err
		case <-tick.C:
			if full() {
				s.evictIdle(t)
			}
		}
	}
}

// evictIdle closes the session of the least recently used trajectory other than self that holds
// a slot and has no request in flight; it reports whether it closed one.
func (s *Server) evictIdle(self *trajectory) bool {
	s.mu.Lock()
	var idle []*trajectory
	for _, t := range s.keys {
		if t != self && t.holding {
			idle = append(idle, t)
		}
	}
	slices.SortFunc(idle, func(a, b *trajectory) int { return a.lastUsed.Compare(b.lastUsed) })
	s.mu.Unlock()
	for _, t := range idle {
		select {
		case t.lock <- struct{}{}:
		default:
			continue // a request is in flight
		}
		had := t.sess != nil
		s.closeSession(t)
		t.release()
		if had {
			return true
		}
	}
	return false
}

// errFinished is how a request learns that its trajectory ended while it ran.
var errFinished = errors.New("the trajectory finished while this request ran")
