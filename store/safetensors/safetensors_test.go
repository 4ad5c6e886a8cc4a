package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var fixtures = []string{"qwen3-tiny", "qwen3-tiny-untied", "qwen2-tiny"}

func fixturePath(name string) string {
	return filepath.Join("..", "..", "testdata", "fixtures", name, SingleFile)
}

func mustRead(t testing.TB, fixture string) *File {
	t.Helper()
	f, err := ReadFile(fixturePath(fixture))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestParseFixtures checks tensors of the HF-written fixtures against values read independently
// with Python's struct module (first and last float32 bit patterns, float64 sum).
func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture, tensor     string
		count               int
		shape               []int
		firstBits, lastBits uint32
		sum                 float64
	}{
		{"qwen3-tiny", "model.norm.weight", 24, []int{64}, 0x3f624cb1, 0x3f873fd1, 65.79180294275284},
		{"qwen3-tiny", "model.embed_tokens.weight", 24, []int{512, 64}, 0xbb580c4c, 0xbc1fa200, 0.5669325998748036},
		{"qwen3-tiny", "model.layers.0.mlp.down_proj.weight", 24, []int{64, 128}, 0x3bcbac06, 0xbb8f3b78, -0.8083097323994934},
		{"qwen3-tiny-untied", "lm_head.weight", 25, []int{512, 64}, 0x3b3f3b0a, 0xbb833701, 4.3722422394677665},
		{"qwen3-tiny-untied", "model.norm.weight", 25, []int{64}, 0x3f5c1dff, 0x3f5d4301, 63.60717409849167},
		{"qwen2-tiny", "model.layers.1.self_attn.k_proj.bias", 26, []int{32}, 0, 0, 0},
		{"qwen2-tiny", "model.embed_tokens.weight", 26, []int{512, 64}, 0xbca4ec8b, 0xbcc7f034, 1.4345403388875866},
	} {
		t.Run(tc.fixture+"/"+tc.tensor, func(t *testing.T) {
			f := mustRead(t, tc.fixture)
			if len(f.Tensors) != tc.count {
				t.Errorf("got %d tensors; want %d", len(f.Tensors), tc.count)
			}
			if got := f.Metadata["format"]; got != "pt" {
				t.Errorf("metadata format = %q; want pt", got)
			}
			tt, err := f.Get(tc.tensor, tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			if tt.DType != F32 || tt.Source != fixturePath(tc.fixture) {
				t.Errorf("dtype %s source %s; want F32 from %s", tt.DType, tt.Source, fixturePath(tc.fixture))
			}
			v, err := tt.Float32()
			if err != nil {
				t.Fatal(err)
			}
			if got := math.Float32bits(v[0]); got != tc.firstBits {
				t.Errorf("first value bits %#08x; want %#08x", got, tc.firstBits)
			}
			if got := math.Float32bits(v[len(v)-1]); got != tc.lastBits {
				t.Errorf("last value bits %#08x; want %#08x", got, tc.lastBits)
			}
			var sum float64
			for _, x := range v {
				sum += float64(x)
			}
			if math.Abs(sum-tc.sum) > 1e-9 {
				t.Errorf("sum %v; want %v", sum, tc.sum)
			}
		})
	}
}

