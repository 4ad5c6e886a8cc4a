package event

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
)

// maxLine bounds one JSON line of a recording (a trajectory with its token pieces can be large).
const maxLine = 64 << 20

// Recording is an ordered stream of events as kept in a JSON Lines file: one event per line,
// each an object with its "type" first (the form Marshal writes and `--ui=json` prints).
type Recording []Event

// ReadRecording reads a JSON Lines file of events.
func ReadRecording(path string) (Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("event recording: %w", err)
	}
	defer f.Close()
	return DecodeRecording(f, path)
}

// DecodeRecording reads JSON Lines of events from r; name (a file name) is used in errors, which
// also give the line number. Blank lines are skipped.
func DecodeRecording(r io.Reader, name string) (Recording, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var rec Recording
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		e, err := Unmarshal(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, n, err)
		}
		rec = append(rec, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w (lines are limited to %d MiB)", name, err, maxLine>>20)
	}
	return rec, nil
}

// WriteTo writes the recording as JSON Lines.
func (r Recording) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	for i, e := range r {
		line, err := Marshal(e)
		if err != nil {
			return n, fmt.Errorf("event %d (%s): %w", i, e.Type(), err)
		}
		m, err := bw.Write(append(line, '\n'))
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

// Replay sends the events in order on out, stopping early when ctx ends (returning its error).
// It does not close out.
func (r Recording) Replay(ctx context.Context, out chan<- Event) error {
	for _, e := range r {
		select {
		case out <- e:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
