package tfevents

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestMaskedCRC checks the CRC against the published CRC-32C check value and the framing of a
// real TensorFlow event file's first record: 24 bytes (the file-version event with its wall
// time), whose length every such file begins with, 18 00 00 00 00 00 00 00 a3 7f 4b 22.
func TestMaskedCRC(t *testing.T) {
	if got := crc32cOf([]byte("123456789")); got != 0xe3069283 {
		t.Errorf("crc32c(123456789) = %#x; want 0xe3069283", got)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], 24)
	if got := MaskedCRC(n[:]); got != 0x224b7fa3 {
		t.Errorf("masked crc of length 24 = %#x; want 0x224b7fa3", got)
	}
	if got := len(Marshal(Event{WallTime: 1.7e9, FileVersion: FileVersion})); got != 24 {
		t.Errorf("the file-version event is %d bytes; want 24", got)
	}
}

func crc32cOf(b []byte) uint32 {
	m := MaskedCRC(b) - 0xa282ead8 // unmask: rotate left by 15
	return m<<15 | m>>17
}

// TestMarshalKnownBytes encodes events by hand from event.proto and summary.proto.
func TestMarshalKnownBytes(t *testing.T) {
	f64 := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	f32 := func(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name string
		e    Event
		want []byte
	}{
		{"file version", Event{WallTime: 2, FileVersion: "brain.Event:2"},
			cat([]byte{0x09}, f64(2), []byte{0x1a, 13}, []byte("brain.Event:2"))},
		{"scalar", Event{WallTime: 1.5, Step: 3, Values: []Value{Scalar("a", 0.5)}},
			// Event: wall_time, step 3, summary (10 bytes) { value (8 bytes) { tag "a", simple_value 0.5 } }
			cat([]byte{0x09}, f64(1.5), []byte{0x10, 3, 0x2a, 10, 0x0a, 8, 0x0a, 1, 'a', 0x15}, f32(0.5))},
		{"step past one varint byte", Event{WallTime: 0, Step: 300, Values: []Value{Scalar("b", -1)}},
			cat([]byte{0x09}, f64(0), []byte{0x10, 0xac, 0x02, 0x2a, 10, 0x0a, 8, 0x0a, 1, 'b', 0x15}, f32(-1))},
		{"histogram", Event{WallTime: 1, Step: 1, Values: []Value{{Tag: "h", Histo: &Histogram{Min: 0, Max: 1, Num: 2, Sum: 1, SumSquares: 1,
			BucketLimit: []float64{1}, Bucket: []float64{2}}}}},
			// HistogramProto: five doubles (45 bytes), bucket_limit and bucket packed (10 bytes each).
			cat([]byte{0x09}, f64(1), []byte{0x10, 1, 0x2a, 72, 0x0a, 70, 0x0a, 1, 'h', 0x2a, 65},
				[]byte{0x09}, f64(0), []byte{0x11}, f64(1), []byte{0x19}, f64(2), []byte{0x21}, f64(1), []byte{0x29}, f64(1),
				[]byte{0x32, 8}, f64(1), []byte{0x3a, 8}, f64(2))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Marshal(tc.e)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("got % x;\nwant % x", got, tc.want)
			}
			back, err := Unmarshal(got)
			if err != nil || !reflect.DeepEqual(back, tc.e) {
				t.Errorf("read back %+v (%v); want %+v", back, err, tc.e)
			}
		})
	}
}

// TestUnmarshalSkipsUnknownFields reads an event with fields this package does not write (a
// source_metadata message, a varint), as TensorBoard's own writers add.
func TestUnmarshalSkipsUnknownFields(t *testing.T) {
	b := Marshal(Event{WallTime: 3, Step: 7, Values: []Value{Scalar("x", 2)}})
	b = append(b, 0x22, 2, 0x0a, 0) // field 4 (bytes)
	b = append(b, 0x30, 0x05)       // field 6 (varint)
	e, err := Unmarshal(b)
	if err != nil || e.Step != 7 || len(e.Values) != 1 || e.Values[0].Simple != 2 {
		t.Fatalf("got %+v, %v", e, err)
	}
	for _, bad := range [][]byte{{0x10}, {0x2a, 5, 0x0a}, {0x0b}} {
		if _, err := Unmarshal(bad); err == nil {
			t.Errorf("% x decoded without an error", bad)
		}
	}
}

