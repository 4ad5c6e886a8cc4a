package rollout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/compiles"
	"agentrl/engine/model"
)

// Config sizes the generator. Zero values take the defaults noted.
type Config struct {
	Slots   int   // concurrent sequences (default 8)
	MaxLen  int   // cache rows per slot = longest context (default 512)
	Buckets []int // attention lengths compiled (default: DefaultBuckets)
	Chunks  []int // prefill chunk sizes compiled, besides 1 for decode (default: DefaultChunks)
	// PrefillLanes is how many slots one prefill step (chunk > 1) serves (default Slots/8, at least
	// 1). Decode steps always carry every slot; a prefill step carries only the slots with context
	// to write, so a new turn in one slot costs lanes×chunk token rows, not Slots×chunk.
	PrefillLanes int
	// Truncation compiles the top-k / top-p sampler too. Without it, requests that ask for top-k or
	// top-p are refused; RL rollouts usually sample the full distribution at temperature 1.
	Truncation bool
	// TopKMax bounds the candidates considered when a request uses top-k or top-p (default 64).
	TopKMax int
	// Decode turns token ids into text, for stop strings. Required when requests use StopStrings.
	Decode func(ids []int32) string
	// Lockstep makes the sequence of steps, and so every sampled token and its log-prob, a
	// function of the requests alone, not of when they arrive. The generator keeps a step clock
	// (the steps run, plus the steps skipped while nothing could run) and takes each session's
	// next request, or its Close, at a step of that clock fixed when its previous request ended:
	// ToolReturnSteps steps later when it ended on a stop string (the close of a tool call: the
	// session runs its tool meanwhile, away from the batch, and the other slots go on decoding),
	// the very next step after any other end, and at once for a session just admitted. A request
	// or Close that comes early is held until its step; one that comes late makes the loop wait
	// there (the stall PhaseStats.Stall counts). Waiting sessions are admitted in ticket order
	// (see Reserve and WithTicket) to the lowest free slot, a slot being free from the step its
	// session's Close is taken at. Without Lockstep, which sequences share a step depends on when
	// tool calls return, and a CPU's kernels round differently for different step shapes, so a
	// run drifts.
	Lockstep bool
	// ToolReturnSteps is, with Lockstep, how many steps one tool call is taken to last: a session
	// whose request ended on a stop string stays out of the batch until its call would end in a
	// model of ToolWorkers workers, each call taking ToolReturnSteps steps on the first worker
	// free, calls served in the order their requests ended (by slot within a step). Long enough
	// for most calls to return, so that the batch rarely waits; short enough that a slot does not
	// idle long after its result came. 0: the very next step waits for it, so every slot waits
	// for every tool.
	ToolReturnSteps int
	// ToolWorkers is how many tool calls the model above runs at once, the environment's own
	// bound (a sandbox pool's workers), so that calls made together come back one worker's turn
	// after another, as they do; 0: as many as the slots (every call ToolReturnSteps steps).
	ToolWorkers int
	// Compiles counts the step programs New compiles: kind "decode" for chunk 1, "prefill" for
	// the longer chunks, one per (chunk, bucket, truncation) (nil: not counted).
	Compiles *compiles.Counter
}

// fill takes the defaults of the fields left zero.
func (c *Config) fill() error {
	if c.Slots <= 0 {
		c.Slots = 8
	}
	if c.MaxLen <= 0 {
		c.MaxLen = 512
	}
	if len(c.Buckets) == 0 {
		c.Buckets = DefaultBuckets(c.MaxLen)
	}
	slices.Sort(c.Buckets)
	c.Buckets = slices.Compact(c.Buckets)
	if c.Buckets[len(c.Buckets)-1] != c.MaxLen {
		return fmt.Errorf("rollout: the largest bucket %d must equal MaxLen %d", c.Buckets[len(c.Buckets)-1], c.MaxLen)
	}
	if len(c.Chunks) == 0 {
		c.Chunks = DefaultChunks()
	}
	c.Chunks = append([]int{1}, c.Chunks...)
	slices.Sort(c.Chunks)
	c.Chunks = slices.Compact(c.Chunks)
	if c.TopKMax <= 0 {
		c.TopKMax = 64
	}
	if c.PrefillLanes <= 0 {
		c.PrefillLanes = max(1, c.Slots/8)
	}
	c.PrefillLanes = min(c.PrefillLanes, c.Slots)
	return nil
}

// Sampling chooses how tokens are drawn.
type Sampling struct {
	Temperature float32 // 0 = greedy
	TopP        float32 // 0 or ≥ 1 = off
	TopK        int     // 0 = off (at most Config.TopKMax)
	Seed        uint64  // the request's random stream
}

// Request appends tokens to a session's context and generates until a stop condition.
type Request struct {
	Append      []int32 // tokens to add first (a prompt, or a tool observation)
	Sampling    Sampling
	MaxNew      int      // 0 = until the context is full
	StopIDs     []int32  // e.g. EOS, <|im_end|>
	StopStrings []string // e.g. "</code>", "</tool_call>"
	// OnToken, when set, sees each sampled token and its log-prob as soon as the step that drew it
	// ends, in order (a streaming reply). It runs on the generator's loop goroutine with the
	// generator's lock held: it must return at once and must not call the generator.
	OnToken func(id int32, logProb float32)
}

