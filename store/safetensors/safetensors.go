// Package safetensors reads and writes HuggingFace's safetensors format: an 8-byte little-endian
// header length N, N bytes of JSON header naming each tensor's dtype, shape and byte range, then
// the raw little-endian data. Folders hold one model.safetensors or shards listed by
// model.safetensors.index.json.
//
// Encoding is deterministic (tensors in name order, contiguous offsets, header keys sorted, padded
// with spaces to a multiple of 8 bytes as the reference library does), so read → write → read →
// write is byte-identical, and a file written by HuggingFace from a sorted state dict is
// reproduced byte for byte.
//
// Reading is strict about what could make a loader read the wrong bytes (sizes, overlaps,
// duplicate names, malformed JSON) and lenient about unused bytes between or after tensors.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// DType is a safetensors element type name.
type DType string

// Supported dtypes.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

// knownDTypes lists the dtypes in the order error messages name them.
const knownDTypes = "F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL"

// Size is the number of bytes of one element, 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case I8, U8, Bool:
		return 1
	}
	return 0
}

// MaxHeaderBytes bounds the JSON header a reader accepts (the reference implementation uses 100 MB).
const MaxHeaderBytes = 100 << 20

// metadataKey is the header key that holds the string-to-string metadata, never a tensor.
const metadataKey = "__metadata__"

// Tensor is one named array: raw little-endian bytes of DType, row-major in Shape.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	// Data holds NumElements × DType.Size() bytes. Tensors from Parse share the parsed buffer.
	Data []byte
	// Source is the file the tensor was read from (for error messages); empty for new tensors.
	Source string
}

// NumElements is the product of the shape (1 for a scalar). It is meaningful only for valid
// shapes (no negative dimension, no overflow); Encode and Parse reject the others.
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// String describes a tensor briefly, e.g. "lm_head.weight F32[512,64]".
func (t *Tensor) String() string {
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = fmt.Sprint(d)
	}
	return fmt.Sprintf("%s %s[%s]", t.Name, t.DType, strings.Join(dims, ","))
}

// shapeBytes returns the byte size of a tensor of dtype dt and the given shape, or an error
// for an unknown dtype, a negative dimension or a size beyond int64.
func shapeBytes(dt DType, shape []int) (int64, error) {
	size := int64(dt.Size())
	if size == 0 {
		return 0, fmt.Errorf("unknown dtype %q (want one of %s)", dt, knownDTypes)
	}
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
	}
	for _, d := range shape {
		if d == 0 {
			return 0, nil
		}
	}
	for _, d := range shape {
		if size > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("shape %v of %s is too large (over 2^63 bytes)", shape, dt)
		}
		size *= int64(d)
	}
	return size, nil
}

// check verifies that the tensor's dtype, shape and data length agree.
func (t *Tensor) check() error {
	want, err := shapeBytes(t.DType, t.Shape)
	if err != nil {
		return fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	if want != int64(len(t.Data)) {
		return fmt.Errorf("tensor %s: %d data bytes but %s %v needs %d", t.Name, len(t.Data), t.DType, t.Shape, want)
	}
	return nil
}

// File is a set of tensors with string metadata.
type File struct {
	Metadata map[string]string
	Tensors  map[string]*Tensor
	// Source names where the tensors came from (a file or a folder), for error messages.
	Source string
}

// Names returns the tensor names in sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Sorted returns the tensors in sorted-name order, ready for Encode or WriteDir.
func (f *File) Sorted() []*Tensor {
	out := make([]*Tensor, 0, len(f.Tensors))
	for _, n := range f.Names() {
		out = append(out, f.Tensors[n])
	}
	return out
}

// Get returns the named tensor, checking its shape when wantShape is not nil. Its errors read
// "missing tensor X in SOURCE" and "tensor X has shape [a b], want [c d] (file F)".
func (f *File) Get(name string, wantShape []int) (*Tensor, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("missing tensor %s in %s", name, f.Source)
	}
	if wantShape != nil && !slices.Equal(t.Shape, wantShape) {
		src := t.Source
		if src == "" {
			src = f.Source
		}
		return nil, fmt.Errorf("tensor %s has shape %v, want %v (file %s)", name, t.Shape, wantShape, src)
	}
	return t, nil
}

