// Package tfevents writes and reads TensorBoard event files, the format `tensorboard --logdir`
// and `wandb sync --sync-tensorboard` read: a sequence of TFRecords, each the bytes of one Event
// protocol buffer (TensorFlow's event.proto and summary.proto).
//
// A record is framed as TensorFlow's record writer frames it:
//
//	uint64 length, little-endian
//	uint32 masked CRC-32C of those 8 bytes
//	length bytes of data
//	uint32 masked CRC-32C of the data
//
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. The first record of a file is an Event
// whose file_version is "brain.Event:2". The messages are encoded here by hand (no protobuf
// library); the fields used are
//
//	Event          wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5
//	Summary        value = 1 (repeated Value)
//	Value          tag = 1 (string), simple_value = 2 (float), histo = 5 (HistogramProto)
//	HistogramProto min = 1, max = 2, num = 3, sum = 4, sum_squares = 5 (double),
//	               bucket_limit = 6, bucket = 7 (packed repeated double)
//
// and a reader skips any other field.
package tfevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// FileVersion is the file_version of a file's first event.
const FileVersion = "brain.Event:2"

// Event is one record of an event file: the file version (the first record), or a summary of
// values at a step.
type Event struct {
	WallTime    float64 // seconds since the Unix epoch
	Step        int64
	FileVersion string
	Values      []Value
}

// Value is one tagged value of a summary: a scalar (Simple, when HasSimple) or a histogram.
type Value struct {
	Tag       string
	Simple    float32
	HasSimple bool
	Histo     *Histogram
}

// Scalar is a scalar value tagged tag (TensorBoard keeps scalars as 32-bit floats).
func Scalar(tag string, v float64) Value {
	return Value{Tag: tag, Simple: float32(v), HasSimple: true}
}

// Histogram is a HistogramProto: bucket i counts Bucket[i] values in (BucketLimit[i-1],
// BucketLimit[i]], the first bucket's left edge being Min.
type Histogram struct {
	Min, Max, Num, Sum, SumSquares float64
	BucketLimit, Bucket            []float64
}

// NewHistogram is the histogram of values in at most buckets buckets of equal width between
// their least and greatest (one bucket when they are all equal); nil for no values.
func NewHistogram(values []float64, buckets int) *Histogram {
	if len(values) == 0 {
		return nil
	}
	h := &Histogram{Min: math.Inf(1), Max: math.Inf(-1), Num: float64(len(values))}
	for _, v := range values {
		h.Min, h.Max = min(h.Min, v), max(h.Max, v)
		h.Sum += v
		h.SumSquares += v * v
	}
	n := max(min(buckets, len(values)), 1)
	if h.Min == h.Max {
		n = 1
	}
	width := (h.Max - h.Min) / float64(n)
	h.BucketLimit, h.Bucket = make([]float64, n), make([]float64, n)
	for i := range n {
		h.BucketLimit[i] = h.Min + float64(i+1)*width
	}
	h.BucketLimit[n-1] = h.Max
	for _, v := range values {
		i := n - 1
		if width > 0 {
			i = min(int((v-h.Min)/width), n-1)
		}
		// A value on an edge belongs to the bucket the edge closes (and rounding moves none).
		for i > 0 && v <= h.BucketLimit[i-1] {
			i--
		}
		for i < n-1 && v > h.BucketLimit[i] {
			i++
		}
		h.Bucket[i]++
	}
	return h
}

// Protocol buffer wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendKey(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendDouble(b []byte, field int, v float64) []byte {
	return binary.LittleEndian.AppendUint64(appendKey(b, field, wireFixed64), math.Float64bits(v))
}

func appendBytes(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(appendKey(b, field, wireBytes), uint64(len(v)))
	return append(b, v...)
}

func appendPacked(b []byte, field int, vs []float64) []byte {
	if len(vs) == 0 {
		return b
	}
	p := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		p = binary.LittleEndian.AppendUint64(p, math.Float64bits(v))
	}
	return appendBytes(b, field, p)
}

// Marshal encodes e as an Event protocol buffer.
func Marshal(e Event) []byte {
	b := appendDouble(nil, 1, e.WallTime)
	if e.Step != 0 {
		b = binary.AppendUvarint(appendKey(b, 2, wireVarint), uint64(e.Step))
	}
	if e.FileVersion != "" {
		b = appendBytes(b, 3, []byte(e.FileVersion))
	}
	if len(e.Values) > 0 {
		var sum []byte
		for _, v := range e.Values {
			sum = appendBytes(sum, 1, marshalValue(v))
		}
		b = appendBytes(b, 5, sum)
	}
	return b
}