// StopReason says why generation ended.
type StopReason string

// Stop reasons.
const (
	StopToken   StopReason = "stop_token"
	StopString  StopReason = "stop_string"
	StopMaxNew  StopReason = "max_new"
	StopContext StopReason = "context_full"
	// StopPaused: the rollout phase ended while the request ran (PauseWhen); IDs holds the
	// tokens sampled until then.
	StopPaused StopReason = "paused"
)

// Result is what one request generated. The final token (a stop token, say) is included.
type Result struct {
	IDs      []int32
	LogProbs []float32 // log-probability of each token under the distribution it was sampled from
	Stop     StopReason
	Matched  string // the stop string or token text that ended it, if any
}

// Stats are the generator's counters since New.
type Stats struct {
	Steps, Tokens   int64         // decode/prefill steps run; tokens sampled
	PrefillTokens   int64         // context tokens written into caches
	StepTime        time.Duration // total device time in steps
	SlotSteps       int64         // Σ over steps of slots that carried a token (occupancy = SlotSteps / (Steps·Slots))
	Queued          int           // sessions waiting for a slot now
	Busy            int           // slots held by sessions now
	ToolWait        time.Duration // total time slots were held between a session's requests
	LiveCacheTensor int           // device cache tensors held (2 per layer while open)
}

// ErrClosed is returned by a session or generator used after Close.
var ErrClosed = errors.New("rollout: closed")

// ErrPaused is returned by Open once the phase's pause rule has fired (PauseWhen): the session
// was never started and waits for the next phase.
var ErrPaused = errors.New("rollout: the phase ended before this session started")

// ErrReleased is returned by Open while the KV cache is released (see ReleaseCache).
var ErrReleased = errors.New("rollout: the KV cache is released for training; restore it before generating")

// Generator owns the KV caches and the compiled step functions; one goroutine drives the device.
type Generator struct {
	m       *model.Model
	cfg     Config
	compute dtypes.DType
	execs   map[stepKey]*compiles.Exec
	caches  []*tensors.Tensor

	mu      sync.Mutex
	cond    *sync.Cond
	slots   []*slot
	free    []int
	waiters []waiter
	closed  bool
	// Lockstep admission: tickets handed out by Reserve, the next one to admit, and tickets that
	// will never be opened (Skip, or a cancelled wait).
	reserved, admitNext int64
	skipped             map[int64]bool
	// released says the KV cache is freed for the training phase: Open fails until RestoreCache.
	released bool
	// tick is the lockstep step clock: steps run, plus steps skipped while nothing could run;
	// workerFree the tick at which each modelled tool worker is free (Config.ToolWorkers).
	tick       int64
	workerFree []int64
	stats      Stats
	// live is the number of cache tensors alive, counted where no step runs (after each step,
	// at a release or restore): Stats reports it without touching tensors a step may be donating.
	live int
	done chan struct{}
	fail error
	// prefillLast says the previous step was a prefill, so the next one decodes if any slot can.
	prefillLast bool
	// trace, when set (tests), sees each step's plan before it runs; g.mu held.
	trace func(key stepKey, active []stepSlot)
	// meters measure the generation phases in progress (see Measure).
	meters []*Meter
	// onStall, when set (tests), is called as the loop starts a wait that stalls work; g.mu held.
	onStall func()
	// pauseRule, when set, sees the ticket of each session as its slot is freed (with Lockstep:
	// at its due tick, in slot order); when it returns true the phase pauses (pausing).
	pauseRule func(ticket int64) bool
	pausing   bool
}

// stepKey names one compiled step: chunk size, attention bucket, and whether it samples with
// top-k/top-p truncation. Decode steps (chunk 1) carry every slot; prefill steps carry
// Config.PrefillLanes lanes, each naming its slot.
type stepKey struct {
	chunk, bucket int
	truncate      bool
}

// lanes is the number of rows a step carries.
func (g *Generator) lanes(k stepKey) int {
	if k.chunk == 1 {
		return g.cfg.Slots
	}
	return g.cfg.PrefillLanes
}

// indexed says whether a step's lanes name their slots (false: lane i is slot i).
func (g *Generator) indexed(k stepKey) bool { return g.lanes(k) != g.cfg.Slots }

// waiter is a session waiting for a slot; it receives the session, or nil when the generator closed.
type waiter struct {
	ticket int64
	ch     chan *Session
}

type slot struct {
	id      int
	epoch   int // bumped each time a session takes the slot
	held    bool
	pos     int     // tokens already in the cache
	pending []int32 // tokens to write before sampling resumes
	gen     *genState
	idleAt  time.Time
	ticket  int64 // the session's ticket (WithTicket), -1 without one: what pauseRule sees
	// Lockstep: the tick at which the session's next request (or Close) is taken, and whether
	// it has closed (the slot is freed at due).
	due    int64
	closed bool
}

type genState struct {
	req    Request
	rng    *rand.Rand
	res    Result
	done   chan error
	cancel bool
}

