package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"agentrl/engine/rollout"
)

// job is a parsed request, ready to run against its trajectory.
type job struct {
	endpoint  string // "chat.completions", "completions"
	plan      func(*trajectory) (*plan, error)
	parse     replyParse
	sampling  sampling // the request's own values
	maxNew    int      // the request's max_tokens (0: not given)
	ignoreEOS bool
}

// outcome is an answered request.
type outcome struct {
	reply                reply
	promptTokens, reused int
}

// run answers a request on trajectory t: it waits for the trajectory's previous request, plans
// the prompt (continuing the segment or starting one), checks it fits, samples the reply in the
// trajectory's session (feed, when set, sees each token as it comes: a streamed reply) and
// records it. An error leaves the trajectory as it was.
func (s *Server) run(ctx context.Context, t *trajectory, j *job, f *feed) (*outcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()
	if err := t.acquire(ctx); err != nil {
		return nil, s.interrupted(ctx, t, err)
	}
	defer t.release()
	s.weights.RLock() // a weight reload waits for this reply
	defer s.weights.RUnlock()
	start := time.Now()
	p, err := j.plan(t)
	if err != nil {
		return nil, err
	}
	limit := s.limit
	if t.opts.MaxTotalTokens > 0 {
		limit = min(limit, t.opts.MaxTotalTokens)
	}
	promptLen := len(p.kept) + len(p.add)
	if promptLen >= limit {
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded",
			Message: fmt.Sprintf("this request's prompt is %d tokens and a trajectory's context holds at most %d, prompt and reply together: "+
				"shorten the conversation (or raise --max-total-tokens, at most the model's slot)", promptLen, limit)}
	}
	maxNew := limit - promptLen
	if j.maxNew > 0 {
		maxNew = min(maxNew, j.maxNew)
	} else if s.o.MaxNewTokens > 0 {
		maxNew = min(maxNew, s.o.MaxNewTokens)
	}
	sp, err := s.samplingFor(t, j.sampling)
	if err != nil {
		return nil, err
	}
	appendIDs, reused, err := s.session(ctx, t, p)
	if err != nil {
		return nil, s.interrupted(ctx, t, err)
	}
	req := rollout.Request{Append: appendIDs, Sampling: sp, MaxNew: maxNew, StopStrings: j.parse.stops}
	if !j.ignoreEOS {
		req.StopIDs = s.o.StopIDs
	}
	if f != nil {
		f.begin()
		req.OnToken = f.push
	}
	res, err := t.sess.Generate(ctx, req)
	if err != nil {
		s.closeSession(t) // cancelled or failed: the slot's context is no longer the segment's
		return nil, s.interrupted(ctx, t, err)
	}
	parse := j.parse
	parse.callID = fmt.Sprintf("call_%d", t.answered)
	r := s.makeReply(res, parse)
	s.record(t, j, p, r, sp, start, promptLen, reused)
	return &outcome{reply: r, promptTokens: promptLen, reused: reused}, nil
}

// interrupted explains why a request could not go on: its trajectory finished, the server
// closed, the client went away, or the generator failed.
func (s *Server) interrupted(ctx context.Context, t *trajectory, err error) error {
	switch {
	case s.ctx.Err() != nil:
		return serverError(http.StatusServiceUnavailable, "the server is shutting down")
	case t.ctx.Err() != nil:
		return unauthorized("the API key %s was revoked while this request ran: %v", redact(t.key), errFinished)
	case ctx.Err() != nil:
		return ctx.Err() // the client went away: nobody to tell
	case errors.Is(err, rollout.ErrClosed), errors.Is(err, rollout.ErrReleased):
		return serverError(http.StatusServiceUnavailable, "the generator is not serving now (%v); try again later", err)
	}
	return serverError(http.StatusInternalServerError, "generation failed: %v", err)
}