// TestEncodeReproducesHF: the fixtures were written by HuggingFace's safetensors from a sorted
// state dict, so encoding what was read must give the very same bytes.
func TestEncodeReproducesHF(t *testing.T) {
	for _, name := range fixtures {
		raw, err := os.ReadFile(fixturePath(name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(raw, name)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Encode(&b, f.Metadata, f.Sorted()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), raw) {
			n := binary.LittleEndian.Uint64(raw)
			t.Errorf("%s: re-encoded %d bytes differ from the HF file's %d (HF header %q…)", name, b.Len(), len(raw), raw[8:min(8+n, 120)])
		}
	}
}

func TestRoundTripBitIdentical(t *testing.T) {
	for _, name := range fixtures {
		f := mustRead(t, name)
		dir := t.TempDir()
		p1 := filepath.Join(dir, "a.safetensors")
		if err := WriteFile(p1, f.Metadata, f.Sorted()); err != nil {
			t.Fatal(err)
		}
		g, err := ReadFile(p1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.Names(), g.Names()) {
			t.Fatalf("%s: names %v; want %v", name, g.Names(), f.Names())
		}
		for _, n := range f.Names() {
			a, b := f.Tensors[n], g.Tensors[n]
			if !bytes.Equal(a.Data, b.Data) || !slices.Equal(a.Shape, b.Shape) || a.DType != b.DType {
				t.Errorf("%s: tensor %s changed in the round trip", name, n)
			}
		}
		p2 := filepath.Join(dir, "b.safetensors")
		if err := WriteFile(p2, g.Metadata, g.Sorted()); err != nil {
			t.Fatal(err)
		}
		b1, _ := os.ReadFile(p1)
		b2, _ := os.ReadFile(p2)
		if !bytes.Equal(b1, b2) {
			t.Errorf("%s: write → read → write is not byte-identical", name)
		}
		if n := binary.LittleEndian.Uint64(b1); (8+n)%8 != 0 || b1[8+n-1] != '}' && b1[8+n-1] != ' ' {
			t.Errorf("%s: header of %d bytes is not padded to 8", name, n)
		}
	}
}

// TestAllDTypesRoundTrip writes one tensor of every dtype (plus a scalar and an empty tensor),
// in shuffled order, and checks the header layout by hand.
func TestAllDTypesRoundTrip(t *testing.T) {
	var ts []*Tensor
	for i, dt := range []DType{Bool, U8, I8, I16, I32, I64, F64, BF16, F16, F32} {
		data := make([]byte, 3*dt.Size())
		for j := range data {
			data[j] = byte(i*7 + j)
		}
		ts = append(ts, &Tensor{Name: "t." + string(dt), DType: dt, Shape: []int{3}, Data: data})
	}
	ts = append(ts, &Tensor{Name: "scalar", DType: F32, Data: []byte{0, 0, 0x80, 0x3f}})
	ts = append(ts, &Tensor{Name: "empty", DType: BF16, Shape: []int{0, 5}, Data: nil})
	var b bytes.Buffer
	if err := Encode(&b, map[string]string{"z": "last", "a": "<&>"}, ts); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b.Bytes(), "mem")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range ts {
		got, ok := f.Tensors[want.Name]
		if !ok {
			t.Fatalf("tensor %s lost", want.Name)
		}
		if got.DType != want.DType || !bytes.Equal(got.Data, want.Data) || got.NumElements() != want.NumElements() || len(got.Shape) != len(want.Shape) {
			t.Errorf("%s: got %v %v; want %v %v", want.Name, got, got.Data, want, want.Data)
		}
	}
	if f.Metadata["a"] != "<&>" || f.Metadata["z"] != "last" {
		t.Errorf("metadata %v", f.Metadata)
	}
	// Hand-check the header: sorted keys, contiguous offsets from 0, metadata first.
	n := binary.LittleEndian.Uint64(b.Bytes())
	hdr := string(b.Bytes()[8 : 8+n])
	wantPrefix := `{"__metadata__":{"a":"\u003c\u0026\u003e","z":"last"},"empty":{"dtype":"BF16","shape":[0,5],"data_offsets":[0,0]},` +
		`"scalar":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"t.BF16":{"dtype":"BF16","shape":[3],"data_offsets":[4,10]},`
	if !strings.HasPrefix(hdr, wantPrefix) {
		t.Errorf("header\n%s\nwant prefix\n%s", hdr, wantPrefix)
	}
	if got := strings.TrimRight(hdr, " "); !strings.HasSuffix(got, `"t.U8":{"dtype":"U8","shape":[3],"data_offsets":[100,103]}}`) {
		t.Errorf("header ends %q", got[len(got)-60:])
	}
	if len(b.Bytes())-int(8+n) != 103 {
		t.Errorf("data section %d bytes; want 103", len(b.Bytes())-int(8+n))
	}
}