// DefaultChunks are the prefill chunk sizes a generator compiles unless told otherwise: 64
// alone, on every backend. On XLA each program costs seconds to compile — an H100 compiled 8
// prefill programs in 70.6 s before a Qwen3-0.6B run's first step (docs/gpu), half of them for a
// chunk of 16 — while a GPU step of 16 or 64 rows costs about the same (launch- and
// weight-read-bound). On the CPU a chunk of 16 saved padded rows: the default run's evaluations
// took 51.3 s with chunks 16 and 64 and 53.4-54.4 s with 64 alone (4 steps, 2-core Intel Xeon),
// 3 % of the run; one chunk keeps the CPU's programs the GPU's, so that the compile budget the
// tests check is the one a GPU pays.
func DefaultChunks() []int { return []int{64} }

// DefaultBuckets are the attention lengths a generator with maxLen-token slots compiles unless
// told otherwise: powers of two up to maxLen from 64, or, for long slots, from the power of two
// at or above maxLen/16, so that at most five lengths are compiled (16,384-token slots: 1,024 to
// 16,384, not the nine from 64). A shorter context pays for attending over its bucket's length:
// on a GPU, reading that much more of the KV cache per decode step.
func DefaultBuckets(maxLen int) []int {
	lo := 64
	for lo*16 < maxLen {
		lo *= 2
	}
	var out []int
	for b := lo; b < maxLen; b *= 2 {
		out = append(out, b)
	}
	return append(out, maxLen)
}

// New compiles the step functions for every (chunk, bucket) pair and allocates the caches.
func New(m *model.Model, cfg Config) (*Generator, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	cfg.TopKMax = min(cfg.TopKMax, m.Config.VocabSize)
	g := &Generator{m: m, cfg: cfg, compute: m.Options().Compute, execs: map[stepKey]*compiles.Exec{}, done: make(chan struct{}), skipped: map[int64]bool{},
		workerFree: make([]int64, max(cfg.ToolWorkers, 0))}
	g.cond = sync.NewCond(&g.mu)
	for i := 0; i < cfg.Slots; i++ {
		g.slots = append(g.slots, &slot{id: i})
		g.free = append(g.free, i)
	}
	shape := model.CacheShape(m.Config, g.compute, cfg.Slots, cfg.MaxLen)
	for i := 0; i < 2*m.Config.NumLayers; i++ {
		t, err := tensors.FromShapeForBackend(m.Backend, 0, shape)
		if err != nil {
			return nil, fmt.Errorf("allocating KV cache (%s × %d): %w", shape, 2*m.Config.NumLayers, err)
		}
		g.caches = append(g.caches, t)
	}
	for _, c := range cfg.Chunks {
		for _, b := range cfg.Buckets {
			for _, tr := range []bool{false, true} {
				if tr && !cfg.Truncation {
					continue
				}
				if err := g.compile(stepKey{c, b, tr}); err != nil {
					return nil, err
				}
			}
		}
	}
	g.live = g.countLive()
	go g.loop()
	return g, nil
}

// countLive counts the cache tensors alive; only where no step runs.
func (g *Generator) countLive() int {
	n := 0
	for _, t := range g.caches {
		if t != nil && t.Ok() {
			n++
		}
	}
	return n
}

// compile builds and warms one step, so that no request waits on compilation.
func (g *Generator) compile(k stepKey) error {
	c, b := k.chunk, k.bucket
	np := len(g.m.Params.Values)
	nc := 2 * g.m.Config.NumLayers
	kMax := g.cfg.TopKMax
	indexed := g.indexed(k)
	kind := "prefill"
	if c == 1 {
		kind = "decode"
	}
	e, err := compiles.NewExec(g.m.Backend, g.cfg.Compiles, kind, func(in []*Node) []*Node {
		net := model.NewNet(g.m.Config, g.compute, in[:np])
		tokens, positions, last := in[np], in[np+1], in[np+2]
		caches := in[np+3 : np+3+nc]
		temp, topK, topP, u := in[np+3+nc], in[np+4+nc], in[np+5+nc], in[np+6+nc]
		var slotIdx *Node
		if indexed {
			slotIdx = in[np+7+nc]
		}
		h, newCaches := net.Step(tokens, positions, last, slotIdx, caches, b)
		var ids, lp *Node
		if k.truncate {
			ids, lp = sampleTokens(net.Logits(h), temp, topK, topP, u, kMax)
		} else {
			ids, lp = sampleFull(net.Logits(h), temp, u)
		}
		return append([]*Node{ids, lp}, newCaches...)
	})
	if err != nil {
		return fmt.Errorf("building decode step (chunk %d, bucket %d): %w", c, b, err)
	}
	e.SetMaxCache(2)
	g.execs[k] = e
	in := g.newInputs(k) // every position −1: a warm-up that leaves the caches as they are
	_, _, err = g.run(k, in)
	return err
}

// stepInputs are one step's host inputs, lane-major: lane i's chunk is tokens[i*chunk:(i+1)*chunk].
type stepInputs struct {
	tokens, positions, last []int32
	temp, topP, u           []float32
	topK                    []int32
	slots                   []int32 // the slot of each lane (indexed steps only)
}