// headerEntry is one tensor's header record; pointers tell a missing field from a zero one.
type headerEntry struct {
	DType       *DType  `json:"dtype"`
	Shape       *[]int  `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// corrupt is the advice appended to errors about a damaged file.
const corrupt = "the file is corrupt or not safetensors; re-export or re-download it"

// Parse decodes a whole safetensors file held in data. Tensors' Data slice into data (no copy),
// so data must not be modified while the File is in use. source names the file in errors.
func Parse(data []byte, source string) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%s: truncated: %d bytes, but a safetensors file starts with an 8-byte header length (%s)", source, len(data), corrupt)
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("%s: header length %d exceeds the %d-byte limit (%s)", source, n, MaxHeaderBytes, corrupt)
	}
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%s: truncated: header length %d but only %d bytes follow (%s)", source, n, len(data)-8, corrupt)
	}
	header := data[8 : 8+n]
	body := data[8+n:]
	if !utf8.Valid(header) {
		return nil, fmt.Errorf("%s: header is not valid UTF-8 (%s)", source, corrupt)
	}
	if trimmed := bytes.TrimLeft(header, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%s: header must be a JSON object starting with '{' (%s)", source, corrupt)
	}
	f := &File{Metadata: map[string]string{}, Tensors: map[string]*Tensor{}, Source: source}
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil { // the '{' checked above
		return nil, fmt.Errorf("%s: invalid header JSON: %w", source, err)
	}
	seenMetadata := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: invalid header JSON: %w", source, err)
		}
		name, _ := tok.(string) // the decoder only yields strings as object keys
		var msg json.RawMessage
		if err := dec.Decode(&msg); err != nil {
			return nil, fmt.Errorf("%s: invalid header JSON at key %q: %w", source, name, err)
		}
		if name == metadataKey {
			if seenMetadata {
				return nil, fmt.Errorf("%s: header has two %s entries (%s)", source, metadataKey, corrupt)
			}
			seenMetadata = true
			var md map[string]string
			if err := json.Unmarshal(msg, &md); err != nil {
				return nil, fmt.Errorf("%s: %s must map strings to strings: %w", source, metadataKey, err)
			}
			for k, v := range md {
				f.Metadata[k] = v
			}
			continue
		}
		if _, dup := f.Tensors[name]; dup {
			return nil, fmt.Errorf("%s: tensor %s appears twice in the header (%s)", source, name, corrupt)
		}
		t, begin, end, err := parseEntry(name, msg, int64(len(body)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		t.Data = body[begin:end:end]
		t.Source = source
		f.Tensors[name] = t
		spans = append(spans, span{name, begin, end})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("%s: invalid header JSON: %w", source, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: header has data after its JSON object (%v %v); only space padding may follow (%s)", source, tok, err, corrupt)
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].begin < spans[i-1].end {
			return nil, fmt.Errorf("%s: tensors %s and %s overlap in the data section (%s)", source, spans[i-1].name, spans[i].name, corrupt)
		}
	}
	return f, nil
}

// parseEntry validates one tensor's header record against a data section of bodyLen bytes and
// returns the tensor (without data) and its byte range.
func parseEntry(name string, msg json.RawMessage, bodyLen int64) (*Tensor, int64, int64, error) {
	var e headerEntry
	if err := json.Unmarshal(msg, &e); err != nil {
		return nil, 0, 0, fmt.Errorf("tensor %s: invalid header entry: %w", name, err)
	}
	switch {
	case e.DType == nil:
		return nil, 0, 0, fmt.Errorf("tensor %s: header entry has no dtype", name)
	case e.Shape == nil:
		return nil, 0, 0, fmt.Errorf("tensor %s: header entry has no shape", name)
	case len(e.DataOffsets) != 2:
		return nil, 0, 0, fmt.Errorf("tensor %s: data_offsets must be [begin, end], got %v", name, e.DataOffsets)
	}
	dt, shape := *e.DType, *e.Shape
	want, err := shapeBytes(dt, shape)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("tensor %s: %w", name, err)
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin < 0 || end < begin || end > bodyLen {
		return nil, 0, 0, fmt.Errorf("tensor %s: data_offsets [%d, %d] outside the %d data bytes (%s)", name, begin, end, bodyLen, corrupt)
	}
	if end-begin != want {
		return nil, 0, 0, fmt.Errorf("tensor %s: data_offsets [%d, %d] cover %d bytes but %s %v needs %d (%s)", name, begin, end, end-begin, dt, shape, want, corrupt)
	}
	if len(shape) == 0 {
		shape = []int{}
	}
	return &Tensor{Name: name, DType: dt, Shape: shape}, begin, end, nil
}

// checkName rejects tensor names that cannot round-trip through a header.
func checkName(name string) error {
	switch {
	case name == metadataKey:
		return fmt.Errorf("tensor name %s is reserved for metadata; rename the tensor", metadataKey)
	case !utf8.ValidString(name):
		return fmt.Errorf("tensor name %q is not valid UTF-8; rename the tensor", name)
	}
	return nil
}

// sortedChecked returns the tensors sorted by name after checking names, dtypes, shapes and
// data lengths, and that no name repeats.
func sortedChecked(tensors []*Tensor) ([]*Tensor, error) {
	sorted := slices.Clone(tensors)
	for i, t := range sorted {
		if t == nil {
			return nil, fmt.Errorf("tensor %d of %d is nil", i, len(sorted))
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i, t := range sorted {
		if i > 0 && t.Name == sorted[i-1].Name {
			return nil, fmt.Errorf("duplicate tensor name %s: names must be unique", t.Name)
		}
		if err := checkName(t.Name); err != nil {
			return nil, err
		}
		if err := t.check(); err != nil {
			return nil, err
		}
	}
	return sorted, nil
}

// encodeHeader builds the padded JSON header for tensors already sorted and checked.
func encodeHeader(metadata map[string]string, sorted []*Tensor) ([]byte, error) {
	var hb bytes.Buffer
	hb.WriteByte('{')
	if len(metadata) > 0 {
		md, err := json.Marshal(metadata) // map keys come out sorted
		if err != nil {
			return nil, fmt.Errorf("encoding metadata: %w", err)
		}
		hb.WriteString(`"` + metadataKey + `":`)
		hb.Write(md)
	}
	var off int64
	for _, t := range sorted {
		if hb.Len() > 1 {
			hb.WriteByte(',')
		}
		name, err := json.Marshal(t.Name)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: encoding name: %w", t.Name, err)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		end := off + int64(len(t.Data))
		entry, err := json.Marshal(struct {
			DType       DType    `json:"dtype"`
			Shape       []int    `json:"shape"`
			DataOffsets [2]int64 `json:"data_offsets"`
		}{t.DType, shape, [2]int64{off, end}})
		if err != nil {
			return nil, fmt.Errorf("tensor %s: encoding header entry: %w", t.Name, err)
		}
		hb.Write(name)
		hb.WriteByte(':')
		hb.Write(entry)
		off = end
	}
	hb.WriteByte('}')
	for hb.Len()%8 != 0 {
		hb.WriteByte(' ')
	}
	if hb.Len() > MaxHeaderBytes {
		return nil, fmt.Errorf("header of %d bytes exceeds the %d-byte limit readers accept; split the tensors over several files", hb.Len(), MaxHeaderBytes)
	}
	return hb.Bytes(), nil
}

// Encode writes tensors (sorted by name, contiguous) and metadata in the safetensors format.
// The same tensors and metadata always give the same bytes. It checks every tensor (unique
// names, known dtype, shape, data length) before writing anything.
func Encode(w io.Writer, metadata map[string]string, tensors []*Tensor) error {
	sorted, err := sortedChecked(tensors)
	if err != nil {
		return err
	}
	header, err := encodeHeader(metadata, sorted)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("writing header length: %w", err)
	}
	if _, err := w.Write(header); err != nil {
		return fmt.Errorf("writing header: %w", err)
	}
	for _, t := range sorted {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("writing tensor %s: %w", t.Name, err)
		}
	}
	return nil
}

// errNotFloat is returned by Float32 for integer and boolean tensors.
var errNotFloat = errors.New("not a float dtype (want F32, BF16, F16 or F64)")

// Float32 converts F32, BF16, F16 or F64 data to float32 (exact for all but F64, which rounds
// to nearest).
func (t *Tensor) Float32() ([]float32, error) {
	switch t.DType {
	case F32, BF16, F16, F64:
	default:
		return nil, fmt.Errorf("tensor %s: dtype %s: %w", t.Name, t.DType, errNotFloat)
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	d := t.Data
	out := make([]float32, len(d)/t.DType.Size())
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = BF16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case F16:
		for i := range out {
			out[i] = F16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
		}
	}
	return out, nil
}

// FromFloat32 makes a tensor of dtype F32, BF16 (round to nearest, ties to even) or F16 (the
// same, with gradual underflow and overflow to infinity) from float32 values in row-major order.
func FromFloat32(name string, shape []int, v []float32, dt DType) (*Tensor, error) {
	switch dt {
	case F32, BF16, F16:
	default:
		return nil, fmt.Errorf("tensor %s: cannot write float32 values as %s (want F32, BF16 or F16)", name, dt)
	}
	t := &Tensor{Name: name, DType: dt, Shape: slices.Clone(shape)}
	if t.Shape == nil {
		t.Shape = []int{}
	}
	if _, err := shapeBytes(dt, shape); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	if t.NumElements() != len(v) {
		return nil, fmt.Errorf("tensor %s: %d values for shape %v, which holds %d", name, len(v), shape, t.NumElements())
	}
	t.Data = make([]byte, len(v)*dt.Size())
	switch dt {
	case F32:
		for i, x := range v {
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(x))
		}
	case BF16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], Float32ToBF16(x))
		}
	case F16:
		for i, x := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], Float32ToF16(x))
		}
	}
	return t, nil
}
