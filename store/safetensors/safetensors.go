// Package safetensors reads and writes HuggingFace's safetensors format: an 8-byte little-endian
// header length N, N bytes of JSON header naming each tensor's dtype, shape and byte range, then
// the raw little-endian data. Folders hold one model.safetensors or shards listed by
// model.safetensors.index.json.
//
// Encoding is deterministic (tensors in name order, header keys sorted, padded with spaces to a
// multiple of 8 bytes), so read → write → read → write is byte-identical.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
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

// Tensor is one named array: raw little-endian bytes of DType, row-major in Shape.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
	// Source is the file the tensor was read from (for error messages); empty for new tensors.
	Source string
}

// NumElements is the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
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

// Get returns the named tensor, checking its shape when wantShape is not nil.
func (f *File) Get(name string, wantShape []int) (*Tensor, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: missing tensor %s", f.Source, name)
	}
	if wantShape != nil && !slices.Equal(t.Shape, wantShape) {
		return nil, fmt.Errorf("%s: tensor %s has shape %v, want %v", t.Source, name, t.Shape, wantShape)
	}
	return t, nil
}

type headerEntry struct {
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Parse decodes a whole safetensors file held in data. Tensors' Data slice into data (no copy).
// source names the file in errors.
func Parse(data []byte, source string) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%s: truncated: %d bytes, a safetensors file starts with an 8-byte header length", source, len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("%s: header length %d exceeds the %d-byte limit (corrupt or not a safetensors file)", source, n, MaxHeaderBytes)
	}
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%s: truncated: header length %d but only %d bytes follow", source, n, len(data)-8)
	}
	header := data[8 : 8+n]
	body := data[8+n:]
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: invalid header JSON: %w", source, err)
	}
	f := &File{Metadata: map[string]string{}, Tensors: map[string]*Tensor{}, Source: source}
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("%s: __metadata__ must map strings to strings: %w", source, err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: invalid header entry: %w", source, name, err)
		}
		if e.DType.Size() == 0 {
			return nil, fmt.Errorf("%s: tensor %s: unknown dtype %q (want one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)", source, name, e.DType)
		}
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 {
				return nil, fmt.Errorf("%s: tensor %s: negative dimension in shape %v", source, name, e.Shape)
			}
			if d > 0 && elems > math.MaxInt64/int64(d)/8 {
				return nil, fmt.Errorf("%s: tensor %s: shape %v overflows", source, name, e.Shape)
			}
			elems *= int64(d)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin || end > int64(len(body)) {
			return nil, fmt.Errorf("%s: tensor %s: data_offsets [%d, %d] outside the %d data bytes (truncated file or lying header)", source, name, begin, end, len(body))
		}
		if want := elems * int64(e.DType.Size()); end-begin != want {
			return nil, fmt.Errorf("%s: tensor %s: data_offsets cover %d bytes but %s %v needs %d", source, name, end-begin, e.DType, e.Shape, want)
		}
		f.Tensors[name] = &Tensor{Name: name, DType: e.DType, Shape: append([]int{}, e.Shape...), Data: body[begin:end:end], Source: source}
		spans = append(spans, span{name, begin, end})
	}
	sort.Slice(spans, func(i, j int) bool {
		return spans[i].begin < spans[j].begin || (spans[i].begin == spans[j].begin && spans[i].end < spans[j].end)
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].begin < spans[i-1].end {
			return nil, fmt.Errorf("%s: tensors %s and %s overlap in the data section", source, spans[i-1].name, spans[i].name)
		}
	}
	return f, nil
}

// ReadFile reads and parses one .safetensors file.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading safetensors: %w", err)
	}
	return Parse(data, path)
}