// newInputs allocates a step's inputs with no token in any place.
func (g *Generator) newInputs(k stepKey) stepInputs {
	n, c := g.lanes(k), k.chunk
	in := stepInputs{
		tokens: make([]int32, n*c), positions: make([]int32, n*c), last: make([]int32, n),
		temp: make([]float32, n), topK: make([]int32, n), topP: make([]float32, n), u: make([]float32, n),
		slots: make([]int32, n),
	}
	for i := range in.positions {
		in.positions[i] = -1
	}
	for i := range in.topP {
		in.topP[i] = 1
	}
	for i := range in.slots {
		in.slots[i] = int32(i)
	}
	return in
}

// run executes one step, replacing the caches with the step's outputs.
func (g *Generator) run(k stepKey, in stepInputs) ([]int32, []float32, error) {
	s, c := g.lanes(k), k.chunk
	args := make([]any, 0, len(g.m.Params.Values)+8+len(g.caches))
	for _, v := range g.m.Params.Values {
		args = append(args, v)
	}
	args = append(args,
		tensors.FromFlatDataAndDimensions(in.tokens, s, c),
		tensors.FromFlatDataAndDimensions(in.positions, s, c),
		tensors.FromFlatDataAndDimensions(in.last, s))
	for _, t := range g.caches {
		args = append(args, compiles.Donate(t))
	}
	args = append(args,
		tensors.FromFlatDataAndDimensions(in.temp, s),
		tensors.FromFlatDataAndDimensions(in.topK, s),
		tensors.FromFlatDataAndDimensions(in.topP, s),
		tensors.FromFlatDataAndDimensions(in.u, s))
	if g.indexed(k) {
		args = append(args, tensors.FromFlatDataAndDimensions(in.slots, s))
	}
	out, err := g.execs[k].Call(args...)
	if err != nil {
		return nil, nil, fmt.Errorf("decode step (chunk %d, bucket %d): %w", c, k.bucket, err)
	}
	for _, t := range g.caches {
		t.FinalizeAll()
	}
	g.caches = out[2:]
	ids := tensors.MustCopyFlatData[int32](out[0]) // per lane
	lps := tensors.MustCopyFlatData[float32](out[1])
	out[0].FinalizeAll()
	out[1].FinalizeAll()
	return ids, lps, nil
}

// Session is one trajectory's hold on a slot: its context persists across requests (turns).
type Session struct {
	g     *Generator
	slot  *slot
	epoch int // the slot's epoch when the session took it
	once  sync.Once
}

type ticketKey struct{}

// WithTicket returns a context whose Open (and one-shot Generate) takes lockstep ticket t, one
// that Reserve handed out. Without a Lockstep generator the ticket is ignored.
func WithTicket(ctx context.Context, t int64) context.Context {
	return context.WithValue(ctx, ticketKey{}, t)
}

// Reserve hands out n consecutive lockstep tickets and returns the first. A caller that starts n
// sessions at once (a rollout phase) reserves their tickets up front, in a fixed order, and opens
// each with WithTicket; every reserved ticket must be opened or given up with Skip, since the
// generator waits for the next ticket while a slot is free.
func (g *Generator) Reserve(n int) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.settleClosed()
	t := g.reserved
	g.reserved += int64(n)
	return t
}

// Skip gives up a reserved ticket that will not be opened. Skipping a ticket already admitted does
// nothing, so a caller may skip every ticket it reserved once its sessions are done. Without
// Lockstep tickets mean nothing and Skip does nothing.
func (g *Generator) Skip(t int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cfg.Lockstep && t >= g.admitNext {
		g.skipped[t] = true
		g.cond.Signal()
	}
}

// Open waits for a free slot and returns a session holding it: in arrival order, or with
// Config.Lockstep in ticket order (the context's WithTicket, else a ticket taken on arrival).
func (g *Generator) Open(ctx context.Context) (*Session, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, ErrClosed
	}
	if g.released {
		g.mu.Unlock()
		return nil, ErrReleased
	}
	w := waiter{ch: make(chan *Session, 1), ticket: -1}
	if t, ok := ctx.Value(ticketKey{}).(int64); ok && g.pausing {
		if g.cfg.Lockstep && t >= g.admitNext {
			g.skipped[t] = true
			g.cond.Signal()
		}
		g.mu.Unlock()
		return nil, ErrPaused
	}
	if g.cfg.Lockstep {
		if t, ok := ctx.Value(ticketKey{}).(int64); ok {
			w.ticket = t
		} else {
			g.settleClosed()
			w.ticket = g.reserved
			g.reserved++
		}
		if w.ticket < g.admitNext || g.skipped[w.ticket] {
			g.mu.Unlock()
			return nil, fmt.Errorf("rollout: lockstep ticket %d was already used or skipped", w.ticket)
		}
		g.waiters = append(g.waiters, w)
		g.cond.Signal() // the loop admits it when its turn comes
	} else if len(g.free) > 0 {
		id := g.free[0]
		g.free = g.free[1:]
		s := g.hold(id, TicketOf(ctx))
		g.mu.Unlock()
		return s, nil
	} else {
		w.ticket = TicketOf(ctx)
		g.waiters = append(g.waiters, w)
	}
	g.mu.Unlock()
	select {
	case s := <-w.ch:
		if s == nil {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.pausing && !g.closed {
				return nil, ErrPaused
			}
			return nil, ErrClosed
		}
		return s, nil
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.IndexFunc(g.waiters, func(o waiter) bool { return o.ch == w.ch }); i >= 0 {
			g.waiters = slices.Delete(g.waiters, i, i+1)
			if g.cfg.Lockstep {
				g.skipped[w.ticket] = true
				g.cond.Signal()
			}
			g.mu.Unlock()
		} else if s := <-w.ch; s != nil { // a slot was handed over just now: give it back
			g.mu.Unlock()
			s.Close()
		} else {
			g.mu.Unlock()
		}
		return nil, ctx.Err()
	}
}

