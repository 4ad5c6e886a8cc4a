package tfevents

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskedCRC is the masked CRC-32C (Castagnoli) of b that frames a record.
func MaskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// AppendRecord appends data framed as one record to dst.
func AppendRecord(dst, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	dst = append(dst, n[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, MaskedCRC(n[:]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, MaskedCRC(data))
}

// ErrTruncated is a file that ends inside a record: its writer is writing it, or stopped while
// it did.
var ErrTruncated = errors.New("ends inside a record")

// maxRecord bounds a record's length (an event is a few kilobytes): a larger one is corruption.
const maxRecord = 1 << 30

// ReadRecords calls fn with each record's data in r, in order, checking both CRCs. A reader that
// ends inside a record gives ErrTruncated after the records before it.
func ReadRecords(r io.Reader, fn func(data []byte) error) error {
	br := bufio.NewReader(r)
	var head [12]byte
	for i := 0; ; i++ {
		if _, err := io.ReadFull(br, head[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			if err == io.ErrUnexpectedEOF {
				return fmt.Errorf("record %d: %w", i, ErrTruncated)
			}
			return err
		}
		if got, want := binary.LittleEndian.Uint32(head[8:]), MaskedCRC(head[:8]); got != want {
			return fmt.Errorf("record %d: the length's CRC is %#08x, not %#08x: not an event file, or corrupted", i, got, want)
		}
		n := binary.LittleEndian.Uint64(head[:8])
		if n > maxRecord {
			return fmt.Errorf("record %d: length %d is past %d bytes", i, n, maxRecord)
		}
		data := make([]byte, n+4)
		if _, err := io.ReadFull(br, data); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return fmt.Errorf("record %d: %w", i, ErrTruncated)
			}
			return err
		}
		if got, want := binary.LittleEndian.Uint32(data[n:]), MaskedCRC(data[:n]); got != want {
			return fmt.Errorf("record %d: the data's CRC is %#08x, not %#08x: corrupted", i, got, want)
		}
		if err := fn(data[:n]); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
	}
}

// ReadFile reads the events of one event file. A file that ends inside a record gives the
// events before it and an error wrapping ErrTruncated.
func ReadFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var evs []Event
	err = ReadRecords(f, func(data []byte) error {
		e, err := Unmarshal(data)
		if err != nil {
			return err
		}
		evs = append(evs, e)
		return nil
	})
	if err != nil {
		return evs, fmt.Errorf("%s: %w", path, err)
	}
	return evs, nil
}

// Files lists the event files in dir (names holding "tfevents", as TensorBoard finds them) in
// the order TensorBoard reads them: by name, which begins with the time each was created.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.Contains(e.Name(), "tfevents") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// LastSteps is, for each tag in the event files of dir, the greatest step it has a value at;
// empty when dir has no event files (or does not exist). A file that ends inside a record (its
// writer was killed) counts up to that record.
func LastSteps(dir string) (map[string]int64, error) {
	last := map[string]int64{}
	files, err := Files(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return last, nil
	}
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		evs, err := ReadFile(f)
		if err != nil && !errors.Is(err, ErrTruncated) {
			return nil, err
		}
		for _, e := range evs {
			for _, v := range e.Values {
				if s, ok := last[v.Tag]; !ok || e.Step > s {
					last[v.Tag] = e.Step
				}
			}
		}
	}
	return last, nil
}

// Writer appends events to a new event file.
type Writer struct {
	f    *os.File
	bw   *bufio.Writer
	path string
	buf  []byte
}

// Create makes dir (and its parents) and in it a new event file named as TensorFlow names them,
// events.out.tfevents.SECONDS.HOSTNAME (with .1, .2, … after it when that name is taken), and
// writes the file-version event first.
func Create(dir string, now time.Time) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, host)
	if host == "" {
		host = "localhost"
	}
	base := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s", now.Unix(), host))
	for n := 0; ; n++ {
		path := base
		if n > 0 {
			path = fmt.Sprintf("%s.%d", base, n)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		w := &Writer{f: f, bw: bufio.NewWriter(f), path: path}
		if err := w.Write(Event{WallTime: Seconds(now), FileVersion: FileVersion}); err != nil {
			f.Close()
			return nil, err
		}
		return w, nil
	}
}

// Seconds is t as an event's wall time: seconds since the Unix epoch.
func Seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Path is the file's path.
func (w *Writer) Path() string { return w.path }

// Write appends one event (buffered until Flush or Close).
func (w *Writer) Write(e Event) error {
	w.buf = AppendRecord(w.buf[:0], Marshal(e))
	_, err := w.bw.Write(w.buf)
	return err
}

// Flush writes the buffered events to the file, where a reader sees them.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}