// Encode writes tensors (sorted by name) and metadata in the safetensors format.
func Encode(w io.Writer, metadata map[string]string, tensors []*Tensor) error {
	sorted := append([]*Tensor{}, tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var hb bytes.Buffer
	hb.WriteByte('{')
	first := true
	comma := func() {
		if !first {
			hb.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		comma()
		md, err := json.Marshal(metadata) // map keys come out sorted
		if err != nil {
			return err
		}
		hb.WriteString(`"__metadata__":`)
		hb.Write(md)
	}
	var off int64
	for i, t := range sorted {
		if i > 0 && t.Name == sorted[i-1].Name {
			return fmt.Errorf("duplicate tensor name %s", t.Name)
		}
		if t.DType.Size() == 0 {
			return fmt.Errorf("tensor %s: unknown dtype %q", t.Name, t.DType)
		}
		if want := t.NumElements() * t.DType.Size(); want != len(t.Data) {
			return fmt.Errorf("tensor %s: %d data bytes but %s %v needs %d", t.Name, len(t.Data), t.DType, t.Shape, want)
		}
		comma()
		name, _ := json.Marshal(t.Name)
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		entry, err := json.Marshal(headerEntry{DType: t.DType, Shape: shape, DataOffsets: [2]int64{off, off + int64(len(t.Data))}})
		if err != nil {
			return err
		}
		hb.Write(name)
		hb.WriteByte(':')
		hb.Write(entry)
		off += int64(len(t.Data))
	}
	hb.WriteByte('}')
	for hb.Len()%8 != 0 {
		hb.WriteByte(' ')
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hb.Len()))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(hb.Bytes()); err != nil {
		return err
	}
	for _, t := range sorted {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes a safetensors file atomically: a temporary file in the same folder, fsync, rename.
func WriteFile(path string, metadata map[string]string, tensors []*Tensor) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	bw := &countingWriter{w: tmp}
	if err := Encode(bw, metadata, tensors); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Index file and shard names as HuggingFace writes them.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

type index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// ReadDir reads a model folder: model.safetensors, or the shards named by
// model.safetensors.index.json, merged into one File.
func ReadDir(dir string) (*File, error) {
	idxPath := filepath.Join(dir, IndexFile)
	data, err := os.ReadFile(idxPath)
	if errors.Is(err, os.ErrNotExist) {
		single := filepath.Join(dir, SingleFile)
		if _, err := os.Stat(single); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no weights in %s: expected %s or %s", dir, SingleFile, IndexFile)
		}
		return ReadFile(single)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", idxPath, err)
	}
	var idx index
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %w", idxPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is empty", idxPath)
	}
	shards := map[string][]string{}
	for name, shard := range idx.WeightMap {
		if shard != filepath.Base(shard) || shard == "" {
			return nil, fmt.Errorf("%s: tensor %s: shard %q must be a file name in the same folder", idxPath, name, shard)
		}
		shards[shard] = append(shards[shard], name)
	}
	out := &File{Metadata: map[string]string{}, Tensors: map[string]*Tensor{}, Source: dir}
	shardNames := make([]string, 0, len(shards))
	for s := range shards {
		shardNames = append(shardNames, s)
	}
	sort.Strings(shardNames)
	for _, s := range shardNames {
		f, err := ReadFile(filepath.Join(dir, s))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s names shard %s, which is missing", idxPath, s)
			}
			return nil, err
		}
		for _, name := range shards[s] {
			if _, ok := f.Tensors[name]; !ok {
				return nil, fmt.Errorf("%s maps tensor %s to %s, which does not hold it", idxPath, name, s)
			}
		}
		for name, t := range f.Tensors {
			if prev, dup := out.Tensors[name]; dup {
				return nil, fmt.Errorf("tensor %s is in both %s and %s", name, prev.Source, t.Source)
			}
			out.Tensors[name] = t
		}
		for k, v := range f.Metadata {
			out.Metadata[k] = v
		}
	}
	return out, nil
}

// WriteDir writes tensors into dir as model.safetensors, or, when maxShardBytes > 0 and the
// tensors exceed it, as numbered shards (model-00001-of-00003.safetensors) plus the index, as
// HuggingFace does. Tensors are assigned to shards in name order.
func WriteDir(dir string, metadata map[string]string, tensors []*Tensor, maxShardBytes int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	sorted := append([]*Tensor{}, tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var total int64
	for _, t := range sorted {
		total += int64(len(t.Data))
	}
	if maxShardBytes <= 0 || total <= maxShardBytes {
		return WriteFile(filepath.Join(dir, SingleFile), metadata, sorted)
	}
	var groups [][]*Tensor
	var cur []*Tensor
	var size int64
	for _, t := range sorted {
		if len(cur) > 0 && size+int64(len(t.Data)) > maxShardBytes {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, t)
		size += int64(len(t.Data))
	}
	groups = append(groups, cur)
	idx := index{Metadata: map[string]any{"total_size": total}, WeightMap: map[string]string{}}
	for i, g := range groups {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(groups))
		if err := WriteFile(filepath.Join(dir, name), metadata, g); err != nil {
			return err
		}
		for _, t := range g {
			idx.WeightMap[t.Name] = name
		}
	}
	js, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+IndexFile+".tmp")
	if err := os.WriteFile(tmp, append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", IndexFile, err)
	}
	return os.Rename(tmp, filepath.Join(dir, IndexFile))
}

// Float32 converts F32, BF16, F16 or F64 data to float32 (exactly, except F64 rounding).
func (t *Tensor) Float32() ([]float32, error) {
	n := t.NumElements()
	out := make([]float32, n)
	d := t.Data
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
	default:
		return nil, fmt.Errorf("tensor %s: dtype %s is not a float type (want F32, BF16, F16 or F64)", t.Name, t.DType)
	}
	return out, nil
}

// FromFloat32 makes a tensor of dtype F32, BF16 (round to nearest even) or F16 from float32 values.
func FromFloat32(name string, shape []int, v []float32, dt DType) (*Tensor, error) {
	t := &Tensor{Name: name, DType: dt, Shape: append([]int{}, shape...)}
	if t.NumElements() != len(v) {
		return nil, fmt.Errorf("tensor %s: %d values for shape %v", name, len(v), shape)
	}
	switch dt {
	case F32:
		t.Data = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(x))
		}
	case BF16:
		t.Data = make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], Float32ToBF16(x))
		}
	case F16:
		t.Data = make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(t.Data[2*i:], Float32ToF16(x))
		}
	default:
		return nil, fmt.Errorf("tensor %s: cannot write float32 values as %s (want F32, BF16 or F16)", name, dt)
	}
	return t, nil
}

// BF16ToFloat32 widens a bfloat16 bit pattern.
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBF16 rounds to the nearest bfloat16, ties to even; NaN stays NaN.
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and non-zero
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// F16ToFloat32 widens an IEEE half-precision bit pattern (subnormals, inf, NaN included).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float32ToF16 rounds to the nearest half-precision value, ties to even, with overflow to inf
// and gradual underflow.
func Float32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	mant := u & 0x7fffff
	if exp == 0xff { // inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal or zero in half precision
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		rem := m & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, correctly giving the next power of two or inf
	}
	return sign | uint16(r)
}

// String describes a tensor briefly.
func (t *Tensor) String() string {
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = fmt.Sprint(d)
	}
	return fmt.Sprintf("%s %s[%s]", t.Name, t.DType, strings.Join(dims, ","))
}