func marshalValue(v Value) []byte {
	b := appendBytes(nil, 1, []byte(v.Tag))
	if v.HasSimple {
		b = binary.LittleEndian.AppendUint32(appendKey(b, 2, wireFixed32), math.Float32bits(v.Simple))
	}
	if h := v.Histo; h != nil {
		var p []byte
		p = appendDouble(p, 1, h.Min)
		p = appendDouble(p, 2, h.Max)
		p = appendDouble(p, 3, h.Num)
		p = appendDouble(p, 4, h.Sum)
		p = appendDouble(p, 5, h.SumSquares)
		p = appendPacked(p, 6, h.BucketLimit)
		p = appendPacked(p, 7, h.Bucket)
		b = appendBytes(b, 5, p)
	}
	return b
}

// field is one decoded field of a message: its number, wire type and value (the varint, the
// fixed bits, or the bytes).
type field struct {
	num, wire int
	u         uint64
	bytes     []byte
}

var errMalformed = errors.New("malformed protocol buffer")

// fields decodes a message into its fields in order.
func fields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errMalformed
		}
		b = b[n:]
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case wireVarint:
			if f.u, n = binary.Uvarint(b); n <= 0 {
				return nil, errMalformed
			}
			b = b[n:]
		case wireFixed64:
			if len(b) < 8 {
				return nil, errMalformed
			}
			f.u, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return nil, errMalformed
			}
			f.u, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wireBytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, errMalformed
			}
			f.bytes, b = b[n:n+int(l)], b[n+int(l):]
		default:
			return nil, fmt.Errorf("%w: wire type %d", errMalformed, f.wire)
		}
		out = append(out, f)
	}
	return out, nil
}

// Unmarshal decodes an Event protocol buffer, skipping the fields it does not know.
func Unmarshal(b []byte) (Event, error) {
	var e Event
	fs, err := fields(b)
	if err != nil {
		return e, err
	}
	for _, f := range fs {
		switch {
		case f.num == 1 && f.wire == wireFixed64:
			e.WallTime = math.Float64frombits(f.u)
		case f.num == 2 && f.wire == wireVarint:
			e.Step = int64(f.u)
		case f.num == 3 && f.wire == wireBytes:
			e.FileVersion = string(f.bytes)
		case f.num == 5 && f.wire == wireBytes:
			vs, err := fields(f.bytes)
			if err != nil {
				return e, fmt.Errorf("summary: %w", err)
			}
			for _, vf := range vs {
				if vf.num != 1 || vf.wire != wireBytes {
					continue
				}
				v, err := unmarshalValue(vf.bytes)
				if err != nil {
					return e, fmt.Errorf("summary value: %w", err)
				}
				e.Values = append(e.Values, v)
			}
		}
	}
	return e, nil
}

func unmarshalValue(b []byte) (Value, error) {
	var v Value
	fs, err := fields(b)
	if err != nil {
		return v, err
	}
	for _, f := range fs {
		switch {
		case f.num == 1 && f.wire == wireBytes:
			v.Tag = string(f.bytes)
		case f.num == 2 && f.wire == wireFixed32:
			v.Simple, v.HasSimple = math.Float32frombits(uint32(f.u)), true
		case f.num == 5 && f.wire == wireBytes:
			if v.Histo, err = unmarshalHisto(f.bytes); err != nil {
				return v, fmt.Errorf("histogram %q: %w", v.Tag, err)
			}
		}
	}
	return v, nil
}

func unmarshalHisto(b []byte) (*Histogram, error) {
	fs, err := fields(b)
	if err != nil {
		return nil, err
	}
	h := &Histogram{}
	for _, f := range fs {
		switch f.wire {
		case wireFixed64:
			d := math.Float64frombits(f.u)
			switch f.num {
			case 1:
				h.Min = d
			case 2:
				h.Max = d
			case 3:
				h.Num = d
			case 4:
				h.Sum = d
			case 5:
				h.SumSquares = d
			case 6:
				h.BucketLimit = append(h.BucketLimit, d)
			case 7:
				h.Bucket = append(h.Bucket, d)
			}
		case wireBytes: // packed doubles
			if f.num != 6 && f.num != 7 {
				continue
			}
			if len(f.bytes)%8 != 0 {
				return nil, errMalformed
			}
			for p := f.bytes; len(p) > 0; p = p[8:] {
				d := math.Float64frombits(binary.LittleEndian.Uint64(p))
				if f.num == 6 {
					h.BucketLimit = append(h.BucketLimit, d)
				} else {
					h.Bucket = append(h.Bucket, d)
				}
			}
		}
	}
	return h, nil
}
