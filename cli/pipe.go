package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"agentrl/ui"
)

// A run's standard output and error belong to whoever reads them, who may go away (`| head`, a
// `tee` killed by the same Ctrl-C, a closed terminal) or stop reading (a paused pager, a full
// pipe). Neither may end or stall the run: what it writes goes through an outStream, which
// writes from a goroutine of its own, drops whole lines while its reader lags by more than
// outLimit (and says how many once it catches up), and stops for good at the first write error
// (EPIPE, EIO), telling standard error once when standard output went. The run goes on to its
// stop rule or its signal and saves as ever.
//
// SIGPIPE: a write to a broken pipe on fd 1 or 2 raises it, and Go's runtime ends the process
// by it (exit 141) unless the program asks for the signal with signal.Notify (os/signal, "SIGPIPE").
// guardOutput asks for it for the rest of the process, so such a write returns EPIPE instead. It
// is notified, not ignored (signal.Ignore): an ignored SIGPIPE is inherited by the processes the
// run starts (a sandbox's interpreter, an external agent), a caught one is reset by exec.

// outLimit is how far a reader may lag before lines are dropped. A line is taken whatever its
// size when nothing waits (a step's JSON events can be megabytes).
const outLimit = 16 << 20

// outFlushIdle is how long the end of a run waits for a reader that takes nothing at all before
// it leaves the rest unwritten (a reader that takes something keeps it waiting); outAbortIdle the
// same after an abort, which ends the process at once.
const (
	outFlushIdle = 2 * time.Second
	outAbortIdle = 200 * time.Millisecond
)

var sigpipeOnce sync.Once

// survivePipes makes writes to broken pipes fail with EPIPE instead of ending the process.
func survivePipes() {
	sigpipeOnce.Do(func() { signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE) })
}

// guardOutput returns env with its standard output and error going through outStreams (one shared
// stream when both are the same file, so their lines keep their order), and a function that writes
// what is left, waiting while the reader takes it or for idle at most when it takes nothing, to
// call before the process exits (the first call ends the streams; later ones do nothing). In the
// workbench standard output is the terminal bubbletea draws on, and is left as it is.
func guardOutput(env Env, mode string) (Env, func(idle time.Duration)) {
	survivePipes()
	var streams []*outStream
	stream := func(w io.Writer, note func(int) string) *outStream {
		s := newOutStream(w, note)
		streams = append(streams, s)
		return s
	}
	plainNote := func(n int) string {
		return fmt.Sprintf("agentrl-tui: %d lines of output dropped here: the reader did not keep up\n", n)
	}
	outNote := plainNote
	if mode == ui.ModeJSON {
		outNote = func(n int) string { return fmt.Sprintf("{\"type\":\"output_dropped\",\"lines\":%d}\n", n) }
	}
	orig := env
	var errStream *outStream
	if env.Stderr != nil {
		errStream = stream(env.Stderr, plainNote)
		env.Stderr = errStream
	}
	if env.Stdout != nil && mode != ui.ModeTUI {
		if errStream != nil && sameFile(orig.Stdout, orig.Stderr) {
			env.Stdout = errStream
		} else {
			out := stream(env.Stdout, outNote)
			env.Stdout = out
			if errStream != nil {
				out.gone = func(err error) {
					fmt.Fprintf(errStream, "agentrl-tui: standard output is gone (%v): its lines stop here; the run goes on and saves as it ends\n", err)
				}
			}
		}
	}
	var once sync.Once
	return env, func(idle time.Duration) {
		once.Do(func() {
			for _, s := range streams {
				s.close(idle)
			}
		})
	}
}

