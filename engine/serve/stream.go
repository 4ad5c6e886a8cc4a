package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// feed carries a streamed reply's tokens from the generator's loop to the request's handler.
// push runs with the generator's lock held, so it only appends and signals.
type feed struct {
	mu      sync.Mutex
	ids     []int32
	started bool
	note    chan struct{} // signalled (never blocking) on each change
}

func newFeed() *feed { return &feed{note: make(chan struct{}, 1)} }

func (f *feed) signal() {
	select {
	case f.note <- struct{}{}:
	default:
	}
}

// begin says the request passed its checks and generation starts: the stream may open.
func (f *feed) begin() {
	f.mu.Lock()
	f.started = true
	f.mu.Unlock()
	f.signal()
}

func (f *feed) push(id int32, _ float32) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	f.signal()
}

// snapshot is the tokens so far and whether generation started.
func (f *feed) snapshot() ([]int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int32(nil), f.ids...), f.started
}

// deltas cuts a growing reply text into the content deltas that are safe to send: never text
// past a stop string or a tool call's opening, nor a tail that may still become one (or, with
// tool calls parsed, trailing whitespace, which the content before a call loses), nor an
// incomplete UTF-8 character. What it sends is always a prefix of the reply's final content.
type deltas struct {
	holds   []string // stop strings and call openings
	markers []string // call openings: nothing after one is content
	trim    bool     // hold trailing whitespace back
	sent    string   // the content sent so far
}

func newDeltas(p replyParse) *deltas {
	m := p.markers()
	return &deltas{holds: append(append([]string{}, p.stops...), m...), markers: m, trim: len(m) > 0}
}

// next returns the new content that text (the reply so far, stop strings already cut) allows.
func (d *deltas) next(text string) string {
	cut := len(text)
	for _, m := range d.markers {
		if i := strings.Index(text, m); i >= 0 && i < cut {
			cut = i
		}
	}
	hold := 0
	for _, h := range d.holds {
		for k := min(len(h)-1, cut); k > hold; k-- {
			if strings.HasSuffix(text[:cut], h[:k]) {
				hold = k
				break
			}
		}
	}
	cut -= hold
	if d.trim {
		cut = len(strings.TrimRight(text[:cut], " \t\r\n"))
	}
	for strings.HasSuffix(text[:cut], "\uFFFD") {
		cut -= len("\uFFFD")
	}
	if cut <= len(d.sent) || !strings.HasPrefix(text, d.sent) {
		return ""
	}
	out := text[len(d.sent):cut]
	d.sent = text[:cut]
	return out
}

// rest is what is left to send of the final content ("" when what was sent is not its prefix,
// which the holding back above rules out).
func (d *deltas) rest(content string) string {
	if !strings.HasPrefix(content, d.sent) {
		return ""
	}
	return content[len(d.sent):]
}

// sse writes server-sent events: "data: {json}\n\n", flushed at once.
type sse struct {
	w     http.ResponseWriter
	f     http.Flusher
	begun bool
}

func newSSE(w http.ResponseWriter) *sse {
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// open sends the headers of an event stream.
func (e *sse) open() {
	if e.begun {
		return
	}
	e.begun = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	e.w.WriteHeader(http.StatusOK)
}

// send writes one event holding v.
func (e *sse) send(v any) {
	var b bytes.Buffer
	b.WriteString("data: ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // our own types: they encode
	b.WriteString("\n")
	e.write(b.Bytes())
}

// done ends the stream as OpenAI does.
func (e *sse) done() { e.write([]byte("data: [DONE]\n\n")) }

func (e *sse) write(b []byte) {
	_, _ = e.w.Write(b) // a client that went away cancels the request's context
	if e.f != nil {
		e.f.Flush()
	}
}

// streamRun runs a job with its reply streamed: the handler's goroutine waits for the job to
// pass its checks (an error before that is an ordinary error response), then opens the event
// stream and sends each new piece of text through chunk as tokens arrive, and finally calls
// finish with the outcome (or, after the stream opened, sends the error as an event).
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, t *trajectory, j *job,
	first func(e *sse), chunk func(e *sse, text string), finish func(e *sse, o *outcome, d *deltas)) {
	f := newFeed()
	type result struct {
		o   *outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := s.run(r.Context(), t, j, f)
		done <- result{o, err}
	}()
	e := newSSE(w)
	d := newDeltas(j.parse)
	for {
		select {
		case <-f.note:
			ids, started := f.snapshot()
			if !started {
				continue
			}
			if !e.begun {
				e.open()
				first(e)
			}
			if text := d.next(s.body(ids, j.parse)); text != "" {
				chunk(e, text)
			}
		case res := <-done:
			if res.err != nil {
				if !e.begun {
					writeError(w, res.err)
					return
				}
				e.send(asAPIError(res.err).body())
				e.done()
				return
			}
			if !e.begun {
				e.open()
				first(e)
			}
			finish(e, res.o, d)
			e.done()
			return
		}
	}
}
