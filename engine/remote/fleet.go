package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"agentrl/engine/rollout"
)

// Config is a fleet's engines and limits.
type Config struct {
	Endpoints []Endpoint
	// MaxLen is a trajectory's context bound, as the local generator's slot (rollout.Config
	// MaxLen): a request whose context reaches it ends at once with rollout.StopContext.
	MaxLen int
	// Timeout bounds one generation request: an engine that has not answered by then is taken
	// to have stalled, and the request goes to another (default 5m).
	Timeout time.Duration
	// HTTP is the client used (nil: one without a global timeout; requests carry their own).
	HTTP *http.Client
	// Observe, when set, is called after each generation request ends, on the goroutine that
	// sent it, outside the fleet's lock (a caller reads Engines there, e.g. to report them).
	Observe func()
}

// Stats are a fleet's counters since New.
type Stats struct {
	Requests  int64 // generation requests answered
	Failovers int64 // requests that failed on one engine and were sent to another
	Down      int   // engines taken out of the rotation now
}

// Fleet spreads trajectories over inference servers by load: a trajectory's requests go to the
// engine with the fewest requests in flight when it starts, and stay there (its prefix is in
// that engine's cache) unless the engine fails; a request that fails or stalls there is sent
// again, whole, to the least loaded live engine, and the engine is taken out of the rotation
// until a weight push reaches it again. It is safe for concurrent use.
type Fleet struct {
	cfg     Config
	engines []*engine

	mu    sync.Mutex
	stats Stats
}

// engine is one server with its load and state; the fields below client are guarded by Fleet.mu.
type engine struct {
	i        int
	c        *client
	inflight int
	down     error  // why it left the rotation; nil while in it
	root     string // vLLM: the folder it was started on, as /v1/models says ("" unknown)
	// the counters of EngineStats; busySince is when inflight last rose from 0
	done, tokens, failovers, errors int64
	busy                            time.Duration
	busySince                       time.Time
}

// EngineStats is one engine's state and counters since New.
type EngineStats struct {
	URL  string // base URL, without /v1
	Kind Kind
	// Down is why it is out of the rotation; nil while in it.
	Down     error
	InFlight int           // generation requests in flight now
	Done     int64         // generation requests it answered
	Tokens   int64         // tokens it generated
	Busy     time.Duration // time with at least one request in flight: Tokens ÷ Busy is its rate while working
	// Failovers are requests that failed here (refused connection, 5xx, stall, malformed reply)
	// and went to another engine; Errors, requests it refused (4xx) and weight pushes or probes
	// that failed on it.
	Failovers, Errors int64
}

// Engines returns each engine's state and counters, in Config.Endpoints' order.
func (f *Fleet) Engines() []EngineStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	out := make([]EngineStats, len(f.engines))
	for i, e := range f.engines {
		busy := e.busy
		if e.inflight > 0 {
			busy += now.Sub(e.busySince)
		}
		out[i] = EngineStats{URL: e.c.ep.URL, Kind: e.c.ep.Kind, Down: e.down, InFlight: e.inflight, Done: e.done, Tokens: e.tokens,
			Busy: busy, Failovers: e.failovers, Errors: e.errors}
	}
	return out
}

// New checks cfg and makes the fleet; nothing is sent yet (see Check).
func New(cfg Config) (*Fleet, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("remote: no engines: rollout.engines lists none")
	}
	if cfg.MaxLen <= 0 {
		return nil, errors.New("remote: Config.MaxLen must be positive")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	f := &Fleet{cfg: cfg}
	for i, ep := range cfg.Endpoints {
		ep.URL = strings.TrimSuffix(strings.TrimSuffix(ep.URL, "/"), "/v1")
		switch ep.Kind {
		case SGLang, VLLM, Serve:
		default:
			return nil, fmt.Errorf("remote: engine %d (%s): kind %q is not one of %v", i, ep.URL, ep.Kind, Kinds)
		}
		f.engines = append(f.engines, &engine{i: i, c: &client{ep: ep, http: cfg.HTTP}})
	}
	return f, nil
}

// Stats returns the counters.
func (f *Fleet) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	for _, e := range f.engines {
		if e.down != nil {
			st.Down++
		}
	}
	return st
}

// name is an engine's name in errors and reports: its URL and kind, never its key.
func (e *engine) name() string { return fmt.Sprintf("%s engine %s", e.c.ep.Kind, e.c.ep.URL) }

// pick takes the live engine with the fewest requests in flight (the lowest index among equals)
// other than avoid, counting the request on it; nil when every engine is down.
func (f *Fleet) pick(prefer *engine) *engine {
	f.mu.Lock()
	defer f.mu.Unlock()
	best := prefer
	if best != nil && best.down != nil {
		best = nil
	}
	if best == nil {
		for _, e := range f.engines {
			if e.down == nil && (best == nil || e.inflight < best.inflight) {
				best = e
			}
		}
	}
	if best != nil {
		if best.inflight == 0 {
			best.busySince = time.Now()
		}
		best.inflight++
	}
	return best
}