func TestNewHistogram(t *testing.T) {
	for _, tc := range []struct {
		name    string
		values  []float64
		buckets int
		limits  []float64
		counts  []float64
	}{
		{"none", nil, 10, nil, nil},
		{"all equal", []float64{1, 1, 1}, 10, []float64{1}, []float64{3}},
		{"edges close their bucket", []float64{0, 1, 2, 3, 4}, 4, []float64{1, 2, 3, 4}, []float64{2, 1, 1, 1}},
		{"fewer values than buckets", []float64{-1, 1}, 30, []float64{0, 1}, []float64{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistogram(tc.values, tc.buckets)
			if tc.values == nil {
				if h != nil {
					t.Fatalf("got %+v; want nil", h)
				}
				return
			}
			if !reflect.DeepEqual(h.BucketLimit, tc.limits) || !reflect.DeepEqual(h.Bucket, tc.counts) {
				t.Errorf("limits %v counts %v; want %v %v", h.BucketLimit, h.Bucket, tc.limits, tc.counts)
			}
			var sum, sq float64
			for _, v := range tc.values {
				sum, sq = sum+v, sq+v*v
			}
			if h.Num != float64(len(tc.values)) || h.Sum != sum || h.SumSquares != sq {
				t.Errorf("num %v sum %v sum_squares %v; want %d %v %v", h.Num, h.Sum, h.SumSquares, len(tc.values), sum, sq)
			}
		})
	}
}