// admit hands free slots, lowest first, to the waiting tickets in order; g.mu held, lockstep only.
func (g *Generator) admit() {
	for len(g.free) > 0 && g.admitNext < g.reserved {
		if g.skipped[g.admitNext] {
			delete(g.skipped, g.admitNext)
			g.admitNext++
			continue
		}
		i := slices.IndexFunc(g.waiters, func(w waiter) bool { return w.ticket == g.admitNext })
		if i < 0 {
			return // the next ticket has not arrived yet
		}
		w := g.waiters[i]
		g.waiters = slices.Delete(g.waiters, i, i+1)
		slices.Sort(g.free)
		id := g.free[0]
		g.free = g.free[1:]
		w.ch <- g.hold(id, w.ticket)
		g.admitNext++
	}
}

// lockstepReady takes what is due at the current tick and says whether a step may run now;
// g.mu held. In order: the slots whose session closed and whose due tick has come are freed; a
// held slot that is due but has neither asked nor closed (its tool is late) makes the loop wait;
// waiting tickets are admitted in order to the lowest free slots (a free slot waits for the next
// ticket to arrive), and they must ask before the step runs. When no slot has a request to run
// then, the clock skips to the next due tick.
//
// Everything here follows from the tick, never from the order in which sessions acted: when two
// sessions close in the same step, both slots are freed at their due ticks whatever the order of
// their Close calls, and the free slots go lowest first, so each trajectory runs in the same slot
// with the same neighbours, and its log-probs are the same to the bit, not only its tokens.
func (g *Generator) lockstepReady() bool {
	for {
		g.freeDue()
		if g.late() {
			return false
		}
		g.admit()
		if len(g.free) > 0 && g.admitNext < g.reserved {
			return false
		}
		if g.late() { // the sessions just admitted have yet to ask
			return false
		}
		if g.hasWork() {
			return true
		}
		next := int64(-1)
		for _, s := range g.slots {
			if s.held && s.due > g.tick && (next < 0 || s.due < next) {
				next = s.due
			}
		}
		if next < 0 {
			return false // nothing held: wait for a session
		}
		g.tick = next
	}
}

// freeDue frees the slots whose session closed once their due tick has come; g.mu held.
func (g *Generator) freeDue() {
	for _, s := range g.slots {
		if s.held && s.closed && s.due <= g.tick {
			s.held, s.closed = false, false
			g.free = append(g.free, s.id)
			g.freed(s)
		}
	}
}

// late says whether a held slot is due but its session has neither asked nor closed; g.mu held.
func (g *Generator) late() bool {
	for _, s := range g.slots {
		if s.held && !s.closed && s.gen == nil && s.due <= g.tick {
			return true
		}
	}
	return false
}

// settleClosed frees every held slot at once when every session has closed and no reserved
// ticket waits to be admitted (lockstep; g.mu held): nothing can run or be admitted before a new
// ticket is reserved, so this is where the clock would get to anyway, and the next tickets start
// from every slot free whether or not the loop got there first.
func (g *Generator) settleClosed() {
	if !g.cfg.Lockstep {
		return
	}
	for g.admitNext < g.reserved && g.skipped[g.admitNext] {
		delete(g.skipped, g.admitNext)
		g.admitNext++
	}
	if g.admitNext < g.reserved {
		return
	}
	for _, s := range g.slots {
		if s.held && !s.closed {
			return
		}
	}
	for _, s := range g.slots {
		if s.held {
			s.held, s.closed = false, false
			g.free = append(g.free, s.id)
			g.tick = max(g.tick, s.due) // where the loop's skips would have taken the clock
		}
	}
}

// TicketOf is the lockstep ticket ctx carries (WithTicket), -1 when none.
func TicketOf(ctx context.Context) int64 {
	if t, ok := ctx.Value(ticketKey{}).(int64); ok {
		return t
	}
	return -1
}

// hold marks slot id as owned by a new session with ticket; g.mu held.
func (g *Generator) hold(id int, ticket int64) *Session {
	s := g.slots[id]
	*s = slot{id: id, epoch: s.epoch + 1, held: true, idleAt: time.Now(), due: g.tick, ticket: ticket}
	return &Session{g: g, slot: s, epoch: s.epoch}
}

// release returns slot id to the next waiter or the free list at once (without Lockstep, which
// frees a slot at its due tick: freeDue); g.mu held.
func (g *Generator) release(id int) {
	s := g.slots[id]
	if s.gen != nil {
		s.gen.done <- ErrClosed
		s.gen = nil
	}
	s.held = false
	g.freed(s)
	if len(g.waiters) > 0 && !g.cfg.Lockstep {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		w.ch <- g.hold(id, w.ticket)
		return
	}
	g.free = append(g.free, id)
	g.cond.Signal()
}

