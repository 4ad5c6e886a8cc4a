package safetensors

import (
	"bytes"
	"encoding/binary"
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

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture, tensor string
		shape           []int
	}{
		{"qwen3-tiny", "model.embed_tokens.weight", []int{512, 64}},
		{"qwen3-tiny", "model.layers.0.self_attn.q_norm.weight", []int{16}},
		{"qwen3-tiny-untied", "lm_head.weight", []int{512, 64}},
		{"qwen2-tiny", "model.layers.1.self_attn.k_proj.bias", []int{32}},
	} {
		path := fixturePath(tc.fixture)
		f, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tt, err := f.Get(tc.tensor, tc.shape)
		if err != nil {
			t.Fatalf("%s: %v", tc.fixture, err)
		}
		// Check the first value independently: read the header offset and the bytes by hand.
		raw, _ := os.ReadFile(path)
		n := binary.LittleEndian.Uint64(raw)
		v, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		start := bytes.Index(raw[8:8+n], []byte(`"`+tc.tensor+`"`))
		if start < 0 {
			t.Fatalf("%s not in header", tc.tensor)
		}
		off := int(8 + n)
		// data_offsets begin: parse the number after "data_offsets":[
		hdr := string(raw[8+start : 8+n])
		i := strings.Index(hdr, `"data_offsets":[`) + len(`"data_offsets":[`)
		var begin int
		for ; hdr[i] >= '0' && hdr[i] <= '9'; i++ {
			begin = begin*10 + int(hdr[i]-'0')
		}
		want := math.Float32frombits(binary.LittleEndian.Uint32(raw[off+begin:]))
		if v[0] != want {
			t.Errorf("%s %s[0] = %v; want %v", tc.fixture, tc.tensor, v[0], want)
		}
	}
}

func TestRoundTripBitIdentical(t *testing.T) {
	for _, name := range fixtures {
		f, err := ReadFile(fixturePath(name))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		var ts []*Tensor
		for _, n := range f.Names() {
			ts = append(ts, f.Tensors[n])
		}
		p1 := filepath.Join(dir, "a.safetensors")
		if err := WriteFile(p1, f.Metadata, ts); err != nil {
			t.Fatal(err)
		}
		g, err := ReadFile(p1)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range f.Names() {
			if !bytes.Equal(f.Tensors[n].Data, g.Tensors[n].Data) || !slices.Equal(f.Tensors[n].Shape, g.Tensors[n].Shape) || f.Tensors[n].DType != g.Tensors[n].DType {
				t.Errorf("%s: tensor %s changed in the round trip", name, n)
			}
		}
		var ts2 []*Tensor
		for _, n := range g.Names() {
			ts2 = append(ts2, g.Tensors[n])
		}
		p2 := filepath.Join(dir, "b.safetensors")
		if err := WriteFile(p2, g.Metadata, ts2); err != nil {
			t.Fatal(err)
		}
		b1, _ := os.ReadFile(p1)
		b2, _ := os.ReadFile(p2)
		if !bytes.Equal(b1, b2) {
			t.Errorf("%s: write → read → write is not byte-identical", name)
		}
		if (8+binary.LittleEndian.Uint64(b1))%8 != 0 {
			t.Errorf("%s: data section not 8-byte aligned", name)
		}
	}
}