func TestShardedRoundTrip(t *testing.T) {
	f := mustRead(t, "qwen3-tiny")
	dir := t.TempDir()
	md := map[string]string{"format": "pt"}
	if err := WriteDir(dir, md, f.Sorted(), 100_000); err != nil {
		t.Fatal(err)
	}
	// Expected grouping, computed here from the tensor sizes with HF's rule.
	var wantShards int
	var size int64 = -1
	for _, tt := range f.Sorted() {
		if size < 0 || size+int64(len(tt.Data)) > 100_000 {
			wantShards++
			size = 0
		}
		size += int64(len(tt.Data))
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	if len(shards) != wantShards || wantShards < 3 {
		t.Fatalf("got %d shards; want %d (≥ 3)", len(shards), wantShards)
	}
	if _, err := os.Stat(filepath.Join(dir, SingleFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sharded folder also has %s (err %v)", SingleFile, err)
	}
	var idx struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	js, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.Metadata["total_size"] != 427520 || len(idx.WeightMap) != 24 {
		t.Errorf("index total_size %d, %d names; want 427520, 24", idx.Metadata["total_size"], len(idx.WeightMap))
	}
	first := "model-00001-of-0000" + string(rune('0'+wantShards)) + ".safetensors"
	if got := idx.WeightMap["model.embed_tokens.weight"]; got != first {
		t.Errorf("embed_tokens in %s; want %s", got, first)
	}
	g, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Names(), f.Names()) || g.Source != dir || g.Metadata["format"] != "pt" {
		t.Fatalf("read back %d tensors from %s, metadata %v", len(g.Tensors), g.Source, g.Metadata)
	}
	for _, n := range f.Names() {
		if !bytes.Equal(f.Tensors[n].Data, g.Tensors[n].Data) {
			t.Errorf("tensor %s differs after sharding", n)
		}
		if want := filepath.Join(dir, idx.WeightMap[n]); g.Tensors[n].Source != want {
			t.Errorf("tensor %s source %s; want %s", n, g.Tensors[n].Source, want)
		}
	}
	// Writing the same tensors again gives byte-identical files.
	dir2 := t.TempDir()
	if err := WriteDir(dir2, md, g.Sorted(), 100_000); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(shards, filepath.Join(dir, IndexFile)) {
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(dir2, filepath.Base(p)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two writes (err %v)", filepath.Base(p), err)
		}
	}
}

// TestWriteDirReplacesLayout: rewriting a folder in the other layout must not leave weights that
// ReadDir would prefer (an index pointing at old shards) or that confuse tools.
func TestWriteDirReplacesLayout(t *testing.T) {
	f := mustRead(t, "qwen3-tiny")
	dir := t.TempDir()
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(dir, nil, f.Sorted(), 100_000); err != nil {
		t.Fatal(err)
	}
	changed := []*Tensor{{Name: "only", DType: U8, Shape: []int{2}, Data: []byte{7, 9}}}
	if err := WriteDir(dir, nil, changed, 0); err != nil {
		t.Fatal(err)
	}
	g, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Names(), []string{"only"}) {
		t.Fatalf("after a single-file write ReadDir gives %v; want [only]", g.Names())
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if want := []string{filepath.Join(dir, SingleFile), other}; !slices.Equal(left, want) {
		t.Errorf("folder holds %v; want %v", left, want)
	}
	// And back to shards: model.safetensors goes, a smaller shard count replaces a larger one.
	if err := WriteDir(dir, nil, f.Sorted(), 200_000); err != nil {
		t.Fatal(err)
	}
	left, _ = filepath.Glob(filepath.Join(dir, "*"))
	var names []string
	for _, p := range left {
		names = append(names, filepath.Base(p))
	}
	want := []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", IndexFile, "notes.txt"}
	if !slices.Equal(names, want) {
		t.Errorf("folder holds %v; want %v", names, want)
	}
	if g, err := ReadDir(dir); err != nil || len(g.Tensors) != 24 {
		t.Errorf("ReadDir after re-sharding: %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	good := []*Tensor{{Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}}
	if err := WriteFile(path, nil, good); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("mode %v; want readable by group and others like os.WriteFile's 0644", st.Mode())
	}
	before, _ := os.ReadFile(path)
	bad := []*Tensor{{Name: "a", DType: F32, Shape: []int{2}, Data: []byte{1}}}
	err = WriteFile(path, nil, bad)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "tensor a: 1 data bytes but F32 [2] needs 8") {
		t.Errorf("got %v; want an error naming %s and the tensor", err, path)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a failed write changed the existing file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir", "x.safetensors"), nil, good); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}

func TestFloat32AndFromFloat32(t *testing.T) {
	v := []float32{1, -2, 0.5, 3}
	for _, dt := range []DType{F32, BF16, F16} {
		tt, err := FromFloat32("x", []int{2, 2}, v, dt)
		if err != nil {
			t.Fatal(err)
		}
		if len(tt.Data) != 4*dt.Size() {
			t.Errorf("%s: %d bytes", dt, len(tt.Data))
		}
		back, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back, v) {
			t.Errorf("%s: %v → %v", dt, v, back)
		}
	}
	f64 := &Tensor{Name: "d", DType: F64, Shape: []int{2}, Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.1)), math.Float64bits(-1e300))}
	if got, err := f64.Float32(); err != nil || got[0] != float32(0.1) || !math.IsInf(float64(got[1]), -1) {
		t.Errorf("F64 → %v, %v; want [0.1 -Inf]", got, err)
	}
	if bf, _ := FromFloat32("b", nil, []float32{1.5}, BF16); !bytes.Equal(bf.Data, []byte{0xc0, 0x3f}) || bf.Shape == nil {
		t.Errorf("bf16 scalar 1.5 = % x shape %v; want c0 3f, []", bf.Data, bf.Shape)
	}
	for _, tc := range []struct {
		name string
		make func() error
		want string
	}{
		{"too few values", func() error { _, err := FromFloat32("x", []int{3}, v, F32); return err }, "tensor x: 4 values for shape [3], which holds 3"},
		{"int dtype", func() error { _, err := FromFloat32("x", []int{4}, v, I32); return err }, "cannot write float32 values as I32"},
		{"negative shape", func() error { _, err := FromFloat32("x", []int{-2, -2}, v, F32); return err }, "tensor x: negative dimension in shape [-2 -2]"},
		{"Float32 of I64", func() error {
			_, err := (&Tensor{Name: "i", DType: I64, Shape: []int{1}, Data: make([]byte, 8)}).Float32()
			return err
		}, "tensor i: dtype I64: not a float dtype"},
		{"Float32 of short data", func() error {
			_, err := (&Tensor{Name: "s", DType: F32, Shape: []int{8}, Data: make([]byte, 4)}).Float32()
			return err
		}, "tensor s: 4 data bytes but F32 [8] needs 32"},
		{"Float32 of bad dtype", func() error { _, err := (&Tensor{Name: "q", DType: "Q4"}).Float32(); return err }, "dtype Q4: not a float dtype"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want %q", err, tc.want)
			}
		})
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