// Close releases the session's slot (with Lockstep, at the step its next action is due). It is
// safe to call more than once.
func (s *Session) Close() {
	s.once.Do(func() {
		g := s.g
		g.mu.Lock()
		defer g.mu.Unlock()
		if s.slot.epoch != s.epoch || !s.slot.held {
			return
		}
		g.meterDone()
		if !g.cfg.Lockstep {
			g.release(s.slot.id)
			return
		}
		sl := s.slot
		if sl.gen != nil { // a request abandoned mid-way: a cancelled run
			sl.gen.done <- ErrClosed
			sl.gen = nil
		}
		sl.closed = true
		g.cond.Signal()
	})
}

// Len is the number of tokens in the session's context, written or pending.
func (s *Session) Len() int {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	return s.slot.pos + len(s.slot.pending)
}

// Generate appends req.Append to the context and samples until a stop condition. Cancelling ctx
// abandons the request and closes the session, freeing its slot.
func (s *Session) Generate(ctx context.Context, req Request) (Result, error) {
	g := s.g
	if len(req.StopStrings) > 0 && g.cfg.Decode == nil {
		return Result{}, errors.New("rollout: stop strings need Config.Decode")
	}
	for _, id := range req.Append {
		if id < 0 || int(id) >= g.m.Config.VocabSize {
			return Result{}, fmt.Errorf("rollout: token id %d is outside the vocabulary [0, %d)", id, g.m.Config.VocabSize)
		}
	}
	truncated := req.Sampling.TopK > 0 || (req.Sampling.TopP > 0 && req.Sampling.TopP < 1)
	if truncated && !g.cfg.Truncation {
		return Result{}, errors.New("rollout: top-k/top-p sampling needs Config.Truncation (the generator compiles the full-distribution sampler only)")
	}
	if req.Sampling.TopK > g.cfg.TopKMax {
		return Result{}, fmt.Errorf("rollout: top_k %d exceeds the compiled maximum %d", req.Sampling.TopK, g.cfg.TopKMax)
	}
	st := &genState{req: req, rng: rand.New(rand.NewPCG(req.Sampling.Seed, 0xda3e39cb94b95bdb)), done: make(chan error, 1)}
	g.mu.Lock()
	if g.closed || s.slot.epoch != s.epoch || !s.slot.held || s.slot.closed || s.slot.gen != nil {
		g.mu.Unlock()
		return Result{}, ErrClosed
	}
	if s.slot.pos+len(s.slot.pending)+len(req.Append) >= g.cfg.MaxLen {
		g.mu.Unlock()
		return Result{Stop: StopContext}, nil
	}
	if g.pausing {
		g.mu.Unlock()
		return Result{Stop: StopPaused}, nil
	}
	g.stats.ToolWait += time.Since(s.slot.idleAt)
	s.slot.pending = append(s.slot.pending, req.Append...)
	s.slot.gen = st
	g.cond.Signal()
	g.mu.Unlock()

	select {
	case err := <-st.done:
		return st.res, err
	case <-ctx.Done():
		s.Close() // drops the request and frees the slot; the loop never sees it again
		return Result{}, ctx.Err()
	}
}

// Generate is a one-shot request on a fresh session.
func (g *Generator) Generate(ctx context.Context, req Request) (Result, error) {
	s, err := g.Open(ctx)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	return s.Generate(ctx, req)
}

// Stats returns a snapshot of the counters.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.stats
	st.Queued = len(g.waiters)
	for _, s := range g.slots {
		if s.held && !s.closed {
			st.Busy++
		}
	}
	st.LiveCacheTensor = g.live
	return st
}

// ReleaseCache frees the KV cache so that the training phase has its memory: the time-shared
// device holds either the cache or the trainer's gradients and activations, never both. Every
// session must be closed first; Open fails with ErrReleased until RestoreCache. The compiled
// steps are kept. Releasing a released cache does nothing.
func (g *Generator) ReleaseCache() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	if g.released {
		return nil
	}
	g.settleClosed()
	for _, s := range g.slots {
		if s.held {
			return fmt.Errorf("rollout: cannot release the KV cache while slot %d is held by a session", s.id)
		}
	}
	// No slot is held, so the loop is waiting and touches no cache until a session opens.
	for _, t := range g.caches {
		t.FinalizeAll()
	}
	g.caches = nil
	g.released = true
	g.live = g.countLive()
	return nil
}

// RestoreCache allocates the KV cache again (zeroed: every session starts at position 0) after
// ReleaseCache; it does nothing when the cache is held.
func (g *Generator) RestoreCache() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	if !g.released {
		return nil
	}
	shape := model.CacheShape(g.m.Config, g.compute, g.cfg.Slots, g.cfg.MaxLen)
	caches := make([]*tensors.Tensor, 0, 2*g.m.Config.NumLayers)
	for i := 0; i < 2*g.m.Config.NumLayers; i++ {
		t, err := tensors.FromShapeForBackend(g.m.Backend, 0, shape)
		if err != nil {
			for _, c := range caches {
				c.FinalizeAll()
			}
			return fmt.Errorf("allocating KV cache (%s × %d): %w", shape, 2*g.m.Config.NumLayers, err)
		}
		caches = append(caches, t)
	}
	g.caches, g.released = caches, false
	g.live = g.countLive()
	return nil
}