// writeEvents writes evs to a new event file in dir and returns its path.
func writeEvents(t *testing.T, dir string, at time.Time, evs []Event) string {
	t.Helper()
	w, err := Create(dir, at)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// TestFilesAndLastSteps: files written a second apart (and two in the same second) are read in
// the order they were written, and LastSteps is each tag's greatest step over all of them, a
// truncated file counted up to its last whole record and a corrupted one refused.
func TestFilesAndLastSteps(t *testing.T) {
	dir := t.TempDir()
	at := time.Unix(1_700_000_000, 0)
	p1 := writeEvents(t, dir, at, []Event{{Step: 1, Values: []Value{Scalar("a", 1), Scalar("b", 1)}}, {Step: 2, Values: []Value{Scalar("a", 2)}}})
	p2 := writeEvents(t, dir, at, []Event{{Step: 5, Values: []Value{Scalar("c", 5)}}})
	p3 := writeEvents(t, dir, at.Add(time.Second), []Event{{Step: 3, Values: []Value{Scalar("b", 3)}}, {Step: 4, Values: []Value{Scalar("b", 4)}}})
	files, err := Files(dir)
	if err != nil || !reflect.DeepEqual(files, []string{p1, p2, p3}) {
		t.Fatalf("Files = %v, %v; want %v", files, err, []string{p1, p2, p3})
	}
	if p2 != p1+".1" {
		t.Errorf("the second file of the same second is %s; want %s.1", p2, p1)
	}
	evs, err := ReadFile(p1)
	if err != nil || len(evs) != 3 || evs[0].FileVersion != FileVersion || evs[0].WallTime != 1_700_000_000 {
		t.Fatalf("ReadFile = %+v, %v; want the file version first", evs, err)
	}
	last, err := LastSteps(dir)
	if want := map[string]int64{"a": 2, "b": 4, "c": 5}; err != nil || !reflect.DeepEqual(last, want) {
		t.Errorf("LastSteps = %v, %v; want %v", last, err, want)
	}

	// A writer killed inside its last record: the records before it count.
	data, _ := os.ReadFile(p3)
	if err := os.WriteFile(p3, data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p3); !errors.Is(err, ErrTruncated) {
		t.Errorf("a truncated file reads with %v; want ErrTruncated", err)
	}
	last, err = LastSteps(dir)
	if want := map[string]int64{"a": 2, "b": 3, "c": 5}; err != nil || !reflect.DeepEqual(last, want) {
		t.Errorf("LastSteps with a truncated file = %v, %v; want %v", last, err, want)
	}

	// A flipped byte in a record's data is corruption, named with its file.
	data, _ = os.ReadFile(p1)
	data[len(data)-6] ^= 0xff
	if err := os.WriteFile(p1, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LastSteps(dir); err == nil || !bytes.Contains([]byte(err.Error()), []byte(filepath.Base(p1))) {
		t.Errorf("a corrupted file reads with %v; want an error naming it", err)
	}
	if last, err := LastSteps(filepath.Join(dir, "none")); err != nil || len(last) != 0 {
		t.Errorf("LastSteps of a missing folder = %v, %v; want none", last, err)
	}
}

// TestPythonReader reads the files this package writes with scripts/tfevents_read.py, an
// independent reader made from the format's documentation with Python's standard library.
func TestPythonReader(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH: the independent reader (scripts/tfevents_read.py) cannot run")
	}
	dir := t.TempDir()
	h := NewHistogram([]float64{0.25, 1, 1, 3.5}, 3)
	want := []Event{
		{WallTime: 1_700_000_000.25, Step: 0, Values: []Value{Scalar("eval/pass@1", 0.1), Scalar("eval/pass@2", 1.0/3)}},
		{WallTime: 1_700_000_001.5, Step: 1, Values: []Value{Scalar("train/lr", 1e-6), {Tag: "rollout/reward", Histo: h}}},
		{WallTime: 1_700_000_002, Step: 1 << 40, Values: []Value{Scalar("train/loss", -123.456)}},
	}
	path := writeEvents(t, dir, time.Unix(1_700_000_000, 0), want)
	out, err := exec.Command(py, filepath.Join("..", "..", "scripts", "tfevents_read.py"), dir).Output()
	if err != nil {
		t.Fatalf("tfevents_read.py: %v", err)
	}
	var got struct {
		Files []struct {
			Path      string
			Truncated bool
			Events    []struct {
				WallTime    float64 `json:"wall_time"`
				Step        int64
				FileVersion string `json:"file_version"`
				Values      []struct {
					Tag         string
					SimpleValue *float64 `json:"simple_value"`
					Histo       *struct {
						Min, Max, Num, Sum float64
						SumSquares         float64   `json:"sum_squares"`
						BucketLimit        []float64 `json:"bucket_limit"`
						Bucket             []float64
					}
				}
			}
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Files) != 1 || got.Files[0].Path != path || got.Files[0].Truncated || len(got.Files[0].Events) != len(want)+1 {
		t.Fatalf("read %s", out)
	}
	evs := got.Files[0].Events
	if evs[0].FileVersion != FileVersion {
		t.Errorf("first event's file_version %q; want %q", evs[0].FileVersion, FileVersion)
	}
	for i, w := range want {
		g := evs[i+1]
		if g.WallTime != w.WallTime || g.Step != w.Step || len(g.Values) != len(w.Values) {
			t.Errorf("event %d: wall %v step %d, %d values; want %v %d %d", i, g.WallTime, g.Step, len(g.Values), w.WallTime, w.Step, len(w.Values))
			continue
		}
		for j, wv := range w.Values {
			gv := g.Values[j]
			switch {
			case gv.Tag != wv.Tag:
				t.Errorf("event %d value %d: tag %q; want %q", i, j, gv.Tag, wv.Tag)
			case wv.HasSimple && (gv.SimpleValue == nil || *gv.SimpleValue != float64(wv.Simple)):
				t.Errorf("%s: simple_value %v; want %v", wv.Tag, gv.SimpleValue, wv.Simple)
			case wv.Histo != nil && (gv.Histo == nil || gv.Histo.Num != wv.Histo.Num || gv.Histo.Sum != wv.Histo.Sum ||
				gv.Histo.SumSquares != wv.Histo.SumSquares || gv.Histo.Min != wv.Histo.Min || gv.Histo.Max != wv.Histo.Max ||
				!reflect.DeepEqual(gv.Histo.BucketLimit, wv.Histo.BucketLimit) || !reflect.DeepEqual(gv.Histo.Bucket, wv.Histo.Bucket)):
				t.Errorf("%s: histogram %+v; want %+v", wv.Tag, gv.Histo, wv.Histo)
			}
		}
	}

	// The reader checks the CRCs too: a flipped byte fails it.
	data, _ := os.ReadFile(path)
	data[len(data)-6] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, filepath.Join("..", "..", "scripts", "tfevents_read.py"), path).CombinedOutput(); err == nil {
		t.Errorf("tfevents_read.py read a corrupted file without an error:\n%s", out)
	}
}