func TestShardedRoundTrip(t *testing.T) {
	f, err := ReadFile(fixturePath("qwen3-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	var ts []*Tensor
	for _, n := range f.Names() {
		ts = append(ts, f.Tensors[n])
	}
	dir := t.TempDir()
	if err := WriteDir(dir, map[string]string{"format": "pt"}, ts, 100_000); err != nil {
		t.Fatal(err)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	if len(shards) < 3 {
		t.Fatalf("got %d shards; want several for a 430 KB model in 100 KB shards", len(shards))
	}
	g, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Tensors) != len(f.Tensors) {
		t.Fatalf("read %d tensors back; want %d", len(g.Tensors), len(f.Tensors))
	}
	for _, n := range f.Names() {
		if !bytes.Equal(f.Tensors[n].Data, g.Tensors[n].Data) {
			t.Errorf("tensor %s differs after sharding", n)
		}
	}
}

func TestBF16AndF16Conversions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		bf16 uint16
		f16  uint16
	}{
		{"one", 1, 0x3f80, 0x3c00},
		{"minus two", -2, 0xc000, 0xc000},
		{"zero", 0, 0x0000, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{"inf", float32(math.Inf(1)), 0x7f80, 0x7c00},
		{"-inf", float32(math.Inf(-1)), 0xff80, 0xfc00},
		// 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even → 1.0.
		{"bf16 tie to even down", 1 + 1.0/256, 0x3f80, 0x3c04},
		// 1 + 3·2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even) → up.
		{"bf16 tie to even up", 1 + 3.0/256, 0x3f82, 0x3c0c},
		// f16: 1 + 2^-11 is halfway between 1.0 and 1+2^-10: ties to even → 1.0.
		{"f16 tie to even", 1 + 1.0/2048, 0x3f80, 0x3c00},
		{"f16 overflow", 70000, 0x4789, 0x7c00},
		{"f16 max", 65504, 0x4780, 0x7bff},
		{"f16 smallest subnormal", float32(math.Ldexp(1, -24)), 0x3380, 0x0001},
		{"f16 underflow to zero", float32(math.Ldexp(1, -26)), 0x3280, 0x0000},
		{"f16 subnormal", float32(math.Ldexp(3, -20)), 0x3640, 0x0030},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Float32ToBF16(tc.in); got != tc.bf16 {
				t.Errorf("Float32ToBF16(%v) = %#04x; want %#04x", tc.in, got, tc.bf16)
			}
			if got := Float32ToF16(tc.in); got != tc.f16 {
				t.Errorf("Float32ToF16(%v) = %#04x; want %#04x", tc.in, got, tc.f16)
			}
		})
	}
	// Every finite bf16 and f16 pattern widens and narrows back to itself.
	for h := 0; h < 1<<16; h++ {
		b := uint16(h)
		if f := BF16ToFloat32(b); !math.IsNaN(float64(f)) && Float32ToBF16(f) != b {
			t.Fatalf("bf16 %#04x → %v → %#04x", b, f, Float32ToBF16(f))
		}
		if f := F16ToFloat32(b); !math.IsNaN(float64(f)) && Float32ToF16(f) != b {
			t.Fatalf("f16 %#04x → %v → %#04x", b, f, Float32ToF16(f))
		}
	}
	if f := BF16ToFloat32(Float32ToBF16(float32(math.NaN()))); !math.IsNaN(float64(f)) {
		t.Error("NaN did not stay NaN through bf16")
	}
	if f := F16ToFloat32(Float32ToF16(float32(math.NaN()))); !math.IsNaN(float64(f)) {
		t.Error("NaN did not stay NaN through f16")
	}
}

func TestFromFloat32(t *testing.T) {
	v := []float32{1, -2, 0.5, 3}
	for _, dt := range []DType{F32, BF16, F16} {
		tt, err := FromFloat32("x", []int{2, 2}, v, dt)
		if err != nil {
			t.Fatal(err)
		}
		back, err := tt.Float32()
		if err != nil {
			t.Fatal(err)
		}
		for i := range v {
			if back[i] != v[i] {
				t.Errorf("%s: %v → %v", dt, v, back)
			}
		}
	}
	if _, err := FromFloat32("x", []int{3}, v, F32); err == nil {
		t.Error("shape mismatch accepted")
	}
	if _, err := FromFloat32("x", []int{4}, v, I32); err == nil {
		t.Error("I32 accepted for float values")
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
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"header longer than file", encodeRaw(`{}`, nil)[:9], "truncated: header length 2"},
		{"absurd header length", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{'}, "exceeds"},
		{"bad json", encodeRaw(`{"a":`, nil), "invalid header JSON"},
		{"unknown dtype", encodeRaw(`{"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), `tensor w: unknown dtype "F8"`},
		{"offsets past end (truncated data)", encodeRaw(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, eight), "tensor w: data_offsets [0, 16] outside the 8 data bytes"},
		{"header lies about size", encodeRaw(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}}`, eight), "needs 16"},
		{"negative shape", encodeRaw(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, eight), "negative dimension"},
		{"overlap", encodeRaw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "overlap"},
		{"bad metadata", encodeRaw(`{"__metadata__":{"a":1}}`, nil), "__metadata__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data, "m.safetensors")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "m.safetensors") {
				t.Fatalf("got %v; want an error naming the file and containing %q", err, tc.want)
			}
		})
	}
}