// Config returns the effective configuration.
func (g *Generator) Config() Config { return g.cfg }

// Close stops the loop, fails pending requests and frees the caches and executables.
func (g *Generator) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	for _, w := range g.waiters {
		w.ch <- nil
	}
	g.waiters = nil
	g.cond.Broadcast()
	g.mu.Unlock()
	<-g.done
	for _, t := range g.caches {
		t.FinalizeAll()
	}
	for _, e := range g.execs {
		e.Finalize()
	}
}

// Err is the error that stopped the loop, if any.
func (g *Generator) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fail
}

// loop is the only goroutine that touches the device: it builds each step from the slots' state,
// runs it, and hands sampled tokens back.
func (g *Generator) loop() {
	defer close(g.done)
	for {
		g.mu.Lock()
		for !g.closed && !g.ready() {
			// With requests to decode, a lockstep wait is the batch standing still for a tool.
			stalled := g.cfg.Lockstep && g.hasWork()
			t := time.Now()
			if stalled && g.onStall != nil {
				g.onStall()
			}
			g.cond.Wait()
			if stalled {
				g.meterStall(time.Since(t))
			}
		}
		if g.closed {
			g.failAll(ErrClosed)
			g.mu.Unlock()
			return
		}
		key, in, active := g.plan()
		busy := g.busy()
		if g.trace != nil {
			g.trace(key, active)
		}
		g.mu.Unlock()

		t0 := time.Now()
		ids, lps, err := g.run(key, in)
		dt := time.Since(t0)

		g.mu.Lock()
		g.stats.Steps++
		g.stats.StepTime += dt
		g.tick++
		g.meterStep(busy, dt)
		if err != nil {
			g.fail = err
			g.closed = true
			g.failAll(err)
			g.mu.Unlock()
			return
		}
		g.stats.SlotSteps += int64(len(active))
		g.live = g.countLive()
		for _, a := range active {
			g.advance(a, ids[a.lane], lps[a.lane])
		}
		g.mu.Unlock()
	}
}

// failAll ends every running request with err; g.mu held.
func (g *Generator) failAll(err error) {
	for _, s := range g.slots {
		if s.gen != nil {
			s.gen.done <- err
			s.gen = nil
		}
	}
}

// ready says whether the loop has a step to run; g.mu held.
func (g *Generator) ready() bool {
	if g.cfg.Lockstep {
		return g.lockstepReady()
	}
	return g.hasWork()
}

// working says whether slot s has a request to run now: with Lockstep, one taken at its due tick.
func (g *Generator) working(s *slot) bool { return s.gen != nil && s.due <= g.tick }

// busy is the number of slots with a request in progress; g.mu held.
func (g *Generator) busy() int {
	n := 0
	for _, s := range g.slots {
		if g.working(s) {
			n++
		}
	}
	return n
}

func (g *Generator) hasWork() bool { return g.busy() > 0 }

// stepSlot records what a step fed for one slot.
type stepSlot struct {
	slot   *slot
	lane   int // the step row that carried it
	epoch  int
	fed    int  // tokens written this step
	sample bool // whether this step's sample belongs to the request
}

// plan chooses the next step and lays out its inputs; g.mu held. Slots with context to write
// (a prompt or a tool observation) are served by prefill steps of Config.PrefillLanes lanes,
// alternating with decode steps of every slot so that one slot's new turn never stalls the others.
func (g *Generator) plan() (key stepKey, in stepInputs, active []stepSlot) {
	var prefill, decode []*slot
	for _, s := range g.slots {
		switch {
		case !g.working(s) || len(s.pending) == 0:
		case len(s.pending) > 1:
			prefill = append(prefill, s)
		default:
			decode = append(decode, s)
		}
	}
	key.chunk = 1
	lanes := decode
	if len(prefill) > 0 && (len(decode) == 0 || !g.prefillLast) {
		if len(prefill) > g.cfg.PrefillLanes {
			// Longest first: a long prompt is the one that holds its slot's turn back most.
			slices.SortStableFunc(prefill, func(a, b *slot) int { return len(b.pending) - len(a.pending) })
			prefill = prefill[:g.cfg.PrefillLanes]
		}
		maxPending := 0
		for _, s := range prefill {
			maxPending = max(maxPending, len(s.pending))
		}
		key.chunk = g.cfg.Chunks[len(g.cfg.Chunks)-1]
		for _, ch := range g.cfg.Chunks[1:] {
			if ch >= maxPending {
				key.chunk = ch
				break
			}
		}
		lanes = prefill
	}
	g.prefillLast = key.chunk > 1
	in = g.newInputs(key)
	c := key.chunk
	need := 1
	for i, s := range lanes {
		lane := i
		if !g.indexed(key) {
			lane = s.id
		}
		in.slots[lane] = int32(s.id)
		k := min(len(s.pending), c)
		for j := 0; j < k; j++ {
			in.tokens[lane*c+j] = s.pending[j]
			in.positions[lane*c+j] = int32(s.pos + j)
		}
		in.last[lane] = int32(k - 1)
		need = max(need, s.pos+k)
		sp := s.gen.req.Sampling
		in.temp[lane] = sp.Temperature
		in.topK[lane] = int32(sp.TopK)
		if sp.TopP > 0 && sp.TopP < 1 {
			in.topP[lane] = sp.TopP
			key.truncate = true
		}
		if sp.TopK > 0 {
			key.truncate = true
		}
		sample := k == len(s.pending)
		if sample {
			in.u[lane] = s.gen.rng.Float32()
		}
		active = append(active, stepSlot{slot: s, lane: lane, epoch: s.epoch, fed: k, sample: sample})
	}
	key.bucket = g.cfg.Buckets[len(g.cfg.Buckets)-1]
	for _, bb := range g.cfg.Buckets {
		if bb >= need {
			key.bucket = bb
			break
		}
	}
	return key, in, active
}