// outputGone reports whether w is an outStream whose writes failed.
func outputGone(w io.Writer) bool {
	s, ok := w.(*outStream)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// sameFile reports whether a and b are the same open file (a pipe or terminal shared by 2>&1).
func sameFile(a, b io.Writer) bool {
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok1 || !ok2 {
		return false
	}
	sa, err1 := fa.Stat()
	sb, err2 := fb.Stat()
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// outStream is a writer that never blocks and never fails: a goroutine writes what it is given
// to w, whole lines are dropped while more than outLimit waits, and the first write error stops
// the stream (everything after is discarded).
type outStream struct {
	w     io.Writer
	note  func(lines int) string // the line saying lines were dropped
	gone  func(err error)        // told once, when a write fails
	limit int                    // outLimit

	mu        sync.Mutex
	cond      *sync.Cond
	buf       []byte // waiting to be written
	lineStart bool   // the last byte taken ended a line
	dropping  bool   // inside a line being dropped
	dropped   int    // lines dropped since the last note
	written   int64  // bytes written, to tell a slow reader from none
	err       error  // the write error that stopped the stream
	closed    bool
	done      chan struct{}
}

func newOutStream(w io.Writer, note func(int) string) *outStream {
	s := &outStream{w: w, note: note, limit: outLimit, lineStart: true, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	return s
}

// Write takes p, or drops it line by line, without waiting; it always reports success.
func (s *outStream) Write(p []byte) (int, error) {
	n := len(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.closed {
		return n, nil
	}
	for len(p) > 0 {
		seg := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			seg = p[:i+1]
		}
		p = p[len(seg):]
		ends := seg[len(seg)-1] == '\n'
		switch {
		case s.dropping:
			if ends {
				s.dropping, s.dropped = false, s.dropped+1
			}
		case !s.lineStart: // the rest of a line begun: take it, unless the reader is far behind
			if len(s.buf)+len(seg) <= 2*s.limit {
				s.take(seg)
				continue
			}
			s.buf = append(s.buf, " …\n"...)
			s.lineStart, s.dropping, s.dropped = true, !ends, s.dropped+1
		default:
			note := ""
			if s.dropped > 0 {
				note = s.note(s.dropped)
			}
			if len(s.buf) == 0 || len(s.buf)+len(note)+len(seg) <= s.limit {
				if note != "" {
					s.buf, s.dropped = append(s.buf, note...), 0
				}
				s.take(seg)
				continue
			}
			if ends {
				s.dropped++
			} else {
				s.dropping = true
			}
		}
	}
	return n, nil
}

func (s *outStream) take(seg []byte) {
	s.buf = append(s.buf, seg...)
	s.lineStart = seg[len(seg)-1] == '\n'
	s.cond.Signal()
}

// run writes what waits until the stream is closed and empty, or a write fails.
func (s *outStream) run() {
	defer close(s.done)
	var spare []byte
	for {
		s.mu.Lock()
		for len(s.buf) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.buf) == 0 {
			s.mu.Unlock()
			return
		}
		chunk := s.buf
		s.buf = spare[:0]
		s.mu.Unlock()
		var err error
		for rest := chunk; len(rest) > 0 && err == nil; { // in pieces, so that close sees a slow reader take them
			piece := rest[:min(len(rest), 64<<10)]
			var n int
			n, err = s.w.Write(piece)
			if err == nil && n < len(piece) {
				err = io.ErrShortWrite
			}
			rest = rest[len(piece):]
			s.mu.Lock()
			s.written += int64(n)
			s.mu.Unlock()
		}
		s.mu.Lock()
		if err != nil {
			s.err, s.buf = err, nil
			gone := s.gone
			s.mu.Unlock()
			if gone != nil {
				gone(err)
			}
			return
		}
		spare = chunk
		s.mu.Unlock()
	}
}

// close writes what waits and ends the stream, waiting while the reader takes something; after
// idle without a byte taken it leaves the rest unwritten.
func (s *outStream) close(idle time.Duration) {
	s.mu.Lock()
	if s.dropped > 0 && !s.closed && s.err == nil { // the last lines were dropped: say so at the end
		if !s.lineStart {
			s.buf = append(s.buf, '\n')
		}
		s.buf, s.dropped = append(s.buf, s.note(s.dropped)...), 0
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	last, since := int64(-1), time.Now()
	tick := time.NewTicker(idle / 20)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		w := s.written
		s.mu.Unlock()
		if w != last {
			last, since = w, time.Now()
		} else if time.Since(since) >= idle {
			return
		}
	}
}