// record adds an answered request to its trajectory: the prompt tokens it added and the sampled
// ones to the segment, the turn to the transcript, a drift finding if its context does not read
// as the template renders it; t.lock held.
func (s *Server) record(t *trajectory, j *job, p *plan, r reply, sp rollout.Sampling, start time.Time, promptLen, reused int) {
	rec := &t.rec
	next := p.next
	if !p.extend {
		if s.o.Open { // an open server keeps only the current segment
			rec.Segments, rec.Turns = rec.Segments[:0], nil
		}
		rec.Segments = append(rec.Segments, Segment{PromptLen: len(p.add)})
		next.index = len(rec.Segments) - 1
	}
	seg := &rec.Segments[next.index]
	seg.add(p.add, false, nil)
	seg.add(r.ids, true, r.lps)
	next.reply = r
	if next.kind == "text" {
		next.text += r.content
	}
	t.cur = &next
	if d := s.driftFinding(p); d != "" && rec.Drift == "" {
		rec.Drift = fmt.Sprintf("request %d (segment %d): %s", t.answered, next.index, d)
	}
	if !s.o.Open {
		rec.Turns = append(rec.Turns, Turn{Request: t.answered, Segment: next.index, Endpoint: j.endpoint, Messages: p.added,
			PromptTokens: promptLen, Reused: reused, Content: r.content, ToolCalls: r.calls, Finish: r.finish, CompletionTokens: len(r.ids),
			Seed: sp.Seed, Temperature: sp.Temperature, TopP: sp.TopP, TopK: sp.TopK, Duration: time.Since(start)})
	}
	t.answered++
	s.mu.Lock()
	t.lastUsed = time.Now()
	s.mu.Unlock()
}

// samplingFor resolves a request's sampling on its trajectory: the trajectory's policy, the
// request's values where it gives them (unless the trajectory overrides them), and the seed:
// the request's (unless overridden), else one derived from the trajectory's seed and the
// request's index.
func (s *Server) samplingFor(t *trajectory, q sampling) (rollout.Sampling, error) {
	pol := s.o.Sampling
	if t.opts.Sampling != nil {
		pol = *t.opts.Sampling
	}
	if !t.opts.Override {
		if q.Temperature != nil {
			pol.Temperature = *q.Temperature
		}
		if q.TopP != nil {
			pol.TopP = *q.TopP
		}
		if q.TopK != nil {
			pol.TopK = *q.TopK
		}
	}
	if err := s.checkSampling(pol, ""); err != nil {
		return rollout.Sampling{}, err
	}
	seed := requestSeed(t.opts.Seed, t.answered)
	if q.Seed != nil && !t.opts.Override {
		seed = uint64(*q.Seed)
	}
	return rollout.Sampling{Temperature: pol.Temperature, TopP: pol.TopP, TopK: pol.TopK, Seed: seed}, nil
}

// checkSampling refuses values the generator cannot sample with; where names the source ("":
// the request's fields).
func (s *Server) checkSampling(p Sampling, where string) error {
	field := func(name string) string {
		if where == "" {
			return name
		}
		return where + "." + name
	}
	switch {
	case p.Temperature < 0 || p.Temperature > 2:
		return badRequest(field("temperature"), "%s is %g: want a value in [0, 2]", field("temperature"), p.Temperature)
	case p.TopP < 0 || p.TopP > 1:
		return badRequest(field("top_p"), "%s is %g: want a value in (0, 1]", field("top_p"), p.TopP)
	case p.TopK < 0:
		return badRequest(field("top_k"), "%s is %d: want 0 (off) or more", field("top_k"), p.TopK)
	}
	truncated := p.TopK > 0 || (p.TopP > 0 && p.TopP < 1)
	if truncated && s.topK == 0 {
		return badRequest(field("top_p"), "%s %g / top_k %d truncate the distribution, which this server's generator was not compiled for: send top_p 1 and no top_k (or serve with truncated sampling compiled)", field("top_p"), p.TopP, p.TopK)
	}
	if p.TopK > s.topK && s.topK > 0 {
		return badRequest(field("top_k"), "%s is %d: this generator was compiled for at most %d", field("top_k"), p.TopK, s.topK)
	}
	return nil
}