// advance applies one step's outcome to a slot; g.mu held.
func (g *Generator) advance(a stepSlot, id int32, lp float32) {
	s := a.slot
	if s.gen == nil || s.epoch != a.epoch { // closed (and maybe reused) while the step ran
		return
	}
	s.pos += a.fed
	s.pending = s.pending[a.fed:]
	g.stats.PrefillTokens += int64(a.fed)
	if !a.sample {
		return
	}
	st := s.gen
	g.stats.Tokens++
	st.res.IDs = append(st.res.IDs, id)
	st.res.LogProbs = append(st.res.LogProbs, lp)
	if st.req.OnToken != nil {
		st.req.OnToken(id, lp)
	}
	// The sampled token is not in the cache yet: it is written by the next step of this slot.
	s.pending = append(s.pending[:0], id)
	switch {
	case slices.Contains(st.req.StopIDs, id):
		st.res.Stop = StopToken
		if g.cfg.Decode != nil {
			st.res.Matched = g.cfg.Decode([]int32{id})
		}
	case g.matchStop(st):
	case st.req.MaxNew > 0 && len(st.res.IDs) >= st.req.MaxNew:
		st.res.Stop = StopMaxNew
	case s.pos+len(s.pending) >= g.cfg.MaxLen:
		st.res.Stop = StopContext
	default:
		return
	}
	s.gen = nil
	s.idleAt = time.Now()
	if g.cfg.Lockstep { // the tick after this step, or when its tool would return
		s.due = g.tick
		if st.res.Stop == StopString {
			s.due = g.toolReturn()
		}
	}
	st.done <- nil
}

// toolReturn is the tick at which a tool call made now would end in the model of
// Config.ToolWorkers workers each taking Config.ToolReturnSteps steps a call; g.mu held.
func (g *Generator) toolReturn() int64 {
	d := int64(g.cfg.ToolReturnSteps)
	if len(g.workerFree) == 0 {
		return g.tick + d
	}
	w := 0
	for i, f := range g.workerFree {
		if f < g.workerFree[w] {
			w = i
		}
	}
	g.workerFree[w] = max(g.tick, g.workerFree[w]) + d
	return g.workerFree[w]
}

// matchStop checks whether the newest token completed a stop string.
func (g *Generator) matchStop(st *genState) bool {
	if len(st.req.StopStrings) == 0 {
		return false
	}
	ids := st.res.IDs
	from := max(0, len(ids)-16)
	now := g.cfg.Decode(ids[from:])
	before := g.cfg.Decode(ids[from : len(ids)-1])
	for _, stop := range st.req.StopStrings {
		if strings.Contains(now, stop) && !strings.Contains(before, stop) {
			st.res.Stop, st.res.Matched = StopString, stop
			return true
		}
	}
	return false
}

// PauseWhen starts a phase that may end before its sessions do (a partial rollout): rule sees
// the ticket of each session as its slot is freed (with Lockstep at the session's due tick, in
// slot order, so the moment follows from decode-step counts alone) and, when it returns true,
// the phase pauses: every running request returns at once with StopPaused and the tokens it
// sampled so far, later requests return StopPaused without running, and sessions not yet
// started get ErrPaused from Open. A nil rule ends the pause (after the phase's sessions have
// closed), so the next phase runs whole.
func (g *Generator) PauseWhen(rule func(ticket int64) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pauseRule, g.pausing = rule, false
}

// freed tells the pause rule that slot s's session ended; g.mu held.
func (g *Generator) freed(s *slot) {
	if g.pauseRule == nil || g.pausing || !g.pauseRule(s.ticket) {
		return
	}
	g.pausing = true
	for _, o := range g.slots {
		if st := o.gen; st != nil {
			st.res.Stop = StopPaused
			o.gen = nil
			o.idleAt = time.Now()
			if g.cfg.Lockstep {
				o.due = g.tick
			}
			st.done <- nil
		}
	}
	for _, w := range g.waiters {
		if g.cfg.Lockstep {
			g.skipped[w.ticket] = true
		}
		w.ch <- nil
	}
	g.waiters = nil
	g.cond.Signal()
}