func TestEncodeErrors(t *testing.T) {
	u8 := func(name string, n int) *Tensor {
		return &Tensor{Name: name, DType: U8, Shape: []int{n}, Data: make([]byte, n)}
	}
	for _, tc := range []struct {
		name    string
		tensors []*Tensor
		w       *failWriter
		want    string
	}{
		{"duplicate", []*Tensor{u8("a", 1), u8("b", 1), u8("a", 1)}, nil, "duplicate tensor name a"},
		{"unknown dtype", []*Tensor{{Name: "a", DType: "F8", Shape: []int{1}, Data: []byte{0}}}, nil, `tensor a: unknown dtype "F8"`},
		{"data length", []*Tensor{{Name: "a", DType: I32, Shape: []int{2, 3}, Data: make([]byte, 20)}}, nil, "tensor a: 20 data bytes but I32 [2 3] needs 24"},
		{"negative shape", []*Tensor{{Name: "a", DType: U8, Shape: []int{-1, -4}, Data: make([]byte, 4)}}, nil, "tensor a: negative dimension"},
		{"overflowing shape", []*Tensor{{Name: "a", DType: F64, Shape: []int{1 << 40, 1 << 40}}}, nil, "tensor a: shape [1099511627776 1099511627776] of F64 is too large"},
		{"reserved name", []*Tensor{u8("__metadata__", 1)}, nil, "reserved for metadata"},
		{"invalid utf-8 name", []*Tensor{u8("a\xff", 1)}, nil, "not valid UTF-8"},
		{"nil tensor", []*Tensor{u8("a", 1), nil}, nil, "tensor 1 of 2 is nil"},
		{"writer fails on length", []*Tensor{u8("a", 1)}, &failWriter{0}, "writing header length: disk full"},
		{"writer fails on data", []*Tensor{u8("a", 1), u8("b", 1)}, &failWriter{3}, "writing tensor b: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w interface{ Write([]byte) (int, error) } = &bytes.Buffer{}
			if tc.w != nil {
				w = tc.w
			}
			err := Encode(w, nil, tc.tensors)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want %q", err, tc.want)
			}
			if tc.w == nil && w.(*bytes.Buffer).Len() != 0 {
				t.Errorf("%d bytes written before the error", w.(*bytes.Buffer).Len())
			}
		})
	}
}

