package export

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"agentrl/engine/event"
)

// Tee passes every event of in to the returned stream unchanged and in order, and hands a copy of
// what a Board writes to b in a goroutine of its own behind a queue that never blocks: a board
// that is slow, or whose disk hangs, neither slows nor stops the run. The board's first error is
// reported once, as an event.Error in the stream ahead of the next event, and the board writes
// nothing after it; the run goes on. The stream is closed when in is. wait then waits at most
// timeout for the board to write what is queued and close its file, and returns the board's
// error if the stream closed before it could carry it (nil otherwise).
func Tee(in <-chan event.Event, b *Board) (out <-chan event.Event, wait func(timeout time.Duration) error) {
	ch := make(chan event.Event, cap(in))
	q := &queue{wake: make(chan struct{}, 1)}
	failed := make(chan string, 1) // the board's first error, said for people, until the stream carries it
	done := make(chan struct{})
	go func() { // the board's writer
		defer close(done)
		var err error
		said := false
		for {
			evs, closed := q.take()
			for _, e := range evs {
				if err == nil {
					err = b.Observe(e)
				}
			}
			if err == nil {
				err = b.Flush()
			}
			if closed {
				if cerr := b.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil && !said { // once: the channel has room for it
				said = true
				failed <- failureLine(b, err)
			}
			if closed {
				return
			}
		}
	}()
	go func() { // the stream
		defer close(ch)
		for e := range in {
			if kept, ok := boardEvent(e); ok {
				q.push(kept)
			}
			select {
			case msg := <-failed:
				ch <- event.Error{Message: msg}
			default:
			}
			ch <- e
		}
		q.close()
	}()
	return ch, func(timeout time.Duration) error {
		select {
		case <-done:
		case <-time.After(timeout):
			return fmt.Errorf("tensorboard: the logs under %s were still being written after %v; the last steps may be missing", b.root, timeout)
		}
		select {
		case msg := <-failed:
			return errors.New(msg)
		default:
			return nil
		}
	}
}

func failureLine(b *Board, err error) string {
	where := b.root
	if b.Dir() != "" {
		where = b.Dir()
	}
	return fmt.Sprintf("tensorboard: %v; the run goes on, writing no more TensorBoard logs to %s", err, where)
}

// boardEvent is what the board keeps of e (a trajectory without its turns and texts), false
// for an event it does not read.
func boardEvent(e event.Event) (event.Event, bool) {
	switch e := e.(type) {
	case event.RunStart, event.Phase, event.StepMetrics, event.Eval, event.RunEnd:
		return e, true
	case event.Trajectory:
		if e.Eval {
			return nil, false
		}
		kept := event.Trajectory{Step: e.Step, Reward: e.Reward, Tokens: e.Tokens, Pieces: e.Pieces, Paused: e.Paused}
		if e.IsDropped() {
			kept.Agent = &event.Agent{Drop: e.Agent.Drop}
		}
		return kept, true
	}
	return nil, false
}

// queue is an unbounded queue of events with one reader.
type queue struct {
	mu     sync.Mutex
	evs    []event.Event
	closed bool
	wake   chan struct{}
}

func (q *queue) push(e event.Event) {
	q.mu.Lock()
	q.evs = append(q.evs, e)
	q.mu.Unlock()
	q.signal()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take waits for events, or for the close, and returns what was queued.
func (q *queue) take() ([]event.Event, bool) {
	for {
		q.mu.Lock()
		evs, closed := q.evs, q.closed
		q.evs = nil
		q.mu.Unlock()
		if len(evs) > 0 || closed {
			return evs, closed
		}
		<-q.wake
	}
}