func TestReadDirErrors(t *testing.T) {
	f, err := ReadFile(fixturePath("qwen3-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	one := []*Tensor{f.Tensors["model.norm.weight"]}
	for _, tc := range []struct {
		name  string
		setup func(dir string)
		want  string
	}{
		{"no weights", func(string) {}, "expected model.safetensors or model.safetensors.index.json"},
		{"missing shard", func(d string) {
			os.WriteFile(filepath.Join(d, IndexFile), []byte(`{"weight_map":{"model.norm.weight":"model-00001-of-00002.safetensors"}}`), 0o644)
		}, "names shard model-00001-of-00002.safetensors, which is missing"},
		{"tensor not in its shard", func(d string) {
			WriteFile(filepath.Join(d, "s1.safetensors"), nil, one)
			os.WriteFile(filepath.Join(d, IndexFile), []byte(`{"weight_map":{"lm_head.weight":"s1.safetensors"}}`), 0o644)
		}, "maps tensor lm_head.weight to s1.safetensors, which does not hold it"},
		{"duplicate across shards", func(d string) {
			WriteFile(filepath.Join(d, "s1.safetensors"), nil, one)
			x := &Tensor{Name: "x", DType: U8, Shape: []int{1}, Data: []byte{1}}
			WriteFile(filepath.Join(d, "s2.safetensors"), nil, append([]*Tensor{x}, one...))
			os.WriteFile(filepath.Join(d, IndexFile), []byte(`{"weight_map":{"model.norm.weight":"s1.safetensors","x":"s2.safetensors"}}`), 0o644)
		}, "model.norm.weight"},
		{"index bad json", func(d string) { os.WriteFile(filepath.Join(d, IndexFile), []byte(`{`), 0o644) }, "invalid JSON"},
		{"shard path escapes", func(d string) {
			os.WriteFile(filepath.Join(d, IndexFile), []byte(`{"weight_map":{"a":"../x.safetensors"}}`), 0o644)
		}, "must be a file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			_, err := ReadDir(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestGetErrors(t *testing.T) {
	f, err := ReadFile(fixturePath("qwen3-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get("lm_head.weight", nil); err == nil || !strings.Contains(err.Error(), "missing tensor lm_head.weight") {
		t.Errorf("missing tensor: got %v", err)
	}
	if _, err := f.Get("model.norm.weight", []int{32}); err == nil || !strings.Contains(err.Error(), "has shape [64], want [32]") ||
		!strings.Contains(err.Error(), SingleFile) {
		t.Errorf("shape mismatch: got %v", err)
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, name := range fixtures {
		data, err := os.ReadFile(fixturePath(name))
		if err != nil {
			f.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(data)
		f.Add(data[:8+n])
		f.Add(data[:8+n+64])
	}
	f.Add(encodeRaw(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 16)))
	f.Add(encodeRaw(`{"w":{"dtype":"BF16","shape":[1099511627776,1099511627776],"data_offsets":[0,2]}}`, make([]byte, 2)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		// Whatever parses must re-encode and parse to the same tensors.
		var ts []*Tensor
		for _, n := range file.Names() {
			ts = append(ts, file.Tensors[n])
		}
		var b bytes.Buffer
		if err := Encode(&b, file.Metadata, ts); err != nil {
			t.Fatalf("parsed but cannot re-encode: %v", err)
		}
		again, err := Parse(b.Bytes(), "re-encoded")
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		for _, n := range file.Names() {
			if !bytes.Equal(file.Tensors[n].Data, again.Tensors[n].Data) {
				t.Fatalf("tensor %s changed", n)
			}
		}
	})
}

// BenchmarkReadWrite100MB compares safetensors write/read of ~100 MB with os.WriteFile/os.ReadFile
// of the same bytes on the same disk.
func BenchmarkReadWrite100MB(b *testing.B) {
	const per = 4 << 20
	var ts []*Tensor
	for i := 0; i < 25; i++ {
		ts = append(ts, &Tensor{Name: "t" + string(rune('a'+i)), DType: F32, Shape: []int{per / 4}, Data: bytes.Repeat([]byte{byte(i)}, per)})
	}
	dir := b.TempDir()
	var buf bytes.Buffer
	if err := Encode(&buf, nil, ts); err != nil {
		b.Fatal(err)
	}
	plain := buf.Bytes()
	b.SetBytes(int64(len(plain)))
	// Both files exist before any timing, so the read benchmarks can run alone.
	if err := WriteFile(filepath.Join(dir, "m.safetensors"), nil, ts); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain"), plain, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("safetensors-write", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for i := 0; i < b.N; i++ {
			if err := WriteFile(filepath.Join(dir, "m.safetensors"), nil, ts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-write", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for i := 0; i < b.N; i++ {
			f, _ := os.Create(filepath.Join(dir, "plain"))
			f.Write(plain)
			f.Sync()
			f.Close()
		}
	})
	b.Run("safetensors-read", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for i := 0; i < b.N; i++ {
			if _, err := ReadFile(filepath.Join(dir, "m.safetensors")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-read", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile(filepath.Join(dir, "plain")); err != nil {
				b.Fatal(err)
			}
		}
	})
}