// encodeRaw builds a file from a literal header and data.
func encodeRaw(header string, data []byte) []byte {
	var b bytes.Buffer
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
	b.Write(n[:])
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func TestParseErrors(t *testing.T) {
	eight := make([]byte, 8)
	u8 := `{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated: 0 bytes"},
		{"header longer than file", encodeRaw(`{}`, nil)[:9], "truncated: header length 2 but only 1 bytes follow"},
		{"absurd header length", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{'}, "exceeds the 104857600-byte limit"},
		{"bad json", encodeRaw(`{"a":`, nil), "invalid header JSON"},
		{"null header", encodeRaw(`null`, nil), "header must be a JSON object"},
		{"array header", encodeRaw(`[1]`, nil), "header must be a JSON object"},
		{"trailing data", encodeRaw(`{}{}`, nil), "data after its JSON object"},
		{"invalid utf-8", encodeRaw("{\"\xff\":"+u8+"}", []byte{0}), "not valid UTF-8"},
		{"duplicate tensor", encodeRaw(`{"a":`+u8+`,"a":`+u8+`}`, []byte{0}), "tensor a appears twice"},
		{"duplicate metadata", encodeRaw(`{"__metadata__":{},"__metadata__":{}}`, nil), "two __metadata__ entries"},
		{"entry not an object", encodeRaw(`{"w":7}`, nil), "tensor w: invalid header entry"},
		{"missing dtype", encodeRaw(`{"w":{"shape":[1],"data_offsets":[0,1]}}`, []byte{0}), "tensor w: header entry has no dtype"},
		{"missing shape", encodeRaw(`{"w":{"dtype":"U8","data_offsets":[0,1]}}`, []byte{0}), "tensor w: header entry has no shape"},
		{"three offsets", encodeRaw(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, []byte{0}), "tensor w: data_offsets must be [begin, end], got [0 1 2]"},
		{"fractional shape", encodeRaw(`{"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, []byte{0}), "tensor w: invalid header entry"},
		{"unknown dtype", encodeRaw(`{"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), `tensor w: unknown dtype "F8"`},
		{"offsets past end (truncated data)", encodeRaw(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, eight), "tensor w: data_offsets [0, 16] outside the 8 data bytes"},
		{"negative offset", encodeRaw(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, eight), "tensor w: data_offsets [-1, 0] outside"},
		{"reversed offsets", encodeRaw(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}`, eight), "tensor w: data_offsets [4, 2] outside"},
		{"header lies about size", encodeRaw(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}}`, eight), "tensor w: data_offsets [0, 8] cover 8 bytes but F32 [4] needs 16"},
		{"negative shape", encodeRaw(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, eight), "tensor w: negative dimension"},
		{"overflowing shape", encodeRaw(`{"w":{"dtype":"BF16","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, eight), "tensor w: shape [4294967296 4294967296] of BF16 is too large"},
		{"overlap", encodeRaw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "tensors a and b overlap"},
		{"bad metadata", encodeRaw(`{"__metadata__":{"a":1}}`, nil), "__metadata__ must map strings to strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data, "m.safetensors")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "m.safetensors: ") {
				t.Fatalf("got %v; want an error naming the file and containing %q", err, tc.want)
			}
		})
	}
}

// TestParseLenient: what the reference reader also accepts, or what cannot mislead a loader.
func TestParseLenient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		data  []byte
		count int
	}{
		{"empty object", encodeRaw(`{}`, nil), 0},
		{"padding and null metadata", encodeRaw(`{"__metadata__":null}    `, nil), 0},
		{"gap and trailing bytes", encodeRaw(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, make([]byte, 8)), 1},
		{"zero-size tensors share an offset", encodeRaw(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]}}`, nil), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.data, "m")
			if err != nil || len(f.Tensors) != tc.count || f.Metadata == nil {
				t.Fatalf("got %v, %v; want %d tensors and a metadata map", f, err, tc.count)
			}
		})
	}
}

func TestReadDirErrors(t *testing.T) {
	f := mustRead(t, "qwen3-tiny")
	one := []*Tensor{f.Tensors["model.norm.weight"]}
	write := func(t *testing.T, path string, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"no weights", func(*testing.T, string) {}, "no weights in DIR: expected model.safetensors or model.safetensors.index.json"},
		{"missing shard", func(t *testing.T, d string) {
			write(t, filepath.Join(d, IndexFile), `{"weight_map":{"model.norm.weight":"model-00001-of-00002.safetensors"}}`)
		}, "DIR/model.safetensors.index.json names shard model-00001-of-00002.safetensors, which is missing from DIR"},
		{"tensor not in its shard", func(t *testing.T, d string) {
			if err := WriteFile(filepath.Join(d, "s1.safetensors"), nil, one); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(d, IndexFile), `{"weight_map":{"lm_head.weight":"s1.safetensors"}}`)
		}, "maps tensor lm_head.weight to s1.safetensors, which does not hold it"},
		{"duplicate across shards", func(t *testing.T, d string) {
			x := &Tensor{Name: "x", DType: U8, Shape: []int{1}, Data: []byte{1}}
			if WriteFile(filepath.Join(d, "s1.safetensors"), nil, one) != nil || WriteFile(filepath.Join(d, "s2.safetensors"), nil, append([]*Tensor{x}, one...)) != nil {
				t.Fatal("setup")
			}
			write(t, filepath.Join(d, IndexFile), `{"weight_map":{"model.norm.weight":"s1.safetensors","x":"s2.safetensors"}}`)
		}, "tensor model.norm.weight is in both DIR/s1.safetensors and DIR/s2.safetensors"},
		{"corrupt shard", func(t *testing.T, d string) {
			write(t, filepath.Join(d, "s1.safetensors"), "\x01\x00\x00\x00\x00\x00\x00\x00{")
			write(t, filepath.Join(d, IndexFile), `{"weight_map":{"a":"s1.safetensors"}}`)
		}, "DIR/s1.safetensors: invalid header JSON"},
		{"corrupt single file", func(t *testing.T, d string) {
			write(t, filepath.Join(d, SingleFile), "\x01")
		}, "DIR/model.safetensors: truncated: 1 bytes"},
		{"index bad json", func(t *testing.T, d string) { write(t, filepath.Join(d, IndexFile), `{`) }, "DIR/model.safetensors.index.json: invalid JSON"},
		{"index without weight_map", func(t *testing.T, d string) { write(t, filepath.Join(d, IndexFile), `{"metadata":{}}`) }, "weight_map is empty or missing"},
		{"shard path escapes", func(t *testing.T, d string) {
			write(t, filepath.Join(d, IndexFile), `{"weight_map":{"a":"../x.safetensors"}}`)
		}, `tensor a: shard "../x.safetensors" must be a file name in the same folder`},
		{"shard is dot-dot", func(t *testing.T, d string) { write(t, filepath.Join(d, IndexFile), `{"weight_map":{"a":".."}}`) }, "must be a file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := ReadDir(dir)
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v; want an error containing %q", err, want)
			}
		})
	}
}

func TestGetErrors(t *testing.T) {
	single := mustRead(t, "qwen3-tiny")
	dir := t.TempDir()
	if err := WriteDir(dir, nil, single.Sorted(), 100_000); err != nil {
		t.Fatal(err)
	}
	sharded, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	normShard := sharded.Tensors["model.norm.weight"].Source
	for _, tc := range []struct {
		name  string
		f     *File
		get   string
		shape []int
		want  string
	}{
		{"missing in file", single, "lm_head.weight", nil, "missing tensor lm_head.weight in " + fixturePath("qwen3-tiny")},
		{"missing in folder", sharded, "lm_head.weight", []int{1}, "missing tensor lm_head.weight in " + dir},
		{"shape in file", single, "model.norm.weight", []int{32}, "tensor model.norm.weight has shape [64], want [32] (file " + fixturePath("qwen3-tiny") + ")"},
		{"shape in shard", sharded, "model.norm.weight", []int{64, 1}, "tensor model.norm.weight has shape [64], want [64 1] (file " + normShard + ")"},
		{"shape of a new tensor", &File{Source: "ckpt", Tensors: map[string]*Tensor{"w": {Name: "w", Shape: []int{2}}}}, "w", []int{3}, "(file ckpt)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.f.Get(tc.get, tc.shape); err == nil || err.Error() != tc.want && !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("got %v; want %q", err, tc.want)
			}
		})
	}
	if tt, err := single.Get("model.norm.weight", nil); err != nil || tt.Name != "model.norm.weight" {
		t.Errorf("Get without a shape: %v, %v", tt, err)
	}
}