// Outcomes of a request on an engine (done).
const (
	answered  = iota // it answered: tokens generated
	refused          // it refused the request (4xx): counted as its error, it stays in the rotation
	failed           // it failed: out of the rotation, the request goes elsewhere
	abandoned        // the caller gave up: nothing counted
)

// done ends a request on e with its outcome; failed takes e out of the rotation for err.
func (f *Fleet) done(e *engine, outcome int, tokens int, err error) {
	f.mu.Lock()
	e.inflight--
	if e.inflight == 0 {
		e.busy += time.Since(e.busySince)
	}
	switch outcome {
	case answered:
		f.stats.Requests++
		e.done++
		e.tokens += int64(tokens)
	case refused:
		e.errors++
	case failed:
		if e.down == nil {
			e.down = err
		}
		f.stats.Failovers++
		e.failovers++
	}
	f.mu.Unlock()
	if f.cfg.Observe != nil {
		f.cfg.Observe()
	}
}

// downReasons says why each engine left the rotation.
func (f *Fleet) downReasons() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for _, e := range f.engines {
		if e.down != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", e.name(), e.down))
		}
	}
	return strings.Join(parts, "; ")
}

// Open starts a trajectory's session; it holds no server resource until its first request.
func (f *Fleet) Open(ctx context.Context) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Session{f: f}, nil
}

// Session is one trajectory's context: the tokens so far, kept here, and the engine its
// requests go to. Each request sends the whole context (the server's prefix cache holds what it
// saw before), so any engine can take the trajectory over after a failure.
type Session struct {
	f      *Fleet
	ctx    []int32
	eng    *engine
	closed bool
}

// Generate appends req.Append to the context and samples on an engine until a stop condition,
// as rollout.Session.Generate does; OnToken is not called (the servers answer whole replies).
// A request that fails on one engine (a refused connection, a reset, a 5xx, a stall past
// Config.Timeout, a malformed reply) is sent again, with the same seed, to another.
func (s *Session) Generate(ctx context.Context, req rollout.Request) (rollout.Result, error) {
	if s.closed {
		return rollout.Result{}, rollout.ErrClosed
	}
	f := s.f
	if len(s.ctx)+len(req.Append) >= f.cfg.MaxLen {
		return rollout.Result{Stop: rollout.StopContext}, nil
	}
	input := append(append(make([]int32, 0, len(s.ctx)+len(req.Append)), s.ctx...), req.Append...)
	// As the local generator: the request ends at MaxNew tokens (StopMaxNew) or where the context
	// fills MaxLen (StopContext), whichever comes first, MaxNew winning a tie.
	room := f.cfg.MaxLen - len(input)
	asked := req.MaxNew
	if req.MaxNew <= 0 || req.MaxNew > room {
		req.MaxNew = room
	}
	for {
		e := f.pick(s.eng)
		if e == nil {
			return rollout.Result{}, fmt.Errorf("remote: every rollout engine is out of the rotation (%s)", f.downReasons())
		}
		rctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
		res, err := e.c.generate(rctx, input, req)
		stalled := rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		if err != nil && ctx.Err() != nil { // the caller gave up: the engine did nothing wrong
			f.done(e, abandoned, 0, nil)
			return rollout.Result{}, ctx.Err()
		}
		if err == nil && len(res.IDs) > req.MaxNew && req.MaxNew > 0 {
			err = fmt.Errorf("it returned %d tokens for max_new_tokens %d", len(res.IDs), req.MaxNew)
		}
		var refusal *errStatus
		if errors.As(err, &refusal) && refusal.status/100 == 4 { // the server is alive and says the request is wrong: so would the others
			f.done(e, refused, 0, nil)
			return rollout.Result{}, fmt.Errorf("remote: %s refused a request of %d context tokens: %w", e.name(), len(input), err)
		}
		if err != nil {
			if stalled {
				err = fmt.Errorf("no reply within %s (stalled)", f.cfg.Timeout)
			}
			f.done(e, failed, 0, err)
			s.eng = nil
			continue
		}
		f.done(e, answered, len(res.IDs), nil)
		s.eng = e
		if req.OnToken != nil {
			for i, id := range res.IDs {
				req.OnToken(id, res.LogProbs[i])
			}
		}
		s.ctx = append(input, res.IDs...)
		if res.Stop == rollout.StopMaxNew && (asked <= 0 || asked > room) {
			res.Stop = rollout.StopContext
		}
		return res, nil
	}
}

// Len is the number of tokens in the session's context.
func (s *Session) Len() int { return len(s.ctx) }

// Close ends the session.
func (s *Session) Close() { s.closed = true }
